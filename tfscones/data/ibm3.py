"""Moved to `tfscones.synthetic`: this shim re-exports the public IBM-3 names.

Estimation is in `tfscones.synthetic.estimation`, the model in `tfscones.synthetic.parameters`,
temperature (eq. 10) in `tfscones.synthetic.tempering`, sampling in `tfscones.synthetic.sampling`
and the parameter files in `tfscones.synthetic.parameter_files`. The old constants `NULL`,
`UNK`, `NULL_ID` and `UNK_ID` are now `NULL_WORD`, `UNK_WORD`, `NULL_WORD_ID` and `UNK_WORD_ID`:
IBM-3's `UNK_ID` of 1 shadowed the SentencePiece `tfscones.data.UNK_ID` of 2.
"""

from tfscones.synthetic import (
    MAX_EMPTY_RESAMPLES,
    NULL_WORD,
    NULL_WORD_ID,
    UNK_WORD,
    UNK_WORD_ID,
    EstimationOptions,
    IBM3Parameters,
    SampledTranslation,
    check_temperature,
    estimate_ibm3,
    sample_translation,
    synthesize,
    tempered,
)

__all__ = [
    "MAX_EMPTY_RESAMPLES",
    "NULL_WORD",
    "NULL_WORD_ID",
    "UNK_WORD",
    "UNK_WORD_ID",
    "EstimationOptions",
    "IBM3Parameters",
    "SampledTranslation",
    "check_temperature",
    "estimate_ibm3",
    "sample_translation",
    "synthesize",
    "tempered",
]
