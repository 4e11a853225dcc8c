"""Moved to `tfscones.evaluation.calibration`: this shim re-exports its public names.

Old imports such as `from tfscones import calibration` keep working; new code imports from
`tfscones.evaluation`.
"""

from tfscones.evaluation.calibration import (
    DEFAULT_NUM_BINS,
    CalibrationBins,
    ForcedDecoding,
    calibration_bins,
    compiled_force_decode,
    expected_calibration_error,
    force_decode,
)

__all__ = [
    "DEFAULT_NUM_BINS",
    "CalibrationBins",
    "ForcedDecoding",
    "calibration_bins",
    "compiled_force_decode",
    "expected_calibration_error",
    "force_decode",
]
