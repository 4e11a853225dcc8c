"""Moved to `tfscones.evaluation.diversity`: this shim re-exports its public names.

Old imports such as `from tfscones import diversity` keep working; new code imports from
`tfscones.evaluation`.
"""

from tfscones.evaluation.diversity import (
    DiversityReport,
    average_oracle_bleu,
    diversity_report,
    human_oracle_bleu,
    human_pairwise_bleu,
    pairwise_bleu,
    references_covered,
)

__all__ = [
    "DiversityReport",
    "average_oracle_bleu",
    "diversity_report",
    "human_oracle_bleu",
    "human_pairwise_bleu",
    "pairwise_bleu",
    "references_covered",
]
