"""Moved to `tfscones.heads`: this module re-exports the losses for old imports.

Each head's loss now lives in the head's module (`tfscones.heads.softmax`, `.scones`,
`.entmax`), and the shared target checks, masking and reduction in `tfscones.heads.loss_base`.
"""

from tfscones.heads.entmax import EntmaxLoss, SparsemaxLoss, entmax_token_loss
from tfscones.heads.loss_base import (
    check_sample_weight_shape,
    checked_token_ids,
    expand_to_rank,
    token_ids_and_logits,
    validate_label_smoothing,
)
from tfscones.heads.scones import SconesLoss, scones_terms, scones_token_loss
from tfscones.heads.softmax import SequenceCrossEntropy, cross_entropy_token_loss

__all__ = [
    "EntmaxLoss",
    "SconesLoss",
    "SequenceCrossEntropy",
    "SparsemaxLoss",
    "check_sample_weight_shape",
    "checked_token_ids",
    "cross_entropy_token_loss",
    "entmax_token_loss",
    "expand_to_rank",
    "scones_terms",
    "scones_token_loss",
    "token_ids_and_logits",
    "validate_label_smoothing",
]
