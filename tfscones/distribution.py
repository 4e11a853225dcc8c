"""Deprecated: moved to `tfscones.training.distribution`; kept for existing imports."""

import sys
import warnings

from tfscones.training import distribution as _moved

warnings.warn(
    "tfscones.distribution moved to tfscones.training.distribution",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
