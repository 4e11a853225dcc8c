"""Deprecated: moved to `tfscones.evaluation.analysis`; kept for existing imports."""

import sys
import warnings

from tfscones.evaluation import analysis as _moved

warnings.warn(
    "tfscones.analysis moved to tfscones.evaluation.analysis", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = _moved
