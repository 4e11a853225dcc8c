"""The softmax head: one distribution over the vocabulary, trained with cross-entropy."""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from tfscones.data.vocab_ids import PAD_ID
from tfscones.heads.base import (
    NORMALISED_CONFIDENCE,
    OutputHead,
    ScoreKind,
    as_float32,
    log_mean_exp,
)
from tfscones.heads.loss_base import TokenLoss, all_finite, gold_logits, weighted


@keras.saving.register_keras_serializable(package="tfscones")
class SoftmaxHead(OutputHead):
    """The standard softmax output layer: one distribution over the vocabulary.

    Its loss is `SequenceCrossEntropy` (`label_smoothing`); it has no loss metrics.

    Example:
    >>> SoftmaxHead().log_scores(tf.constant([0.0, 0.0])).numpy()
    array([-0.6931472, -0.6931472], dtype=float32)
    """

    name = "softmax"
    score_kind = ScoreKind(
        "log_softmax", normalised=True, sparse=False, confidence=NORMALISED_CONFIDENCE
    )

    def probabilities(self, logits):
        return tf.nn.softmax(as_float32(logits), axis=-1)

    def log_scores(self, logits):
        return tf.nn.log_softmax(as_float32(logits), axis=-1)

    def ensemble_logits(self, stacked_logits):
        """The log of the mean softmax: logsumexp_i log_softmax(z_i) - log N.

        The result is normalised already, so its `log_scores` are itself.
        """
        return log_mean_exp(tf.nn.log_softmax(as_float32(stacked_logits), axis=-1))

    def build_loss(self, **kwargs):
        return SequenceCrossEntropy(**kwargs)


def cross_entropy_token_loss(
    targets: tf.Tensor, logits: tf.Tensor, label_smoothing: float = 0.0
) -> tf.Tensor:
    """Per-token softmax cross-entropy against q = (1-ε) e_y + ε/|V|.

    -Σ_w q_w log softmax(z)_w = (1-ε)(lse(z) - z_y) + ε (lse(z) - mean(z)).

    Infinite logits take their limit (`tfscones.heads.loss_base`): the +inf tokens of a row share
    its probability, -inf tokens get none.

    Args:
        targets: int32 gold ids `[...]`.
        logits: float32 logits `[..., V]`.
        label_smoothing: ε in [0, 1).

    Returns:
        float32 per-token losses `[...]`.
    """
    return tf.cond(
        all_finite(logits),
        lambda: _finite_cross_entropy(targets, logits, label_smoothing),
        lambda: _limit_cross_entropy(targets, logits, label_smoothing),
    )


def _finite_cross_entropy(targets, logits, label_smoothing):
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)
    if label_smoothing > 0.0:
        uniform_term = tf.reduce_logsumexp(logits, axis=-1) - tf.reduce_mean(logits, axis=-1)
        loss = (1.0 - label_smoothing) * loss + label_smoothing * uniform_term
    return loss


def _limit_cross_entropy(targets, logits, label_smoothing):
    """The cross-entropy of rows with infinite logits, as its limit.

    In a row with a +inf logit the +inf tokens share the probability (logit 0) and the others
    get none (-inf); a -inf gold logit costs +inf.
    """
    certain = tf.equal(logits, math.inf)
    limit = tf.where(
        tf.reduce_any(certain, axis=-1, keepdims=True), tf.where(certain, 0.0, -math.inf), logits
    )
    log_normaliser = tf.reduce_logsumexp(limit, axis=-1)
    gold = gold_logits(targets, limit)
    loss = weighted(1.0 - label_smoothing, log_normaliser - gold)
    if label_smoothing > 0.0:
        loss += label_smoothing * (log_normaliser - tf.reduce_mean(limit, axis=-1))
    return tf.where(tf.equal(gold, -math.inf), math.inf, loss)


@keras.saving.register_keras_serializable(package="tfscones")
class SequenceCrossEntropy(TokenLoss):
    """Softmax cross-entropy with label smoothing: the baseline, masked like the other losses.

    Args:
        label_smoothing: ε in [0, 1); the target is (1-ε) e_y + ε/|V|.
        pad_id: Target id masked out of sequence losses; None masks nothing.
        **kwargs: `keras.losses.Loss` arguments (`name`, `reduction`).
    """

    def __init__(self, label_smoothing: float = 0.0, pad_id=PAD_ID, **kwargs):
        kwargs.setdefault("name", "sequence_cross_entropy")
        super().__init__(label_smoothing=label_smoothing, pad_id=pad_id, **kwargs)

    def per_token_loss(self, targets, logits):
        return cross_entropy_token_loss(targets, logits, self.label_smoothing)
