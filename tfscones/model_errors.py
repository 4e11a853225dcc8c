"""Moved to `tfscones.evaluation.model_errors`: this shim re-exports its public names.

Old imports such as `from tfscones import model_errors` keep working; new code imports from
`tfscones.evaluation`.
"""

from tfscones.evaluation.model_errors import (
    DEFAULT_TOLERANCE,
    ScoreSummary,
    empty_string_rate,
    empty_translation_scores,
    length_ratio,
    score_summary,
    search_error_rate,
)

__all__ = [
    "DEFAULT_TOLERANCE",
    "ScoreSummary",
    "empty_string_rate",
    "empty_translation_scores",
    "length_ratio",
    "score_summary",
    "search_error_rate",
]
