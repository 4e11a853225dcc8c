"""The entmax head: sparse α-entmax probabilities, trained with Fenchel-Young losses.

α-entmax (Peters & Martins 2021, eq. 4; α = 2 is sparsemax, α = 1.5 entmax-1.5) gives tokens
below a threshold exactly zero probability. This module holds the head, its Fenchel-Young losses
with Fenchel-Young label smoothing (eq. 7, 10-13) and the support-size metric; the mappings
themselves are in `tfscones.ops.entmax`.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from tfscones.data.vocab_ids import PAD_ID
from tfscones.heads.base import NORMALISED_CONFIDENCE, OutputHead, ScoreKind, as_float32
from tfscones.heads.loss_base import (
    TokenLoss,
    TokenMean,
    add_at_targets,
    all_finite,
    gold_logits,
)
from tfscones.heads.threshold_memo import ENTMAX_THRESHOLDS
from tfscones.ops import entmax as entmax_ops


@keras.saving.register_keras_serializable(package="tfscones")
class EntmaxHead(OutputHead):
    """A sparse head: α-entmax probabilities with exact zeros (α = 2 sparsemax, 1.5 entmax-1.5).

    Zero-probability tokens score -inf, so no decoder ever extends a hypothesis with them.
    Its loss is `EntmaxLoss` with the head's α (`SparsemaxLoss` at α = 2), which takes
    `label_smoothing`; its metric is `EntmaxSupportSize`.

    Args:
        alpha: Entmax α > 1.
        n_iter: Bisection steps for α other than 1.5 and 2.

    Example:
    >>> EntmaxHead(alpha=2.0).log_scores(tf.constant([2.0, 1.0, -1.0])).numpy()
    array([  0., -inf, -inf], dtype=float32)
    """

    name = "entmax"
    score_kind = ScoreKind(
        "log_entmax", normalised=True, sparse=True, confidence=NORMALISED_CONFIDENCE
    )

    def __init__(self, alpha: float = 1.5, n_iter: int = 50):
        self.alpha = entmax_ops.validate_entmax_alpha(alpha)
        self.n_iter = entmax_ops.validate_bisection_steps(n_iter)

    def probabilities(self, logits):
        return entmax_ops.entmax(as_float32(logits), self.alpha, self.n_iter)

    def log_scores(self, logits):
        return tf.math.log(self.probabilities(logits))

    def ensemble_logits(self, stacked_logits):
        mean = tf.reduce_mean(self.probabilities(stacked_logits), axis=0)
        return entmax_logits_of(mean, self.alpha)

    def build_loss(self, **kwargs):
        if self.alpha == 2.0:
            return SparsemaxLoss(**kwargs)
        return EntmaxLoss(alpha=self.alpha, n_iter=self.n_iter, **kwargs)

    def metrics(self):
        return [EntmaxSupportSize(alpha=self.alpha, n_iter=self.n_iter)]

    def get_config(self):
        return {"alpha": self.alpha, "n_iter": self.n_iter}


def entmax_logits_of(probabilities: tf.Tensor, alpha: float) -> tf.Tensor:
    """Logits whose α-entmax is `probabilities`, a distribution on the simplex per row.

    α-entmax(z)_j = [(α-1) z_j - τ]_+^(1/(α-1)) with τ the one threshold that makes the
    probabilities sum to 1 (Peters & Martins 2021, eq. 4; Peters et al. 2019). For
    z_j = p_j^(α-1)/(α-1) where p_j > 0, τ = 0 gives back p, and since p sums to 1, τ is 0.
    A token with p_j = 0 gets z_j = -1/(α-1): (α-1) z_j = -1 lies below any threshold, which is
    above (α-1) max z - 1 > -1, so it stays exactly zero even if τ is found a little off 0.
    The logits rise with p, so their argmax is the argmax of p.

    Args:
        probabilities: float32 `[..., V]`, non-negative, each row summing to 1.
        alpha: Entmax α > 1.

    Returns:
        float32 `[..., V]`.
    """
    powers = tf.pow(probabilities, alpha - 1.0)
    return tf.where(probabilities > 0.0, powers, -1.0) / (alpha - 1.0)


def _smoothed_target_entropy(vocab_size: tf.Tensor, alpha: float, epsilon: float) -> tf.Tensor:
    """H_α(q) = (1 - Σ q^α)/(α(α-1)) of q = (1-ε)e_y + ε/|V| (Peters & Martins 2021, eq. 6, 10)."""
    vocab_size = tf.cast(vocab_size, tf.float32)
    uniform = epsilon / vocab_size
    power_sum = tf.pow(1.0 - epsilon + uniform, alpha) + (vocab_size - 1.0) * tf.pow(uniform, alpha)
    return (1.0 - power_sum) / (alpha * (alpha - 1.0))


def entmax_token_loss(
    targets: tf.Tensor,
    logits: tf.Tensor,
    alpha: float = 1.5,
    label_smoothing: float = 0.0,
    n_iter: int = 50,
) -> tf.Tensor:
    """Per-token Fenchel-Young α-entmax loss with Fenchel-Young label smoothing.

    L(z; q) = (p* - q)·z + H_α(p*) - H_α(q) with p* = entmax_α(z) (Peters & Martins 2021,
    eq. 7 with the Tsallis regulariser of eq. 6), and q = (1-ε) e_y + ε/|V| (eq. 10). The
    forward pass needs only τ, p*·z and Σ p*^α, which `tfscones.ops.entmax.entmax_statistics`
    takes from the largest logits; the gradient p* - q (eq. 9, 13) is formed in the backward
    pass from τ.

    Args:
        targets: int32 gold ids `[...]`.
        logits: float32 logits `[..., V]`.
        alpha: Entmax α > 1 (2 is sparsemax).
        label_smoothing: ε in [0, 1).
        n_iter: Bisection steps for α ∉ {1.5, 2}.

    Infinite logits take their limit (`tfscones.heads.loss_base`): -inf tokens get probability
    0 and the loss is that over the other tokens; the +inf tokens of a row share its
    probability. The loss is +inf if the gold token is ruled out (-inf, or finite beside a +inf
    token) or label smoothing puts mass on a token that is; a NaN logit gives a NaN loss.

    Returns:
        float32 per-token losses `[...]`, non-negative.
    """
    return _token_loss_and_threshold(targets, logits, alpha, label_smoothing, n_iter)[0]


def _token_loss_and_threshold(targets, logits, alpha, label_smoothing, n_iter):
    """`entmax_token_loss` and the thresholds τ `[..., 1]` it found on the way.

    τ leaves the custom gradient as a second output, whose gradient is not taken (it is for
    the support-size metric, which no loss differentiates).
    """
    vocab_size = tf.shape(logits)[-1]

    @tf.custom_gradient
    def loss_and_gradient(z):
        z = _finite_equivalent(z, alpha)
        tau, p_dot_z, power_sum = entmax_ops.entmax_statistics(z, alpha, n_iter)
        target_dot_z = (1.0 - label_smoothing) * gold_logits(targets, z)
        if label_smoothing > 0.0:
            target_dot_z += label_smoothing * tf.reduce_mean(z, axis=-1)
        model_entropy = (1.0 - power_sum[..., 0]) / (alpha * (alpha - 1.0))
        target_entropy = _smoothed_target_entropy(vocab_size, alpha, label_smoothing)

        def grad(upstream, upstream_of_tau):
            del upstream_of_tau
            uniform = label_smoothing / tf.cast(vocab_size, z.dtype)
            probabilities = entmax_ops.probabilities_from_threshold(z, tau, alpha)
            if label_smoothing > 0.0:
                probabilities -= uniform
            gradient = upstream[..., tf.newaxis] * probabilities
            return add_at_targets(gradient, targets, -(1.0 - label_smoothing) * upstream)

        loss = p_dot_z[..., 0] - target_dot_z + model_entropy - target_entropy
        return (loss, tau), grad

    loss, tau = loss_and_gradient(logits)
    loss = tf.where(_ruled_out(targets, logits, label_smoothing), tf.constant(math.inf), loss)
    has_nan = tf.reduce_any(tf.math.is_nan(logits), axis=-1)
    return tf.where(has_nan, tf.constant(math.nan), loss), tau


def _ruled_out(targets, logits, label_smoothing) -> tf.Tensor:
    """Where the limit of the loss is +inf: the gold token, or a smoothed-onto one, gets 0."""
    gold = gold_logits(targets, logits)
    certain = tf.reduce_any(tf.equal(logits, math.inf), axis=-1)
    ruled_out = tf.equal(gold, -math.inf) | (certain & tf.not_equal(gold, math.inf))
    if label_smoothing > 0.0:
        smallest = tf.reduce_min(logits, axis=-1)
        ruled_out |= tf.equal(smallest, -math.inf) | (certain & tf.not_equal(smallest, math.inf))
    return ruled_out


def _statistics_of_masked_logits(logits: tf.Tensor, alpha: float, n_iter: int):
    """`entmax_statistics` of the limit of logits that may be infinite (`_finite_equivalent`)."""
    return entmax_ops.entmax_statistics(_finite_equivalent(logits, alpha), alpha, n_iter)


def _finite_equivalent(logits: tf.Tensor, alpha: float) -> tf.Tensor:
    """Finite logits whose α-entmax is the limit of these (rows of finite logits unchanged).

    A probability p_i = [(α-1) z_i - τ]_+^(1/(α-1)) ≤ 1 makes τ ≥ (α-1) max z - 1, so any
    z_i < max z - 1/(α-1) gets p_i = 0. A row with a +inf logit becomes 0 at its +inf tokens
    and `gap` = 1 + 1/(α-1) below elsewhere: its +inf tokens share the probability. In other
    rows each -inf lies `gap` below the row's largest finite logit, which keeps every sum
    finite. NaN logits stay NaN.
    """
    return tf.cond(all_finite(logits), lambda: logits, lambda: _replace_infinities(logits, alpha))


def _replace_infinities(logits: tf.Tensor, alpha: float) -> tf.Tensor:
    gap = 1.0 + 1.0 / (alpha - 1.0)
    masked, certain = tf.equal(logits, -math.inf), tf.equal(logits, math.inf)
    finite_max = tf.reduce_max(tf.where(masked | certain, tf.float32.min, logits), -1, True)
    finite_max = tf.where(tf.equal(finite_max, tf.float32.min), 0.0, finite_max)
    replaced = tf.where(masked, finite_max - gap, logits)
    any_certain = tf.reduce_any(certain, axis=-1, keepdims=True)
    return tf.where(any_certain, tf.where(certain, 0.0, -gap), replaced)


@keras.saving.register_keras_serializable(package="tfscones")
class EntmaxLoss(TokenLoss):
    """Fenchel-Young α-entmax loss for entmax heads (Peters & Martins 2021, eq. 7, 10-13).

    Args:
        alpha: Entmax α > 1 (1.5 by default; 2 is sparsemax).
        label_smoothing: Fenchel-Young label smoothing ε in [0, 1) (eq. 10).
        n_iter: Bisection steps for α other than 1.5 and 2.
        pad_id: Target id masked out of sequence losses; None masks nothing.
        **kwargs: `keras.losses.Loss` arguments (`name`, `reduction`).

    Example:
    >>> loss = EntmaxLoss(alpha=1.5, label_smoothing=0.1)
    >>> model.compile(optimizer="adam", loss=loss)  # doctest: +SKIP
    """

    def __init__(
        self,
        alpha: float = 1.5,
        label_smoothing: float = 0.0,
        n_iter: int = 50,
        pad_id=PAD_ID,
        **kwargs,
    ):
        kwargs.setdefault("name", "entmax_loss")
        super().__init__(label_smoothing=label_smoothing, pad_id=pad_id, **kwargs)
        self.alpha = entmax_ops.validate_entmax_alpha(alpha)
        self.n_iter = entmax_ops.validate_bisection_steps(n_iter)

    def per_token_loss(self, targets, logits):
        loss, tau = _token_loss_and_threshold(
            targets, logits, self.alpha, self.label_smoothing, self.n_iter
        )
        ENTMAX_THRESHOLDS.remember(logits, (self.alpha, self.n_iter), tau)
        return loss

    def get_config(self):
        return {**super().get_config(), "alpha": self.alpha, "n_iter": self.n_iter}


@keras.saving.register_keras_serializable(package="tfscones")
class SparsemaxLoss(EntmaxLoss):
    """Fenchel-Young sparsemax loss: `EntmaxLoss` with α = 2.

    Args:
        label_smoothing: Fenchel-Young label smoothing ε in [0, 1).
        pad_id: Target id masked out of sequence losses; None masks nothing.
        **kwargs: `keras.losses.Loss` arguments (`name`, `reduction`).
    """

    def __init__(self, label_smoothing: float = 0.0, pad_id=PAD_ID, **kwargs):
        alpha = kwargs.pop("alpha", 2.0)  # in its own config, as EntmaxLoss's
        if alpha != 2.0:
            raise ValueError(
                f"SparsemaxLoss is the entmax loss at alpha 2 (got alpha={alpha!r}); use "
                f"EntmaxLoss(alpha={alpha!r}) for another alpha."
            )
        kwargs.pop("n_iter", None)  # unused at alpha 2
        kwargs.setdefault("name", "sparsemax_loss")
        super().__init__(alpha=2.0, label_smoothing=label_smoothing, pad_id=pad_id, **kwargs)


@keras.saving.register_keras_serializable(package="tfscones")
class EntmaxSupportSize(TokenMean):
    """Mean number of tokens with non-zero α-entmax probability (Peters & Martins 2021, Table 5).

    Compiled beside `EntmaxLoss` with the same α and n_iter, it counts with the thresholds the
    loss found for the same logits (`threshold_memo`); alone, it finds them itself.

    Args:
        alpha: Entmax α > 1 of the head.
        n_iter: Bisection steps for α other than 1.5 and 2.
        pad_id: Target id to ignore; None ignores nothing.
        **kwargs: `keras.metrics.Metric` arguments (`name`, `dtype`).
    """

    def __init__(self, alpha: float = 1.5, n_iter: int = 50, pad_id=PAD_ID, **kwargs):
        kwargs.setdefault("name", "entmax_support_size")
        super().__init__(pad_id=pad_id, **kwargs)
        self.alpha = entmax_ops.validate_entmax_alpha(alpha)
        self.n_iter = entmax_ops.validate_bisection_steps(n_iter)

    def per_token_value(self, targets, logits):
        del targets
        tau = ENTMAX_THRESHOLDS.find(logits, (self.alpha, self.n_iter))
        if tau is None:
            tau = _statistics_of_masked_logits(logits, self.alpha, self.n_iter)[0]
        support_size = entmax_ops.support_size((self.alpha - 1.0) * logits, tau)
        return tf.cast(support_size[..., 0], tf.float32)

    def get_config(self):
        return {**super().get_config(), "alpha": self.alpha, "n_iter": self.n_iter}
