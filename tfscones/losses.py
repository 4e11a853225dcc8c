"""Keras losses for the three output heads: SCONES, Fenchel-Young entmax, and cross-entropy.

Every loss takes logits `[..., vocab]` and integer targets `[...]`: sequences (`[batch, length,
vocab]` with `[batch, length]`) or classification (`[batch, classes]` with `[batch]`). In sequences,
positions whose target is `pad_id` (default 0) are masked, and the loss is the sum over the other
tokens divided by their number (the `weights.sum()` of the SCONES JAX listing, Stahlberg &
Kumar 2022, Fig. 10).
Classification labels (rank-1 targets) are never masked: there, 0 is a class like any other.

All losses compute in float32 whatever the logits' dtype (mixed precision included).
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from tfscones import activations
from tfscones.data.vocab_ids import PAD_ID


def validate_label_smoothing(label_smoothing: float) -> float:
    """Checks that a label smoothing factor lies in [0, 1].

    Args:
        label_smoothing: The smoothing factor (λ of SCONES eq. 11-12, ε of entmax eq. 10).

    Returns:
        The factor as a Python float.

    Raises:
        ValueError: If it lies outside [0, 1].
    """
    label_smoothing = float(label_smoothing)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must lie in [0, 1] (got {label_smoothing}).")
    return label_smoothing


def token_ids_and_logits(y_true, y_pred) -> tuple[tf.Tensor, tf.Tensor]:
    """Validates and converts loss inputs to int32 ids and float32 logits.

    Args:
        y_true: Target ids, shape `logits.shape[:-1]`; Keras may hand them over as floats, which
            must then hold whole numbers.
        y_pred: Logits `[..., vocab]`.

    Returns:
        `(ids, logits)` as int32 and float32 tensors.

    Raises:
        ValueError: If the shapes do not match or the targets have a non-numeric dtype.
        tf.errors.InvalidArgumentError: When the graph runs, if a target is not a whole number
            or lies outside [0, vocab_size). XLA drops such checks; `_TokenLoss` then makes the
            loss NaN (`checked_token_ids`), never a finite wrong value.
    """
    targets, logits, _ = checked_token_ids(y_true, y_pred)
    return targets, logits


def checked_token_ids(y_true, y_pred) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """`token_ids_and_logits` plus whether every target is valid, as a bool scalar.

    The flag is the value form of the assertions, for where XLA drops those.
    """
    logits = tf.convert_to_tensor(y_pred)
    logits = tf.cast(logits, tf.float32) if logits.dtype != tf.float32 else logits
    targets = _squeeze_label_axis(tf.convert_to_tensor(y_true), logits.shape.rank)
    expected = logits.shape[:-1]
    if not targets.shape.is_compatible_with(expected):
        raise ValueError(
            f"targets of shape {targets.shape} do not match logits of shape {logits.shape}: "
            f"targets must have the logits' shape without the vocabulary axis, {expected}."
        )
    whole = tf.constant(True)
    if targets.dtype.is_floating:
        whole = tf.reduce_all(tf.equal(targets, tf.round(targets)))
        with tf.control_dependencies(
            [tf.debugging.Assert(whole, ["targets must be integer token ids; got non-integer"])]
        ):
            targets = tf.identity(targets)
    elif not targets.dtype.is_integer:
        raise ValueError(f"targets must be integer token ids (got dtype {targets.dtype.name}).")
    targets = tf.cast(targets, tf.int32)
    vocab_size = tf.shape(logits, out_type=tf.int32)[-1]
    in_range = tf.reduce_all((targets >= 0) & (targets < vocab_size))
    message = "target ids must lie in [0, vocab_size); vocab_size ="
    with tf.control_dependencies([tf.debugging.Assert(in_range, [message, vocab_size])]):
        return tf.identity(targets), logits, whole & in_range


def check_sample_weight_shape(sample_weight, y_true, y_pred) -> None:
    """Refuses sample weights that would broadcast onto the wrong tokens.

    Weights may be a scalar, one per example (`[batch]`), or one per token (the targets'
    shape); a `[length]` vector, say, would otherwise broadcast along the wrong axis whenever
    length equals batch.

    Raises:
        ValueError: If the static shapes show another shape.
    """
    weights = tf.convert_to_tensor(sample_weight).shape
    targets = _squeeze_label_axis(tf.convert_to_tensor(y_true), len(y_pred.shape)).shape
    if weights.rank is None or targets.rank is None or weights.rank == 0:
        return
    if weights.rank == targets.rank + 1 and weights[-1] == 1:
        weights = weights[:-1]
    if weights.rank > targets.rank or not weights.is_compatible_with(targets[: weights.rank]):
        raise ValueError(
            f"sample_weight of shape {weights} does not fit targets of shape {targets}: give "
            f"a scalar, one weight per example {targets[:1]}, or one per token {targets}."
        )


def expand_to_rank(weights, rank: int) -> tf.Tensor:
    """float32 weights with trailing axes added up to `rank` (per-example weights of sequences)."""
    weights = tf.cast(tf.convert_to_tensor(weights), tf.float32)
    while weights.shape.rank < rank:
        weights = weights[..., tf.newaxis]
    return weights


def _squeeze_label_axis(targets: tf.Tensor, logits_rank: int | None) -> tf.Tensor:
    """Drops a trailing length-1 axis from targets given with the logits' rank ([B, 1] labels)."""
    if targets.shape.rank is not None and targets.shape.rank == logits_rank:
        if targets.shape[-1] == 1:
            return tf.squeeze(targets, axis=-1)
    return targets


class _TokenLoss(keras.losses.Loss):
    """Base: validates inputs, computes a per-token loss, averages it over non-pad tokens.

    The default reduction, `"mean_with_sample_weight"`, divides the weighted sum by the sum of
    the weights; the pad mask of sequence targets is folded into those weights, so the result is
    Σ_tokens loss · w / Σ_tokens w over non-pad tokens (w = 1 without sample weights).

    Under a `tf.distribute` strategy with several replicas, each replica divides its sum by the
    weight summed over all replicas (one all-reduce of a scalar), so that the summed gradients
    are those of the mean over the global batch's tokens, whatever the split of the batch
    across replicas.
    """

    def __init__(self, label_smoothing: float = 0.0, pad_id: int | None = PAD_ID, **kwargs):
        kwargs.setdefault("dtype", "float32")
        kwargs.setdefault("reduction", "mean_with_sample_weight")
        super().__init__(**kwargs)
        self.label_smoothing = validate_label_smoothing(label_smoothing)
        self.pad_id = None if pad_id is None else int(pad_id)

    def __call__(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            check_sample_weight_shape(sample_weight, y_true, y_pred)
        token_weights = self.token_weights(y_true, y_pred)
        if token_weights is not None and sample_weight is not None:
            token_weights = token_weights * expand_to_rank(sample_weight, token_weights.shape.rank)
        if token_weights is not None:
            sample_weight = token_weights
        replica_context = tf.distribute.get_replica_context()
        if (
            self.reduction == "mean_with_sample_weight"
            and replica_context is not None
            and replica_context.num_replicas_in_sync > 1
        ):
            return self._replica_share(y_true, y_pred, sample_weight, replica_context)
        return super().__call__(y_true, y_pred, sample_weight=sample_weight)

    def _replica_share(self, y_true, y_pred, sample_weight, replica_context):
        """This replica's Σ loss·w divided by Σ w over every replica's tokens."""
        with tf.name_scope(self.name):
            per_token = self.call(y_true, y_pred)
            if sample_weight is None:
                sample_weight = tf.ones_like(per_token)
            sample_weight = expand_to_rank(sample_weight, per_token.shape.rank)
            global_weight = replica_context.all_reduce(
                tf.distribute.ReduceOp.SUM, tf.reduce_sum(sample_weight)
            )
            return tf.math.divide_no_nan(tf.reduce_sum(per_token * sample_weight), global_weight)

    def token_weights(self, y_true, y_pred) -> tf.Tensor | None:
        """1.0 for real tokens and 0.0 for pads of sequence targets; None when nothing is masked."""
        targets = _squeeze_label_axis(tf.convert_to_tensor(y_true), len(y_pred.shape))
        if self.pad_id is None or targets.shape.rank is None or targets.shape.rank < 2:
            return None
        return tf.cast(tf.not_equal(targets, tf.cast(self.pad_id, targets.dtype)), tf.float32)

    def call(self, y_true, y_pred):
        targets, logits, valid = checked_token_ids(y_true, y_pred)
        poison = tf.where(valid, 1.0, math.nan)
        return self.per_token_loss(targets, logits) * poison  # NaN loss and gradients

    def per_token_loss(self, targets: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        """Unmasked loss of every position: int32 targets `[...]`, float32 logits `[..., V]`."""
        raise NotImplementedError

    def get_config(self):
        config = super().get_config()
        config.update(label_smoothing=self.label_smoothing, pad_id=self.pad_id)
        return config


def _gold_logits(targets: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    return tf.gather(logits, targets[..., tf.newaxis], batch_dims=targets.shape.rank)[..., 0]


def scones_terms(
    targets: tf.Tensor, logits: tf.Tensor, label_smoothing: float = 0.0
) -> tuple[tf.Tensor, tf.Tensor]:
    """The positive and negative SCONES terms per token (eq. 7-8, with label smoothing eq. 11-12).

    With sp = softplus, -log σ(z) = sp(-z) = sp(z) - z and -log(1 - σ(z)) = sp(z), so

        L+ = (1-λ) sp(-z_y) + λ sp(z_y)           = sp(z_y) - (1-λ) z_y
        L- = Σ_{w≠y} (1-λ) sp(z_w) + λ sp(-z_w)   = Σ_w [sp(z_w) - λ z_w] - sp(z_y) + λ z_y

    One softplus pass over the vocabulary suffices, and it is exact for any |z| (no 1e-30 clamp
    as in the JAX listing of Stahlberg & Kumar 2022, Fig. 10).

    Args:
        targets: int32 gold ids `[...]`.
        logits: float32 logits `[..., V]`.
        label_smoothing: λ in [0, 1].

    Returns:
        `(L+, L-)`, float32 tensors `[...]`.
    """
    all_negative = tf.reduce_sum(tf.nn.softplus(logits), axis=-1)
    if label_smoothing > 0.0:
        all_negative -= label_smoothing * tf.reduce_sum(logits, axis=-1)
    gold_logit = _gold_logits(targets, logits)
    gold_softplus = tf.nn.softplus(gold_logit)
    positive = gold_softplus - (1.0 - label_smoothing) * gold_logit
    negative = all_negative - gold_softplus + label_smoothing * gold_logit
    return positive, negative


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
        label_smoothing: λ in [0, 1].

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
            gold_sigmoid = tf.sigmoid(_gold_logits(targets, z))
            gold_correction = upstream * (
                (1.0 - alpha) * gold_sigmoid - (1.0 - label_smoothing) + alpha * label_smoothing
            )
            return _add_at_targets(gradient, targets, gold_correction)

        return positive + alpha * negative, grad

    return loss_and_gradient(logits)


def _add_at_targets(values: tf.Tensor, targets: tf.Tensor, updates: tf.Tensor) -> tf.Tensor:
    """values[..., targets] += updates, without materialising a one-hot tensor."""
    flat_values = tf.reshape(values, [-1, tf.shape(values)[-1]])
    flat_targets = tf.reshape(targets, [-1])
    indices = tf.stack([tf.range(tf.size(flat_targets)), flat_targets], axis=1)
    flat_values = tf.tensor_scatter_nd_add(flat_values, indices, tf.reshape(updates, [-1]))
    return tf.reshape(flat_values, tf.shape(values))


@keras.saving.register_keras_serializable(package="tfscones")
class SconesLoss(_TokenLoss):
    """The SCONES loss for sigmoid output heads (Stahlberg & Kumar 2022, eq. 5-8, 11-12).

    Each vocabulary entry is its own binary classifier: the gold token is pushed up (L+), all
    others down (L-), weighted by α. Small α lets several tokens score high at once.

    Args:
        alpha: Weight α > 0 of the negative term L- (the paper tunes α ∈ [0.2, 1]).
        label_smoothing: λ in [0, 1] (eq. 11-12); the paper uses 0.
        pad_id: Target id masked out of sequence losses; None masks nothing.
        **kwargs: `keras.losses.Loss` arguments (`name`, `reduction`).

    Example:
    >>> model.compile(optimizer="adam", loss=SconesLoss(alpha=0.5))  # doctest: +SKIP
    """

    def __init__(self, alpha: float = 1.0, label_smoothing: float = 0.0, pad_id=PAD_ID, **kwargs):
        kwargs.setdefault("name", "scones_loss")
        super().__init__(label_smoothing=label_smoothing, pad_id=pad_id, **kwargs)
        alpha = float(alpha)
        if not alpha > 0.0:
            raise ValueError(f"SCONES alpha must be > 0 (got {alpha}); the paper uses 0.2 to 1.")
        self.alpha = alpha

    def per_token_loss(self, targets, logits):
        return scones_token_loss(targets, logits, self.alpha, self.label_smoothing)

    def get_config(self):
        return {**super().get_config(), "alpha": self.alpha}


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
    forward pass needs only τ, p*·z and Σ p*^α, which `activations.entmax_statistics` takes from
    the largest logits; the gradient p* - q (eq. 9, 13) is formed in the backward pass from τ.

    Args:
        targets: int32 gold ids `[...]`.
        logits: float32 logits `[..., V]`.
        alpha: Entmax α > 1 (2 is sparsemax).
        label_smoothing: ε in [0, 1].
        n_iter: Bisection steps for α ∉ {1.5, 2}.

    Masked logits (-inf) are tokens the model rules out: they get probability 0 and the loss is
    that over the other tokens; it is +inf if the gold token is masked or if label smoothing puts
    mass on a masked one, as the equations give. +inf and NaN logits are refused (an
    `InvalidArgumentError` in eager and graph mode; NaN losses under XLA, which drops asserts).

    Returns:
        float32 per-token losses `[...]`, non-negative.
    """
    vocab_size = tf.shape(logits)[-1]
    logits, masked, invalid = _entmax_ready_logits(logits, alpha)

    @tf.custom_gradient
    def loss_and_gradient(z):
        tau, p_dot_z, power_sum = activations.entmax_statistics(z, alpha, n_iter)
        target_dot_z = (1.0 - label_smoothing) * _gold_logits(targets, z)
        if label_smoothing > 0.0:
            target_dot_z += label_smoothing * tf.reduce_mean(z, axis=-1)
        model_entropy = (1.0 - power_sum[..., 0]) / (alpha * (alpha - 1.0))
        target_entropy = _smoothed_target_entropy(vocab_size, alpha, label_smoothing)

        def grad(upstream):
            uniform = label_smoothing / tf.cast(vocab_size, z.dtype)
            probabilities = activations.probabilities_from_threshold(z, tau, alpha)
            if label_smoothing > 0.0:
                probabilities -= uniform
            gradient = upstream[..., tf.newaxis] * probabilities
            return _add_at_targets(gradient, targets, -(1.0 - label_smoothing) * upstream)

        loss = p_dot_z[..., 0] - target_dot_z + model_entropy - target_entropy
        return loss, grad

    loss = loss_and_gradient(logits)
    infinite = _gold_logits(targets, tf.cast(masked, tf.float32)) > 0.0
    if label_smoothing > 0.0:
        infinite |= tf.reduce_any(masked, axis=-1)
    loss = tf.where(infinite, tf.constant(math.inf), loss)
    return tf.where(invalid, tf.constant(math.nan), loss)


def _entmax_ready_logits(logits: tf.Tensor, alpha: float):
    """Logits with each -inf replaced by a finite value that α-entmax gives probability 0.

    A probability p_i = [(α-1) z_i - τ]_+^(1/(α-1)) ≤ 1 makes τ ≥ (α-1) max z - 1, so any
    z_i < max z - 1/(α-1) gets p_i = 0; the replacement lies 1 + 1/(α-1) below the row's
    largest finite logit, which keeps every sum finite.

    Returns:
        `(logits, masked, invalid)`: the logits to compute with, where they were -inf, and the
        rows holding +inf or NaN (asserted against outside XLA).
    """
    masked = tf.equal(logits, -math.inf)
    invalid = tf.reduce_any(tf.math.is_nan(logits) | tf.equal(logits, math.inf), axis=-1)
    message = "entmax losses need finite or -inf (masked) logits; got +inf or NaN"
    with tf.control_dependencies([tf.debugging.Assert(~tf.reduce_any(invalid), [message])]):
        finite_max = tf.reduce_max(tf.where(masked, tf.float32.min, logits), -1, keepdims=True)
    finite_max = tf.where(tf.equal(finite_max, tf.float32.min), 0.0, finite_max)
    replacement = tf.stop_gradient(finite_max) - (1.0 + 1.0 / (alpha - 1.0))
    return tf.where(masked, replacement, logits), masked, invalid


@keras.saving.register_keras_serializable(package="tfscones")
class EntmaxLoss(_TokenLoss):
    """Fenchel-Young α-entmax loss for entmax heads (Peters & Martins 2021, eq. 7, 10-13).

    Args:
        alpha: Entmax α > 1 (1.5 by default; 2 is sparsemax).
        label_smoothing: Fenchel-Young label smoothing ε in [0, 1] (eq. 10).
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
        self.alpha = activations.validate_entmax_alpha(alpha)
        self.n_iter = int(n_iter)

    def per_token_loss(self, targets, logits):
        return entmax_token_loss(targets, logits, self.alpha, self.label_smoothing, self.n_iter)

    def get_config(self):
        return {**super().get_config(), "alpha": self.alpha, "n_iter": self.n_iter}


@keras.saving.register_keras_serializable(package="tfscones")
class SparsemaxLoss(EntmaxLoss):
    """Fenchel-Young sparsemax loss: `EntmaxLoss` with α = 2.

    Args:
        label_smoothing: Fenchel-Young label smoothing ε in [0, 1].
        pad_id: Target id masked out of sequence losses; None masks nothing.
        **kwargs: `keras.losses.Loss` arguments (`name`, `reduction`).
    """

    def __init__(self, label_smoothing: float = 0.0, pad_id=PAD_ID, **kwargs):
        kwargs.pop("alpha", None)
        kwargs.pop("n_iter", None)
        kwargs.setdefault("name", "sparsemax_loss")
        super().__init__(alpha=2.0, label_smoothing=label_smoothing, pad_id=pad_id, **kwargs)


def cross_entropy_token_loss(
    targets: tf.Tensor, logits: tf.Tensor, label_smoothing: float = 0.0
) -> tf.Tensor:
    """Per-token softmax cross-entropy against q = (1-ε) e_y + ε/|V|.

    -Σ_w q_w log softmax(z)_w = (1-ε)(lse(z) - z_y) + ε (lse(z) - mean(z)).

    Args:
        targets: int32 gold ids `[...]`.
        logits: float32 logits `[..., V]`.
        label_smoothing: ε in [0, 1].

    Returns:
        float32 per-token losses `[...]`.
    """
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)
    if label_smoothing > 0.0:
        uniform_term = tf.reduce_logsumexp(logits, axis=-1) - tf.reduce_mean(logits, axis=-1)
        loss = (1.0 - label_smoothing) * loss + label_smoothing * uniform_term
    return loss


@keras.saving.register_keras_serializable(package="tfscones")
class SequenceCrossEntropy(_TokenLoss):
    """Softmax cross-entropy with label smoothing: the baseline, masked like the other losses.

    Args:
        label_smoothing: ε in [0, 1]; the target is (1-ε) e_y + ε/|V|.
        pad_id: Target id masked out of sequence losses; None masks nothing.
        **kwargs: `keras.losses.Loss` arguments (`name`, `reduction`).
    """

    def __init__(self, label_smoothing: float = 0.0, pad_id=PAD_ID, **kwargs):
        kwargs.setdefault("name", "sequence_cross_entropy")
        super().__init__(label_smoothing=label_smoothing, pad_id=pad_id, **kwargs)

    def per_token_loss(self, targets, logits):
        return cross_entropy_token_loss(targets, logits, self.label_smoothing)
