"""Deprecated: moved to `tfscones.training.schedules`; kept for existing imports."""

import sys
import warnings

from tfscones.training import schedules as _moved

warnings.warn(
    "tfscones.schedules moved to tfscones.training.schedules", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = _moved
