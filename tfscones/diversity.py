"""Deprecated: moved to `tfscones.evaluation.diversity`; kept for existing imports."""

import sys
import warnings

from tfscones.evaluation import diversity as _moved

warnings.warn(
    "tfscones.diversity moved to tfscones.evaluation.diversity", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = _moved
