"""Deprecated: moved to `tfscones.evaluation.model_errors`; kept for existing imports."""

import sys
import warnings

from tfscones.evaluation import model_errors as _moved

warnings.warn(
    "tfscones.model_errors moved to tfscones.evaluation.model_errors",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
