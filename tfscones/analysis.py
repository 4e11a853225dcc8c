"""Moved to `tfscones.evaluation.analysis`: this shim re-exports its public names.

Old imports such as `from tfscones import analysis` keep working; new code imports from
`tfscones.evaluation`.
"""

from tfscones.evaluation.analysis import (
    DEFAULT_BEAM_SIZES,
    REFERENCE_BEAM,
    ROWS_PER_BATCH,
    BeamPoint,
    ExactSearchStatistics,
    ForcedStatistics,
    ModelAnalysis,
    analyze_model,
)

__all__ = [
    "DEFAULT_BEAM_SIZES",
    "REFERENCE_BEAM",
    "ROWS_PER_BATCH",
    "BeamPoint",
    "ExactSearchStatistics",
    "ForcedStatistics",
    "ModelAnalysis",
    "analyze_model",
]
