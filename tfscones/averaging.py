"""Deprecated: moved to `tfscones.training.averaging`; kept for existing imports."""

import sys
import warnings

from tfscones.training import averaging as _moved

warnings.warn(
    "tfscones.averaging moved to tfscones.training.averaging", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = _moved
