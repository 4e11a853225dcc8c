"""The tanh head: the SCONES head with tanh, rescaled into (0, 1), as its bounded activation.

The SCONES patent (Stahlberg & Kumar, US Patent 12,393,795, 2025, paragraph 43) allows "another
bounded activation function ... such as tanh" in place of the sigmoid. tanh maps onto (-1, 1),
so this head rescales it into (0, 1), the range of a probability:

    p(z) = (1 + tanh(z)) / 2.

Since tanh(z) = 2σ(2z) - 1, p(z) = σ(2z) exactly: the tanh head is the SCONES sigmoid head with
its logits doubled. It models nothing the sigmoid head cannot (an output layer can learn to
double its logits), but it changes the loss's scale per logit, and it shows that a head is added
by adding a module. The identity gives the stable forms used throughout:

    log p(z)       = -softplus(-2z)
    log (1 - p(z)) = -softplus(2z)

which are exact for any z, unlike log((1 + tanh z)/2), which is log 0 in float32 below z ≈ -9.

The loss is the SCONES loss of Stahlberg & Kumar 2022 (eq. 5-8, with label smoothing eq. 11-12)
applied to these probabilities: L+ = -log p(z_y), L- = Σ_{w≠y} -log(1 - p(z_w)), L = L+ + α L-.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from tfscones.heads.base import ADEQUACY_CONFIDENCE, OutputHead, ScoreKind, as_float32
from tfscones.heads.scones import (
    SconesLoss,
    SconesNegativeTerm,
    SconesPositiveTerm,
    mean_sigmoid_logits,
    sigmoid_logit_thresholds,
)


@keras.saving.register_keras_serializable(package="tfscones")
class TanhHead(OutputHead):
    """A SCONES head whose bounded activation is tanh rescaled into (0, 1): p = (1 + tanh z)/2.

    Like the sigmoid head, every token is its own binary classifier and the probabilities are
    not normalised. Search scores are log p(z) = -softplus(-2z), exact for any logit, never
    positive, and increasing in z (so greedy search may take the argmax of the raw logits).

    The output bias starts at -log(|V|)/2, which gives each token the sigmoid head's prior
    probability, σ(-log|V|) ≈ 1/|V|.

    Its loss is `TanhSconesLoss` (`alpha`, `label_smoothing`); its metrics are the loss's two
    terms, `TanhPositiveTerm` and `TanhNegativeTerm`.

    Example:
    >>> TanhHead().probabilities(tf.constant([0.0, 1.0])).numpy()  # (1 + tanh z) / 2
    array([0.5      , 0.8807971], dtype=float32)
    """

    name = "tanh"
    score_kind = ScoreKind(
        "log_half_tanh", normalised=False, sparse=False, confidence=ADEQUACY_CONFIDENCE
    )
    loss_arguments = ("alpha", "label_smoothing", "pad_id")

    def probabilities(self, logits):
        return tf.sigmoid(2.0 * as_float32(logits))

    def log_scores(self, logits):
        return -tf.nn.softplus(-2.0 * as_float32(logits))

    def ensemble_logits(self, stacked_logits):
        """logit(m)/2 of the mean m of the models' σ(2z) (`mean_sigmoid_logits`)."""
        return mean_sigmoid_logits(2.0 * as_float32(stacked_logits)) / 2.0

    def logit_thresholds(self, score_thresholds):
        return sigmoid_logit_thresholds(score_thresholds) / 2.0

    def build_loss(self, **kwargs):
        return TanhSconesLoss(**kwargs)

    def metrics(self):
        return [TanhPositiveTerm(), TanhNegativeTerm()]

    def output_bias_initializer(self, vocab_size):
        return keras.initializers.Constant(-0.5 * math.log(vocab_size))


@keras.saving.register_keras_serializable(package="tfscones")
class TanhSconesLoss(SconesLoss):
    """The SCONES loss (Stahlberg & Kumar 2022, eq. 5-8, 11-12) of the tanh head's probabilities.

    L+ = (1-λ)(-log p(z_y)) + λ(-log(1 - p(z_y))) and L- = Σ_{w≠y} (1-λ)(-log(1 - p(z_w))) +
    λ(-log p(z_w)) with p(z) = σ(2z): the sigmoid head's loss of the logits 2z, so the gradient
    is twice the sigmoid head's at 2z, ∂L/∂z_w = 2α(p(z_w) - λ) for w ≠ y.

    Args:
        alpha: Weight α > 0 of the negative term L-.
        label_smoothing: λ in [0, 1) (eq. 11-12).
        pad_id: Target id masked out of sequence losses; None masks nothing.
        **kwargs: `keras.losses.Loss` arguments (`name`, `reduction`).

    Example:
    >>> model.compile(optimizer="adam", loss=TanhSconesLoss(alpha=0.5))  # doctest: +SKIP
    """

    default_name = "tanh_scones_loss"
    logit_scale = 2.0


@keras.saving.register_keras_serializable(package="tfscones")
class TanhPositiveTerm(SconesPositiveTerm):
    """Mean L+ per token of the tanh head: -log p(z_gold) (eq. 7, or eq. 11 with smoothing).

    Args:
        label_smoothing: λ in [0, 1), as in the loss.
        pad_id: Target id to ignore; None ignores nothing.
        **kwargs: `keras.metrics.Metric` arguments (`name`, `dtype`).
    """

    default_name = "tanh_positive"
    logit_scale = 2.0


@keras.saving.register_keras_serializable(package="tfscones")
class TanhNegativeTerm(SconesNegativeTerm):
    """Mean L- per token of the tanh head: Σ_{w≠gold} -log(1 - p(z_w)), before α (eq. 8, 12).

    Args:
        label_smoothing: λ in [0, 1), as in the loss.
        pad_id: Target id to ignore; None ignores nothing.
        **kwargs: `keras.metrics.Metric` arguments (`name`, `dtype`).
    """

    default_name = "tanh_negative"
    logit_scale = 2.0
