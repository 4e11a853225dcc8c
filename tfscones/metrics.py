"""Deprecated: moved to `tfscones.evaluation.metrics`; kept for existing imports."""

import sys
import warnings

from tfscones.evaluation import metrics as _moved

warnings.warn(
    "tfscones.metrics moved to tfscones.evaluation.metrics", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = _moved
