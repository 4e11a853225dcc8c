"""Synthetic language pairs of controlled ambiguity, sampled from IBM Model 3.

Stahlberg & Kumar (2022, §5 and Appendix B) train on synthetic English-like translations of real
German sentences, sampled from IBM-3 (Brown et al. 1993) with its tables tempered by γ (their
eq. 10): a low γ gives a nearly deterministic language pair, a high γ an ambiguous one.

- `estimation`: `estimate_ibm3`, our own EM (no external aligner): Model 1 EM and Viterbi
  alignments (`alignment`, over the flat arrays of `word_corpus`), then fertility, NULL
  insertion and distortion from relative frequencies; settings in `options`.
- `parameters`: `IBM3Parameters`, the estimated tables and their lookups; IBM-3's own source
  word ids (`NULL_WORD_ID`, `UNK_WORD_ID`), unrelated to the SentencePiece ids of
  `tfscones.data`.
- `tempering`: eq. 10 (`tempered`) and the tempered tables sampling draws from.
- `sampling`: the generative story of Appendix B (`sample_translation`) and a whole corpus
  (`synthesize`).
- `parameter_files`: `ibm3.json` and `ibm3.npz`, written by `IBM3Parameters.save`.
- `corpora`: one temperature's corpus written as files (`write_corpus`), and its statistics.

`tfscones synthetic` estimates the model from parallel text files and writes one synthetic
corpus per temperature; `tfscones reproduce synthetic` does so and trains on them.
"""

from tfscones.synthetic.estimation import estimate_ibm3
from tfscones.synthetic.options import EstimationOptions
from tfscones.synthetic.parameters import (
    NULL_WORD,
    NULL_WORD_ID,
    UNK_WORD,
    UNK_WORD_ID,
    IBM3Parameters,
)
from tfscones.synthetic.sampling import (
    MAX_EMPTY_RESAMPLES,
    SampledTranslation,
    sample_translation,
    synthesize,
)
from tfscones.synthetic.tempering import check_temperature, tempered

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
