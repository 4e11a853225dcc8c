"""Moved to `tfscones.heads`: this module re-exports the loss metrics for old imports.

Each head's metrics now live in the head's module (`tfscones.heads.scones`, `.entmax`),
and `OutputHead.metrics()` returns the ones of a head.
"""

from tfscones.heads.entmax import EntmaxSupportSize
from tfscones.heads.scones import SconesNegativeTerm, SconesPositiveTerm

__all__ = ["EntmaxSupportSize", "SconesNegativeTerm", "SconesPositiveTerm"]
