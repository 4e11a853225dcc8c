"""Deprecated: IBM-3 moved to `tfscones.synthetic`; this name keeps existing imports working."""

import sys
import warnings

from tfscones import synthetic as _moved

warnings.warn("tfscones.data.ibm3 moved to tfscones.synthetic", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
