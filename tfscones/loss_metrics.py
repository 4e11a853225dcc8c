"""Keras metrics that show what a loss is made of: the SCONES terms and the entmax support size.

Each metric averages over non-pad target tokens, like the losses, so that `model.fit` can show
them next to the loss:

    model.compile(loss=SconesLoss(alpha=0.5),
                  metrics=[SconesPositiveTerm(), SconesNegativeTerm()])
"""

from __future__ import annotations

import keras
import tensorflow as tf

from tfscones import activations, losses
from tfscones.data.vocab_ids import PAD_ID


class _TokenMean(keras.metrics.Mean):
    """Mean of a per-token quantity over non-pad tokens (all labels for classification)."""

    def __init__(self, pad_id: int | None = PAD_ID, **kwargs):
        super().__init__(**kwargs)
        self.pad_id = None if pad_id is None else int(pad_id)

    def update_state(self, y_true, y_pred, sample_weight=None):
        targets, logits = losses.token_ids_and_logits(y_true, y_pred)
        weights = tf.ones_like(targets, tf.float32)
        if self.pad_id is not None and targets.shape.rank >= 2:
            weights = tf.cast(tf.not_equal(targets, self.pad_id), tf.float32)
        if sample_weight is not None:
            weights = weights * losses.expand_to_rank(sample_weight, weights.shape.rank)
        return super().update_state(self.per_token_value(targets, logits), sample_weight=weights)

    def per_token_value(self, targets: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        """The quantity to average: int32 targets `[...]`, float32 logits `[..., V]`."""
        raise NotImplementedError

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}


@keras.saving.register_keras_serializable(package="tfscones")
class SconesPositiveTerm(_TokenMean):
    """Mean SCONES L+ per token (eq. 7, or eq. 11 with label smoothing): -log σ(z_gold).

    Args:
        label_smoothing: λ in [0, 1], as in the loss.
        pad_id: Target id to ignore; None ignores nothing.
        **kwargs: `keras.metrics.Metric` arguments (`name`, `dtype`).
    """

    def __init__(self, label_smoothing: float = 0.0, pad_id=PAD_ID, **kwargs):
        kwargs.setdefault("name", "scones_positive")
        super().__init__(pad_id=pad_id, **kwargs)
        self.label_smoothing = losses.validate_label_smoothing(label_smoothing)

    def per_token_value(self, targets, logits):
        return losses.scones_terms(targets, logits, self.label_smoothing)[0]

    def get_config(self):
        return {**super().get_config(), "label_smoothing": self.label_smoothing}


@keras.saving.register_keras_serializable(package="tfscones")
class SconesNegativeTerm(SconesPositiveTerm):
    """Mean SCONES L- per token (eq. 8, or eq. 12): Σ_{w≠gold} -log(1 - σ(z_w)), before α.

    Args:
        label_smoothing: λ in [0, 1], as in the loss.
        pad_id: Target id to ignore; None ignores nothing.
        **kwargs: `keras.metrics.Metric` arguments (`name`, `dtype`).
    """

    def __init__(self, label_smoothing: float = 0.0, pad_id=PAD_ID, **kwargs):
        kwargs.setdefault("name", "scones_negative")
        super().__init__(label_smoothing=label_smoothing, pad_id=pad_id, **kwargs)

    def per_token_value(self, targets, logits):
        return losses.scones_terms(targets, logits, self.label_smoothing)[1]


@keras.saving.register_keras_serializable(package="tfscones")
class EntmaxSupportSize(_TokenMean):
    """Mean number of tokens with non-zero α-entmax probability (entmax paper, Table 5).

    Args:
        alpha: Entmax α > 1 of the head.
        n_iter: Bisection steps for α other than 1.5 and 2.
        pad_id: Target id to ignore; None ignores nothing.
        **kwargs: `keras.metrics.Metric` arguments (`name`, `dtype`).
    """

    def __init__(self, alpha: float = 1.5, n_iter: int = 50, pad_id=PAD_ID, **kwargs):
        kwargs.setdefault("name", "entmax_support_size")
        super().__init__(pad_id=pad_id, **kwargs)
        self.alpha = activations.validate_entmax_alpha(alpha)
        self.n_iter = int(n_iter)

    def per_token_value(self, targets, logits):
        del targets
        probabilities = activations.entmax_forward(logits, self.alpha, self.n_iter)
        return tf.reduce_sum(tf.cast(probabilities > 0, tf.float32), axis=-1)

    def get_config(self):
        return {**super().get_config(), "alpha": self.alpha, "n_iter": self.n_iter}
