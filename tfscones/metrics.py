"""Moved to `tfscones.evaluation.metrics`: this shim re-exports its public names.

Old imports such as `from tfscones import metrics` keep working; new code imports from
`tfscones.evaluation`.
"""

from tfscones.evaluation.metrics import (
    BLEU_TOKENIZER,
    bleu_signature,
    chrf_signature,
    corpus_bleu,
    corpus_chrf,
    sentence_bleu,
)

__all__ = [
    "BLEU_TOKENIZER",
    "bleu_signature",
    "chrf_signature",
    "corpus_bleu",
    "corpus_chrf",
    "sentence_bleu",
]
