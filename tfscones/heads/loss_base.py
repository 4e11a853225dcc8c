"""What every head's loss and loss metric share: target checks, pad masking and the reduction.

Every loss takes logits `[..., vocab]` and integer targets `[...]`: sequences (`[batch, length,
vocab]` with `[batch, length]`) or classification (`[batch, classes]` with `[batch]`). In sequences,
positions whose target is `pad_id` (default 0) are masked, and the loss is the sum over the other
tokens divided by their number (the `weights.sum()` of the SCONES JAX listing, Stahlberg &
Kumar 2022, Fig. 10).
Classification labels (rank-1 targets) are never masked: there, 0 is a class like any other.

All losses compute in float32 whatever the logits' dtype (mixed precision included). A head's
module subclasses `TokenLoss` (its `per_token_loss`) and `TokenMean` (its `per_token_value`).

Infinite logits mean the same to every loss, which takes the limit its equations give: a -inf
logit is a token the model rules out (probability 0, σ = 0), a +inf logit one it is certain of
(σ = 1; the normalised heads share the probability among the +inf tokens of a row). A loss is
therefore +inf where the gold token is ruled out, or another token is certain instead of it, or
label smoothing puts mass on a ruled-out token; finite where those limits are (a masked wrong
token costs nothing). A NaN logit gives a NaN loss. Rows of finite logits, the usual case, take
the fast path of each loss; `all_finite` decides, in eager, graph and XLA mode alike.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from tfscones.data.vocab_ids import PAD_ID
from tfscones.ranges import LABEL_SMOOTHING


def validate_label_smoothing(label_smoothing: float) -> float:
    """Checks a label smoothing factor (`tfscones.ranges.LABEL_SMOOTHING`, [0, 1)).

    Args:
        label_smoothing: The smoothing factor (λ of SCONES eq. 11-12, ε of entmax eq. 10).

    Returns:
        The factor as a Python float.

    Raises:
        ValueError: If it is not a number in [0, 1).
    """
    return LABEL_SMOOTHING.check("label_smoothing", label_smoothing)


def all_finite(logits: tf.Tensor) -> tf.Tensor:
    """Whether every logit is finite: one sum per row, NaN or infinite as soon as one logit is.

    A sum of huge finite logits can overflow too; the loss then takes its exact, slower path.
    """
    return tf.reduce_all(tf.math.is_finite(tf.reduce_sum(logits, axis=-1)))


def weighted(weight: float, values: tf.Tensor) -> tf.Tensor:
    """`weight · values`, 0 wherever the weight is 0 even if a value is infinite (0 · ∞ = 0)."""
    return tf.math.multiply_no_nan(values, tf.constant(weight, values.dtype))


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
            or lies outside [0, vocab_size). XLA drops such checks; `TokenLoss` then makes the
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


def numeric_targets(y_true) -> tf.Tensor:
    """The targets as a tensor, refused at once unless they are numbers.

    Raises:
        ValueError: If the targets are strings (text not yet tokenised) or another non-number.
    """
    targets = tf.convert_to_tensor(y_true)
    if not (targets.dtype.is_integer or targets.dtype.is_floating):
        raise ValueError(
            f"targets must be integer token ids (got dtype {targets.dtype.name}); tokenise "
            "text with the model's tokenizer first."
        )
    return targets


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


def checked_sample_weight(sample_weight) -> tf.Tensor:
    """float32 sample weights, refused if one is negative or not finite.

    Raises:
        tf.errors.InvalidArgumentError: When the graph runs, if a weight is negative, infinite
            or NaN. XLA drops the check; the weights, and so the loss, are then NaN.
    """
    weights = tf.cast(tf.convert_to_tensor(sample_weight), tf.float32)
    valid = tf.reduce_all(tf.math.is_finite(weights) & (weights >= 0.0))
    message = "sample_weight must be finite and non-negative; got a negative, inf or NaN weight"
    with tf.control_dependencies([tf.debugging.Assert(valid, [message])]):
        return tf.where(valid, weights, math.nan)


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


class TokenLoss(keras.losses.Loss):
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
        y_true = numeric_targets(y_true)
        if sample_weight is not None:
            check_sample_weight_shape(sample_weight, y_true, y_pred)
            sample_weight = checked_sample_weight(sample_weight)
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


def gold_logits(targets: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """logits[..., targets]: each position's logit of its target id."""
    return tf.gather(logits, targets[..., tf.newaxis], batch_dims=targets.shape.rank)[..., 0]


def add_at_targets(values: tf.Tensor, targets: tf.Tensor, updates: tf.Tensor) -> tf.Tensor:
    """values[..., targets] += updates, without materialising a one-hot tensor."""
    flat_values = tf.reshape(values, [-1, tf.shape(values)[-1]])
    flat_targets = tf.reshape(targets, [-1])
    indices = tf.stack([tf.range(tf.size(flat_targets)), flat_targets], axis=1)
    flat_values = tf.tensor_scatter_nd_add(flat_values, indices, tf.reshape(updates, [-1]))
    return tf.reshape(flat_values, tf.shape(values))


class TokenMean(keras.metrics.Mean):
    """Mean of a per-token quantity over non-pad tokens (all labels for classification)."""

    def __init__(self, pad_id: int | None = PAD_ID, **kwargs):
        super().__init__(**kwargs)
        self.pad_id = None if pad_id is None else int(pad_id)

    def update_state(self, y_true, y_pred, sample_weight=None):
        targets, logits = token_ids_and_logits(numeric_targets(y_true), y_pred)
        weights = tf.ones_like(targets, tf.float32)
        if self.pad_id is not None and targets.shape.rank >= 2:
            weights = tf.cast(tf.not_equal(targets, self.pad_id), tf.float32)
        if sample_weight is not None:
            sample_weight = checked_sample_weight(sample_weight)
            weights = weights * expand_to_rank(sample_weight, weights.shape.rank)
        return super().update_state(self.per_token_value(targets, logits), sample_weight=weights)

    def per_token_value(self, targets: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        """The quantity to average: int32 targets `[...]`, float32 logits `[..., V]`."""
        raise NotImplementedError

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}
