"""The SCONES head: every token its own binary classifier, trained with the SCONES loss.

Stahlberg & Kumar 2022 replace the softmax by one sigmoid per vocabulary entry, P(z=1 | x, y<i·w)
= σ(z_w) (eq. 4), and train it with the SCONES loss L+ + α L- (eq. 5-8, with label smoothing
eq. 11-12). This module holds the head, the loss and the metrics that show its two terms.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from tfscones.data.vocab_ids import PAD_ID
from tfscones.heads.base import ADEQUACY_CONFIDENCE, OutputHead, ScoreKind, as_float32, log_mean_exp
from tfscones.heads.loss_base import (
    TokenLoss,
    TokenMean,
    add_at_targets,
    all_finite,
    gold_logits,
    validate_label_smoothing,
    weighted,
)
from tfscones.ranges import SCONES_ALPHA


@keras.saving.register_keras_serializable(package="tfscones")
class SigmoidHead(OutputHead):
    """The SCONES head: every token its own binary classifier, P(z=1 | x, y<i·w) = σ(z_w).

    The probabilities are not normalised, so two valid continuations can both score near 1
    (Stahlberg & Kumar 2022, eq. 4). Search scores are log σ(z) = -softplus(-z), exact for any
    logit.

    The output bias starts at -log|V| (each token's prior probability about 1/|V|), so that
    training does not begin by pushing |V| logits from σ = 1/2 down (|V| ln 2 of negative loss).

    Its loss is `SconesLoss` (`alpha`, `label_smoothing`); its metrics are the loss's two terms,
    `SconesPositiveTerm` and `SconesNegativeTerm`.

    Example:
    >>> SigmoidHead().probabilities(tf.constant([0.0, 100.0])).numpy()
    array([0.5, 1. ], dtype=float32)
    """

    name = "sigmoid"
    score_kind = ScoreKind(
        "log_sigmoid", normalised=False, sparse=False, confidence=ADEQUACY_CONFIDENCE
    )
    loss_arguments = ("alpha", "label_smoothing", "pad_id")

    def probabilities(self, logits):
        return tf.sigmoid(as_float32(logits))

    def log_scores(self, logits):
        return -tf.nn.softplus(-as_float32(logits))

    def ensemble_logits(self, stacked_logits):
        return mean_sigmoid_logits(stacked_logits)

    def logit_thresholds(self, score_thresholds):
        return sigmoid_logit_thresholds(score_thresholds)

    def build_loss(self, **kwargs):
        return SconesLoss(**kwargs)

    def metrics(self):
        return [SconesPositiveTerm(), SconesNegativeTerm()]

    def output_bias_initializer(self, vocab_size):
        return keras.initializers.Constant(-math.log(vocab_size))


def mean_sigmoid_logits(stacked_logits: tf.Tensor) -> tf.Tensor:
    """logit(m) of the mean m = mean_i σ(z_i) of N models' sigmoid probabilities.

    logit(m) = log m - log(1 - m), with log m = logsumexp_i log σ(z_i) - log N and
    log(1 - m) = logsumexp_i log σ(-z_i) - log N, where log σ(z) = -softplus(-z): exact for
    logits of any size (m = 1 - 1e-30 keeps its logit), never the log of a rounded 1 - m.

    Args:
        stacked_logits: Logits `[N, ..., V]`, any float dtype.

    Returns:
        float32 `[..., V]`.
    """
    logits = as_float32(stacked_logits)
    return log_mean_exp(-tf.nn.softplus(-logits)) - log_mean_exp(-tf.nn.softplus(logits))


def sigmoid_logit_thresholds(score_thresholds: tf.Tensor) -> tf.Tensor:
    """The logits `u` with log σ(z) > t exactly when z > u: u = t - log(1 - e^t).

    log σ(z) > t ⇔ σ(z) > e^t ⇔ z > log(e^t / (1 - e^t)) for t < 0, computed as
    t - log(-expm1(t)), accurate for t near 0 and far below it (u → t as t → -∞); no logit's
    log score exceeds a t ≥ 0, so u is +inf there.

    Args:
        score_thresholds: `[...]` thresholds t on log σ(z).

    Returns:
        float32 `[...]`.
    """
    thresholds = as_float32(score_thresholds)
    below_zero = thresholds < 0.0
    negative = tf.where(below_zero, thresholds, -1.0)
    logits = negative - tf.math.log(-tf.math.expm1(negative))
    return tf.where(below_zero, logits, math.inf)


def scones_terms(
    targets: tf.Tensor, logits: tf.Tensor, label_smoothing: float = 0.0
) -> tuple[tf.Tensor, tf.Tensor]:
    """The positive and negative SCONES terms per token (eq. 7-8, with label smoothing eq. 11-12).

    With sp = softplus, -log σ(z) = sp(-z) = sp(z) - z and -log(1 - σ(z)) = sp(z), so

        L+ = (1-λ) sp(-z_y) + λ sp(z_y)           = sp(z_y) - (1-λ) z_y
        L- = Σ_{w≠y} (1-λ) sp(z_w) + λ sp(-z_w)   = Σ_w [sp(z_w) - λ z_w] - sp(z_y) + λ z_y

    One softplus pass over the vocabulary suffices (`softplus_sum`), and it is exact for any |z|
    (no 1e-30 clamp as in the JAX listing of Stahlberg & Kumar 2022, Fig. 10).

    Infinite logits take their limit (`tfscones.heads.loss_base`), 0 · ∞ counting as 0: σ = 0
    for -inf, 1 for +inf, so a -inf gold logit makes L+ = +inf (for λ < 1).

    Args:
        targets: int32 gold ids `[...]`.
        logits: float32 logits `[..., V]`.
        label_smoothing: λ in [0, 1).

    Returns:
        `(L+, L-)`, float32 tensors `[...]`.
    """
    return tf.cond(
        all_finite(logits),
        lambda: _finite_scones_terms(targets, logits, label_smoothing),
        lambda: _limit_scones_terms(targets, logits, label_smoothing),
    )


def _finite_scones_terms(targets, logits, label_smoothing):
    all_negative = softplus_sum(logits)
    if label_smoothing > 0.0:
        all_negative -= label_smoothing * tf.reduce_sum(logits, axis=-1)
    gold_logit = gold_logits(targets, logits)
    gold_softplus = tf.nn.softplus(gold_logit)
    positive = gold_softplus - (1.0 - label_smoothing) * gold_logit
    negative = all_negative - gold_softplus + label_smoothing * gold_logit
    return positive, negative


def _limit_scones_terms(targets, logits, label_smoothing):
    """The SCONES terms token by token (eq. 11-12), each weight-0 part left out, not 0 · ∞."""
    keep = 1.0 - label_smoothing
    if_gold = weighted(keep, tf.nn.softplus(-logits)) + weighted(
        label_smoothing, tf.nn.softplus(logits)
    )
    if_wrong = weighted(keep, tf.nn.softplus(logits)) + weighted(
        label_smoothing, tf.nn.softplus(-logits)
    )
    wrong = tf.one_hot(targets, tf.shape(logits)[-1], on_value=0.0, off_value=1.0)
    negative = tf.reduce_sum(tf.math.multiply_no_nan(if_wrong, wrong), axis=-1)
    return gold_logits(targets, if_gold), negative


SOFTPLUS_GROUP = 16
"""Logits per logarithm in `softplus_sum`."""


def softplus_sum(logits: tf.Tensor) -> tf.Tensor:
    """Σ_w softplus(z_w) over the last axis, with one logarithm per `SOFTPLUS_GROUP` logits.

    softplus(z) = max(z, 0) + log(1 + e^-|z|), and every 1 + e^-|z| lies in (1, 2], so the
    product of 16 of them lies in (1, 65536] and its logarithm is the sum of their 16 logarithms.
    The logarithm is most of a softplus pass's cost, so taking it once per 16 logits makes the
    SCONES loss cheaper than cross-entropy under XLA. Accuracy: 15 float32 products put at most
    15 · 2^-24 ≈ 9e-7 of relative error on the product, so at most 9e-7 of absolute error on the
    group's sum of softplus terms, as summing their 16 rounded logarithms would; -inf logits add
    0, +inf and NaN propagate.

    Args:
        logits: float32 `[..., V]` (V not static: one softplus per logit).

    Returns:
        float32 `[...]`.
    """
    vocab_size = logits.shape[-1]
    if vocab_size is None:
        return tf.reduce_sum(tf.nn.softplus(logits), axis=-1)
    groups = -(-vocab_size // SOFTPLUS_GROUP)
    factors = 1.0 + tf.exp(-tf.abs(logits))
    padding = [[0, 0]] * (logits.shape.rank - 1) + [[0, groups * SOFTPLUS_GROUP - vocab_size]]
    factors = tf.pad(factors, padding, constant_values=1.0)
    factors = tf.reshape(factors, tf.concat([tf.shape(logits)[:-1], [groups, SOFTPLUS_GROUP]], 0))
    logs = tf.math.log(tf.reduce_prod(factors, axis=-1))
    return tf.reduce_sum(tf.nn.relu(logits), axis=-1) + tf.reduce_sum(logs, axis=-1)


def scaled_logits(logits: tf.Tensor, logit_scale: float) -> tf.Tensor:
    """The logits a SCONES loss sees: `logit_scale · z` (2z for the tanh head, p = σ(2z))."""
    return logits if logit_scale == 1.0 else logit_scale * logits


def scones_token_loss(
    targets: tf.Tensor, logits: tf.Tensor, alpha: float = 1.0, label_smoothing: float = 0.0
) -> tf.Tensor:
    """Per-token SCONES loss L+ + α L- (eq. 6), with the terms of `scones_terms`.

    The gradient is written out, ∂L/∂z_w = α(σ(z_w) - λ) for w ≠ y and σ(z_y) - (1-λ) at the
    gold token, so the backward pass is one sigmoid over the logits and no activation of the
    vocabulary size is kept between the passes.

    Args:
        targets: int32 gold ids `[...]`.
        logits: float32 logits `[..., V]`.
        alpha: The scaling factor α > 0 of the negative term.
        label_smoothing: λ in [0, 1).

    Returns:
        float32 per-token losses `[...]`.
    """

    @tf.custom_gradient
    def loss_and_gradient(z):
        positive, negative = scones_terms(targets, z, label_smoothing)

        def grad(upstream):
            sigmoid = tf.sigmoid(z)
            if label_smoothing > 0.0:
                sigmoid -= label_smoothing
            gradient = (alpha * upstream[..., tf.newaxis]) * sigmoid
            gold_sigmoid = tf.sigmoid(gold_logits(targets, z))
            gold_correction = upstream * (
                (1.0 - alpha) * gold_sigmoid - (1.0 - label_smoothing) + alpha * label_smoothing
            )
            return add_at_targets(gradient, targets, gold_correction)

        return positive + alpha * negative, grad

    return loss_and_gradient(logits)


@keras.saving.register_keras_serializable(package="tfscones")
class SconesLoss(TokenLoss):
    """The SCONES loss for sigmoid output heads (Stahlberg & Kumar 2022, eq. 5-8, 11-12).

    Each vocabulary entry is its own binary classifier: the gold token is pushed up (L+), all
    others down (L-), weighted by α. Small α lets several tokens score high at once.

    Args:
        alpha: Weight α > 0 of the negative term L- (the paper tunes α ∈ [0.2, 1]).
        label_smoothing: λ in [0, 1) (eq. 11-12); the paper uses 0.
        pad_id: Target id masked out of sequence losses; None masks nothing.
        **kwargs: `keras.losses.Loss` arguments (`name`, `reduction`).

    A head with another bounded activation that is a sigmoid of scaled logits, σ(c·z), trains
    with a subclass that sets `logit_scale` to c (the tanh head: 2) and its `default_name`.

    Example:
    >>> model.compile(optimizer="adam", loss=SconesLoss(alpha=0.5))  # doctest: +SKIP
    """

    default_name = "scones_loss"
    logit_scale = 1.0

    def __init__(self, alpha: float = 1.0, label_smoothing: float = 0.0, pad_id=PAD_ID, **kwargs):
        kwargs.setdefault("name", self.default_name)
        super().__init__(label_smoothing=label_smoothing, pad_id=pad_id, **kwargs)
        self.alpha = SCONES_ALPHA.check("SCONES alpha", alpha, "The paper uses 0.2 to 1.")

    def per_token_loss(self, targets, logits):
        logits = scaled_logits(logits, self.logit_scale)
        return scones_token_loss(targets, logits, self.alpha, self.label_smoothing)

    def get_config(self):
        return {**super().get_config(), "alpha": self.alpha}


@keras.saving.register_keras_serializable(package="tfscones")
class SconesPositiveTerm(TokenMean):
    """Mean SCONES L+ per token (eq. 7, or eq. 11 with label smoothing): -log σ(z_gold).

    Args:
        label_smoothing: λ in [0, 1), as in the loss.
        pad_id: Target id to ignore; None ignores nothing.
        **kwargs: `keras.metrics.Metric` arguments (`name`, `dtype`).

    Example:
    >>> model.compile(loss=SconesLoss(alpha=0.5),  # doctest: +SKIP
    ...               metrics=[SconesPositiveTerm(), SconesNegativeTerm()])
    """

    default_name = "scones_positive"
    logit_scale = 1.0
    term_index = 0

    def __init__(self, label_smoothing: float = 0.0, pad_id=PAD_ID, **kwargs):
        kwargs.setdefault("name", self.default_name)
        super().__init__(pad_id=pad_id, **kwargs)
        self.label_smoothing = validate_label_smoothing(label_smoothing)

    def per_token_value(self, targets, logits):
        logits = scaled_logits(logits, self.logit_scale)
        return scones_terms(targets, logits, self.label_smoothing)[self.term_index]

    def get_config(self):
        return {**super().get_config(), "label_smoothing": self.label_smoothing}


@keras.saving.register_keras_serializable(package="tfscones")
class SconesNegativeTerm(SconesPositiveTerm):
    """Mean SCONES L- per token (eq. 8, or eq. 12): Σ_{w≠gold} -log(1 - σ(z_w)), before α.

    Args:
        label_smoothing: λ in [0, 1), as in the loss.
        pad_id: Target id to ignore; None ignores nothing.
        **kwargs: `keras.metrics.Metric` arguments (`name`, `dtype`).
    """

    default_name = "scones_negative"
    term_index = 1
