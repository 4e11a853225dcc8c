"""One decoding step of a keras-hub `TransformerDecoder` layer, for one token per row.

`TransformerStepper.decode_step` runs a `Seq2SeqTransformer`'s decoder layers through these
functions instead of the layers' own `call`: they compute what the layer computes for one new
position (the same weights, the same pre- or post-norm order, the same scaled dot-product attention)
with a few plain TensorFlow ops on `[rows, hidden]` states, because decoding is a loop of tiny steps
whose time is mostly per-op overhead and copies of the cache. Keys and values are kept head-major,
`[rows, heads, positions, head_dim]`, so that both attention products are batched matrix products;
keras-hub's layer works on `[rows, positions, heads, head_dim]` with `einsum`, which is much slower
for one query on a CPU.

The layer's sublayers come from `keras_hub_parts` (the one reader of keras-hub's private
attributes), and the self-attention cache of earlier positions from `caches`, whose slots say
how a step meets it (appended, written in place, or kept apart).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import keras
import tensorflow as tf

from tfscones.models.stepping.attention import attend
from tfscones.models.stepping.caches import AppendedSlots, PrefixSlots, SelfAttentionSlots
from tfscones.models.stepping.contract import SourceGroups
from tfscones.models.stepping.keras_hub_parts import AttentionParts, DecoderLayerParts


class Projection(NamedTuple):
    """A dense projection's weights as a step multiplies by them: `inputs @ kernel + bias`.

    Attributes:
        kernel: `[inputs, outputs]` in the compute dtype (an attention layer's `EinsumDense`
            kernel reshaped to two axes).
        bias: `[outputs]`.
    """

    kernel: tf.Tensor
    bias: tf.Tensor

    def __call__(self, inputs: tf.Tensor) -> tf.Tensor:
        return tf.matmul(inputs, self.kernel) + self.bias


def _heads_projection(dense, dtype) -> Projection:
    """A query, key or value `EinsumDense` (`[hidden, heads, head_dim]`) as `[hidden, H * D]`."""
    hidden_dim, num_heads, head_dim = dense.kernel.shape
    return Projection(
        kernel=tf.reshape(tf.cast(dense.kernel, dtype), [hidden_dim, num_heads * head_dim]),
        bias=tf.reshape(tf.cast(dense.bias, dtype), [num_heads * head_dim]),
    )


def _output_projection(dense, dtype) -> Projection:
    """An attention output `EinsumDense` (`[heads, head_dim, hidden]`) as `[H * D, hidden]`."""
    num_heads, head_dim, hidden_dim = dense.kernel.shape
    return Projection(
        kernel=tf.reshape(tf.cast(dense.kernel, dtype), [num_heads * head_dim, hidden_dim]),
        bias=tf.cast(dense.bias, dtype),
    )


def heads_of(dense, inputs: tf.Tensor, num_heads: int, head_dim: int) -> tf.Tensor:
    """A multi-head projection (`EinsumDense` `[hidden, heads, head_dim]`) of `[rows, ..., hidden]`.

    Args:
        dense: An attention layer's query, key or value `EinsumDense` (`AttentionParts`).
        inputs: `[rows, hidden]` (one position) or `[rows, length, hidden]`.
        num_heads: Number of heads.
        head_dim: Size of one head.

    Returns:
        Head-major `[rows, heads, 1, head_dim]` or `[rows, heads, length, head_dim]`.
    """
    projection = _heads_projection(dense, inputs.dtype)
    if inputs.shape.rank == 2:
        return _split_heads(projection(inputs), num_heads, head_dim)
    rows = tf.shape(inputs)[0]
    projected = projection(tf.reshape(inputs, [-1, dense.kernel.shape[0]]))
    projected = tf.reshape(projected, [rows, -1, num_heads, head_dim])
    return tf.transpose(projected, [0, 2, 1, 3])


def _split_heads(projected: tf.Tensor, num_heads: int, head_dim: int) -> tf.Tensor:
    """`[rows, H * D]` of one position as head-major `[rows, heads, 1, head_dim]`.

    `[rows, 1, heads, head_dim]` and `[rows, heads, 1, head_dim]` are the same memory, so no
    transpose is needed; the shape is static, so no shape ops run per step.
    """
    return tf.reshape(projected, [-1, num_heads, 1, head_dim])


def _merge_heads(heads: tf.Tensor) -> tf.Tensor:
    """`[rows, heads, 1, head_dim]` as `[rows, H * D]` (the same memory)."""
    return tf.reshape(heads, [-1, heads.shape[1] * heads.shape[3]])


def _lean_norm(norm, dtype) -> bool:
    """Whether `layer_norm` can compute `norm` itself (float32, centred and scaled, last axis)."""
    axis = norm.axis if isinstance(norm.axis, (list, tuple)) else [norm.axis]
    return (
        tf.as_dtype(dtype) == tf.float32
        and norm.compute_dtype == "float32"
        and not norm.rms_scaling
        and norm.center
        and norm.scale
        and list(axis) == [-1]
    )


class NormWeights(NamedTuple):
    """A keras `LayerNormalization` that `layer_norm` computes itself, and its weights."""

    layer: Any
    gamma: tf.Tensor | None
    beta: tf.Tensor | None


def norm_weights(norm, dtype) -> NormWeights:
    """`norm`'s weights read once, or None weights where the layer must compute itself."""
    if not _lean_norm(norm, dtype):
        return NormWeights(norm, None, None)
    return NormWeights(norm, tf.convert_to_tensor(norm.gamma), tf.convert_to_tensor(norm.beta))


def layer_norm(norm: NormWeights, x: tf.Tensor) -> tf.Tensor:
    """`norm.layer(x)` of a keras `LayerNormalization` over the last axis, in fewer ops.

    keras computes `inv = rsqrt(variance + epsilon) * gamma` and `x * inv + (-mean * inv + beta)`
    from `moments` (with a `StopGradient` of the mean, and reshapes of gamma and beta); this is
    the same arithmetic in the same order, so the same values, without them (negating a product
    and swapping an addition are exact). Other configurations call the layer.

    Args:
        norm: From `norm_weights`.
        x: `[rows, hidden]`.

    Returns:
        `[rows, hidden]`, as the layer computes it.
    """
    if norm.gamma is None:
        return norm.layer(x)
    mean = tf.reduce_mean(x, axis=-1, keepdims=True)
    variance = tf.reduce_mean(tf.math.squared_difference(x, mean), axis=-1, keepdims=True)
    inv = tf.math.rsqrt(variance + norm.layer.epsilon) * norm.gamma
    return x * inv + (norm.beta - mean * inv)


class LayerWeights(NamedTuple):
    """One decoder layer's weights as a step uses them: read, cast and reshaped to two axes.

    `Seq2SeqTransformer.decode_step` makes them inside the step: in a lowered `tf.while_loop`
    a tensor captured from outside costs three ops per iteration (Merge, Switch,
    NextIteration), more than a variable read and a reshape (a variable's handle enters the
    loop as a constant).

    Attributes:
        query, key, value: Self-attention `Projection`s `[hidden, H * D]`.
        self_output: Self-attention output `Projection` `[H * D, hidden]`.
        cross_query: Cross-attention query `Projection`.
        cross_output: Cross-attention output `Projection`.
        self_norm, cross_norm, feedforward_norm: `NormWeights` of the three blocks.
        intermediate, output: Feed-forward `Projection`s, or None to call the `Dense` layers
            (when they are not plain float `Dense` layers).
    """

    query: Projection
    key: Projection
    value: Projection
    self_output: Projection
    cross_query: Projection
    cross_output: Projection
    self_norm: NormWeights
    cross_norm: NormWeights
    feedforward_norm: NormWeights
    intermediate: Projection | None
    output: Projection | None


def _plain_dense(dense) -> bool:
    return (
        type(dense) is keras.layers.Dense
        and dense.quantization_mode is None
        and not dense.lora_enabled
        and dense.use_bias
    )


def layer_weights(parts: DecoderLayerParts, dtype) -> LayerWeights:
    """The `LayerWeights` of a keras-hub `TransformerDecoder`'s parts."""
    attention, cross = parts.self_attention, parts.cross_attention
    plain = _plain_dense(parts.intermediate) and _plain_dense(parts.output)

    def dense(d):
        return Projection(tf.cast(d.kernel, dtype), tf.cast(d.bias, dtype)) if plain else None

    return LayerWeights(
        query=_heads_projection(attention.query, dtype),
        key=_heads_projection(attention.key, dtype),
        value=_heads_projection(attention.value, dtype),
        self_output=_output_projection(attention.output, dtype),
        cross_query=_heads_projection(cross.query, dtype),
        cross_output=_output_projection(cross.output, dtype),
        self_norm=norm_weights(parts.self_norm, dtype),
        cross_norm=norm_weights(parts.cross_norm, dtype),
        feedforward_norm=norm_weights(parts.feedforward_norm, dtype),
        intermediate=dense(parts.intermediate),
        output=dense(parts.output),
    )


def _self_attention(attention: AttentionParts, weights: LayerWeights, x, keys, values, slots):
    """The self-attention block's attention output, and the keys and values it returns.

    `slots` (from the cache's `step_slots`) says how the step meets the cached keys and values:
    appended, written in place, or kept apart (see `tfscones.models.stepping.caches`).
    """
    query, new_keys, new_values = (
        _split_heads(projection(x), attention.num_heads, attention.head_dim)
        for projection in (weights.query, weights.key, weights.value)
    )
    heads, keys, values = slots.attend(query, keys, values, new_keys, new_values)
    return weights.self_output(_merge_heads(heads)), keys, values


def _cross_attention(
    attention: AttentionParts,
    weights: LayerWeights,
    x,
    cross_keys,
    cross_values,
    visible,
    rows_per_source: int | SourceGroups,
):
    """The cross-attention block's attention output, `[rows, hidden]`.

    With `rows_per_source` > 1 the keys and values hold one row per source, which serves that
    many consecutive rows of `x` (the beams of a sentence): the rows' queries are grouped per
    source, `[sources, heads, rows_per_source, head_dim]`, so that each source's keys and values
    are read once for all of its rows rather than tiled to every row. `SourceGroups` does the
    same for rows in any number per source.
    """
    num_heads, head_dim = attention.num_heads, attention.head_dim
    query = weights.cross_query(x)
    if isinstance(rows_per_source, SourceGroups):
        laid_out = tf.scatter_nd(
            rows_per_source.places[:, tf.newaxis],
            query,
            [tf.shape(cross_keys)[0] * rows_per_source.width, num_heads * head_dim],
        )
        heads = _attend_per_source(
            laid_out, rows_per_source.width, cross_keys, cross_values, visible, num_heads
        )
        return weights.cross_output(tf.gather(heads, rows_per_source.places))
    if rows_per_source == 1:
        heads = attend(
            _split_heads(query, num_heads, head_dim),
            cross_keys,
            cross_values,
            visible,
            head_dim**-0.5,
        )
        return weights.cross_output(_merge_heads(heads))
    heads = _attend_per_source(query, rows_per_source, cross_keys, cross_values, visible, num_heads)
    return weights.cross_output(heads)


def _attend_per_source(query, rows_per_source, keys, values, visible, num_heads: int):
    """`attend` of `[sources * rows_per_source, H * D]` queries, consecutive per source.

    Returns:
        `[sources * rows_per_source, H * D]`.
    """
    head_dim = query.shape[-1] // num_heads
    query = tf.reshape(query, [-1, rows_per_source, num_heads, head_dim])
    heads = attend(tf.transpose(query, [0, 2, 1, 3]), keys, values, visible, head_dim**-0.5)
    heads = tf.transpose(heads, [0, 2, 1, 3])
    return tf.reshape(heads, [-1, num_heads * head_dim])


def _block_input(norm: NormWeights, normalize_first: bool, x: tf.Tensor) -> tf.Tensor:
    """A residual block's input: normalised first in a pre-norm layer."""
    return layer_norm(norm, x) if normalize_first else x


def _block_output(norm: NormWeights, normalize_first: bool, residual, outputs) -> tf.Tensor:
    """`residual + outputs`, normalised after in a post-norm layer."""
    x = residual + outputs
    return x if normalize_first else layer_norm(norm, x)


def _feedforward(parts: DecoderLayerParts, weights: LayerWeights, x: tf.Tensor) -> tf.Tensor:
    """The feed-forward block's two `Dense` layers (as their `call`: matmul, bias, activation)."""
    intermediate, output = parts.intermediate, parts.output
    if weights.intermediate is None:
        return output(intermediate(x))
    hidden = weights.intermediate(x)
    if intermediate.activation is not None:
        hidden = intermediate.activation(hidden)
    x = weights.output(hidden)
    if output.activation is not None:
        x = output.activation(x)
    return x


class LayerStep(NamedTuple):
    """What one decoder layer's step returns.

    Attributes:
        outputs: `[rows, hidden]`, the layer's output at this position.
        keys: `[rows, heads, positions, head_dim]`, the self-attention keys with this position's
            (`[rows, 1, heads, head_dim]`, this position's alone, after `PrefixSlots`).
        values: Likewise, the values.
    """

    outputs: tf.Tensor
    keys: tf.Tensor
    values: tf.Tensor


def decoder_layer_step(
    parts: DecoderLayerParts,
    x: tf.Tensor,
    keys: tf.Tensor,
    values: tf.Tensor,
    cross_keys: tf.Tensor,
    cross_values: tf.Tensor,
    source_visible: tf.Tensor,
    slots: AppendedSlots | SelfAttentionSlots | PrefixSlots,
    weights: LayerWeights | None = None,
    rows_per_source: int | SourceGroups = 1,
) -> LayerStep:
    """A decoder layer at one new position of every row, from the keys and values of earlier ones.

    Equals the layer's `call` at that position in inference mode (dropout off).

    Args:
        parts: `decoder_layer_parts` of a built keras-hub `TransformerDecoder` with
            cross-attention.
        x: `[rows, hidden]`, the layer's input at the new position.
        keys: Self-attention keys of earlier positions, from the cache's `layer`.
        values: Self-attention values, like `keys`.
        cross_keys: Keys over the encoder outputs, `[sources, heads, source_length, head_dim]`,
            where `sources = rows / rows_per_source`.
        cross_values: Values over the encoder outputs, like `cross_keys`.
        source_visible: bool `[sources, 1, 1, source_length]`, True at real source tokens.
        slots: From the cache's `step_slots`: how the step meets `keys` and `values`.
        weights: `layer_weights(parts, x.dtype)`; computed here if None.
        rows_per_source: How many consecutive rows share each source row of `cross_keys`,
            `cross_values` and `source_visible` (a static int; the beams of a sentence), or a
            `SourceGroups` of rows in any number per source.

    Returns:
        A `LayerStep`.
    """
    if weights is None:
        weights = layer_weights(parts, x.dtype)
    pre_norm = parts.normalize_first
    with tf.name_scope("self_attention"):
        attended, keys, values = _self_attention(
            parts.self_attention,
            weights,
            _block_input(weights.self_norm, pre_norm, x),
            keys,
            values,
            slots,
        )
        x = _block_output(weights.self_norm, pre_norm, x, attended)
    with tf.name_scope("cross_attention"):
        attended = _cross_attention(
            parts.cross_attention,
            weights,
            _block_input(weights.cross_norm, pre_norm, x),
            cross_keys,
            cross_values,
            source_visible,
            rows_per_source,
        )
        x = _block_output(weights.cross_norm, pre_norm, x, attended)
    with tf.name_scope("feedforward"):
        hidden = _feedforward(parts, weights, _block_input(weights.feedforward_norm, pre_norm, x))
        x = _block_output(weights.feedforward_norm, pre_norm, x, hidden)
    return LayerStep(outputs=x, keys=keys, values=values)


def cross_keys_and_values(
    parts: DecoderLayerParts, encoder_outputs: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """The cross-attention keys and values of a decoder layer over `encoder_outputs`, head-major.

    Args:
        parts: `decoder_layer_parts` of a keras-hub `TransformerDecoder` with cross-attention.
        encoder_outputs: `[rows, source_length, hidden]`.

    Returns:
        `(keys, values)`, each `[rows, heads, source_length, head_dim]`.
    """
    attention = parts.cross_attention
    return (
        heads_of(attention.key, encoder_outputs, attention.num_heads, attention.head_dim),
        heads_of(attention.value, encoder_outputs, attention.num_heads, attention.head_dim),
    )
