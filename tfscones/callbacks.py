"""Deprecated: moved to `tfscones.training.callbacks`; kept for existing imports."""

import sys
import warnings

from tfscones.training import callbacks as _moved

warnings.warn(
    "tfscones.callbacks moved to tfscones.training.callbacks", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = _moved
