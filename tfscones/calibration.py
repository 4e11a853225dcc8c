"""Deprecated: moved to `tfscones.evaluation.calibration`; kept for existing imports."""

import sys
import warnings

from tfscones.evaluation import calibration as _moved

warnings.warn(
    "tfscones.calibration moved to tfscones.evaluation.calibration",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
