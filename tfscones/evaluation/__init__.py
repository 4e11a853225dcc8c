"""Evaluation: how good a model's translations are, and why; every number a standard one.

- `metrics`: BLEU and chrF by sacrebleu, with their signatures.
- `phone_errors`: WER and PER per language and macro-averaged, as the SIGMORPHON 2020
  grapheme-to-phoneme task scores them.
- `diversity`: quality and diversity of K translations a source (Shen et al. 2019, §4).
- `calibration`: force decoding, expected calibration error and support size (Peters & Martins
  2021, Tables 5-6).
- `model_errors`: empty-translation scores, search errors and length ratio (Stahlberg & Kumar
  2022, §4.3-4.4; Peters & Martins 2021, Table 4).
- `analysis`: `analyze_model` runs all of these on one model and one test set.
- `quality_estimation`: the unsupervised quality measures of Fomicheva et al. 2020 (Monte Carlo
  dropout among them), their correlation with quality and the AUROC of telling good from bad.

Programs (`training.analyze`, `training.diversity`) format and plot what these return.
"""

from tfscones.evaluation.analysis import (
    DEFAULT_BEAM_SIZES,
    BeamPoint,
    ExactSearchStatistics,
    ForcedStatistics,
    ModelAnalysis,
    analyze_model,
)
from tfscones.evaluation.calibration import (
    DEFAULT_NUM_BINS,
    CalibrationBins,
    ForcedDecoding,
    calibration_bins,
    compiled_force_decode,
    expected_calibration_error,
    force_decode,
)
from tfscones.evaluation.diversity import (
    DiversityReport,
    average_oracle_bleu,
    diversity_report,
    human_oracle_bleu,
    human_pairwise_bleu,
    pairwise_bleu,
    references_covered,
)
from tfscones.evaluation.metrics import (
    BLEU_TOKENIZER,
    bleu_signature,
    chrf_signature,
    corpus_bleu,
    corpus_chrf,
    sentence_bleu,
)
from tfscones.evaluation.model_errors import (
    DEFAULT_TOLERANCE,
    ScoreSummary,
    empty_string_rate,
    empty_translation_scores,
    length_ratio,
    score_summary,
    search_error_rate,
)
from tfscones.evaluation.phone_errors import (
    ErrorRates,
    error_rates,
    error_rates_by_language,
    macro_average,
)

__all__ = [
    "BLEU_TOKENIZER",
    "DEFAULT_BEAM_SIZES",
    "DEFAULT_NUM_BINS",
    "DEFAULT_TOLERANCE",
    "BeamPoint",
    "CalibrationBins",
    "DiversityReport",
    "ErrorRates",
    "ExactSearchStatistics",
    "ForcedDecoding",
    "ForcedStatistics",
    "ModelAnalysis",
    "ScoreSummary",
    "analyze_model",
    "average_oracle_bleu",
    "bleu_signature",
    "calibration_bins",
    "chrf_signature",
    "compiled_force_decode",
    "corpus_bleu",
    "corpus_chrf",
    "diversity_report",
    "empty_string_rate",
    "empty_translation_scores",
    "error_rates",
    "error_rates_by_language",
    "expected_calibration_error",
    "force_decode",
    "human_oracle_bleu",
    "human_pairwise_bleu",
    "length_ratio",
    "macro_average",
    "pairwise_bleu",
    "references_covered",
    "score_summary",
    "search_error_rate",
    "sentence_bleu",
]
