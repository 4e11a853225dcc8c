"""One decoding step of a keras-hub `TransformerDecoder` layer, for one token per row.

`Seq2SeqTransformer.decode_step` runs its decoder layers through these functions instead of the
layers' own `call`: they compute what the layer computes for one new position (the same weights,
the same pre- or post-norm order, the same scaled dot-product attention) with a few plain
TensorFlow ops on `[rows, hidden]` states, because decoding is a loop of tiny steps whose time is
mostly per-op overhead and copies of the cache. Keys and values are kept head-major,
`[rows, heads, positions, head_dim]`, so that both attention products are batched matrix
products; keras-hub's layer works on `[rows, positions, heads, head_dim]` with `einsum`, which is
much slower for one query on a CPU.

The self-attention keys and values of earlier positions come in two forms:
- filled prefix (`SelfAttentionSlots` is None): they hold exactly the positions before this
  one; the step appends its own, so each step costs work in proportion to the positions decoded,
  not to the longest possible output;
- fixed slots (`SelfAttentionSlots`): a preallocated cache of every position; the step writes
  its keys and values at each row's position and attends to the slots up to it. Shapes never
  change, so this form runs under XLA, and rows may be at different positions (exact search).
- row prefixes (`PrefixSlots`): each row's earlier positions in its first slots, the rest
  padding; the step attends to them and to its own keys and values, which it returns alone
  instead of writing them into a copy of the cache (exact search keeps positions itself).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import keras
import keras_hub
import tensorflow as tf

_MASKED_LOGIT = -1e9


class SelfAttentionSlots(NamedTuple):
    """Where a step on a preallocated self-attention cache writes and which slots it reads.

    Attributes:
        written: bool `[rows, 1, slots, 1]`, True at each row's position.
        visible: bool `[rows, 1, 1, slots]`, True at the row's positions up to its own.
    """

    written: tf.Tensor
    visible: tf.Tensor

    @classmethod
    def at(cls, positions: tf.Tensor, slots: tf.Tensor | int) -> SelfAttentionSlots:
        """The slots of rows at `positions` (int32 `[rows]`) in a cache of `slots` positions."""
        slot_ids = tf.range(slots, dtype=tf.int32)[tf.newaxis, :]
        positions = positions[:, tf.newaxis]
        written = tf.equal(slot_ids, positions)[:, tf.newaxis, :, tf.newaxis]
        visible = tf.less_equal(slot_ids, positions)[:, tf.newaxis, tf.newaxis, :]
        return cls(written=written, visible=visible)


class PrefixSlots(NamedTuple):
    """Which slots of each row's prefix a step reads, and its own position after them.

    Attributes:
        visible: bool `[rows, slots + 1, 1]` (positions before heads, as a `PrefixCache`), True
            at the row's positions before its own and at the last entry, which stands for the
            step's own position.
    """

    visible: tf.Tensor

    @classmethod
    def before(cls, positions: tf.Tensor, slots: tf.Tensor | int) -> PrefixSlots:
        """The slots before each row's position (int32 `[rows]`) in prefixes of `slots` slots."""
        slot_ids = tf.range(slots + 1, dtype=tf.int32)[tf.newaxis, :]
        visible = tf.logical_or(slot_ids < positions[:, tf.newaxis], tf.equal(slot_ids, slots))
        return cls(visible[:, :, tf.newaxis])


class SourceGroups(NamedTuple):
    """Rows that decode their sources in any number each, for cross-attention without copies.

    Exact search steps a varying number of prefixes of each sentence together. Rather than
    give every row a copy of its sentence's cross-attention keys and values, a step lays the
    rows' queries out per source, `[sources, width]` places (`width` the most rows of any
    source, unused places zero), attends to each source's keys and values once for all of its
    rows, and takes each row's output back from its place. The layout's size depends on the
    rows' sources, so a step with it runs eagerly and in `tf.function`, not under XLA.

    Attributes:
        places: int32 `[rows]`, each row's place in the `[sources * width]` layout.
        width: int32 scalar, the places per source.
    """

    places: tf.Tensor
    width: tf.Tensor

    @classmethod
    def of(cls, row_sources: tf.Tensor) -> SourceGroups:
        """The groups of rows decoding sources `row_sources` (int32 `[rows]`, in any order).

        Rows of the same source take its places in their order; the sources are
        `0..max(row_sources)`.
        """
        row_sources = tf.convert_to_tensor(row_sources, tf.int32)
        order = tf.argsort(row_sources, stable=True)
        sorted_sources = tf.gather(row_sources, order)
        sorted_rows = tf.range(tf.size(row_sources))
        first_of_source = tf.math.unsorted_segment_min(
            sorted_rows, sorted_sources, tf.reduce_max(row_sources) + 1
        )
        ranks_sorted = sorted_rows - tf.gather(first_of_source, sorted_sources)
        ranks = tf.scatter_nd(order[:, tf.newaxis], ranks_sorted, tf.shape(row_sources))
        width = tf.reduce_max(ranks) + 1
        return cls(places=row_sources * width + ranks, width=width)


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
        dense: The attention layer's `_query_dense`, `_key_dense` or `_value_dense`.
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


def layer_weights(layer, dtype) -> LayerWeights:
    """The `LayerWeights` of a keras-hub `TransformerDecoder` with cross-attention."""
    attention = layer._self_attention_layer
    cross = layer._cross_attention_layer
    plain = _plain_dense(layer._feedforward_intermediate_dense) and _plain_dense(
        layer._feedforward_output_dense
    )

    def dense(d):
        return Projection(tf.cast(d.kernel, dtype), tf.cast(d.bias, dtype)) if plain else None

    return LayerWeights(
        query=_heads_projection(attention._query_dense, dtype),
        key=_heads_projection(attention._key_dense, dtype),
        value=_heads_projection(attention._value_dense, dtype),
        self_output=_output_projection(attention._output_dense, dtype),
        cross_query=_heads_projection(cross._query_dense, dtype),
        cross_output=_output_projection(cross._output_dense, dtype),
        self_norm=norm_weights(layer._self_attention_layer_norm, dtype),
        cross_norm=norm_weights(layer._cross_attention_layer_norm, dtype),
        feedforward_norm=norm_weights(layer._feedforward_layer_norm, dtype),
        intermediate=dense(layer._feedforward_intermediate_dense),
        output=dense(layer._feedforward_output_dense),
    )


def _attend(query, keys, values, visible, scale: float) -> tf.Tensor:
    """Scaled dot-product attention of a row's queries per head, as keras's.

    Logits are float32 (or wider), scaled after the product, masked to a large negative value and
    normalised in float32; the probabilities take the keys' dtype before weighting the values,
    as `keras.ops.dot_product_attention` computes them.

    Args:
        query: `[rows, heads, queries, head_dim]` (one query per row, or the queries of the rows
            that share a source).
        keys: `[rows, heads, positions, head_dim]`.
        values: `[rows, heads, positions, head_dim]`.
        visible: None, or bool broadcastable to `[rows, heads, queries, positions]`.
        scale: The factor of the logits, `head_dim ** -0.5`.

    Returns:
        `[rows, heads, queries, head_dim]`.
    """
    logits = tf.matmul(query, keys, transpose_b=True)
    return tf.matmul(_attention_weights(logits, visible, scale, keys.dtype), values)


def _attention_weights(logits, visible, scale: float, dtype, axis: int = -1) -> tf.Tensor:
    """The softmax of scaled, masked attention logits, as `keras.ops.dot_product_attention`.

    Logits are float32 (or wider), scaled, masked to a large negative value where not
    `visible` (None: nowhere) and normalised in float32 along `axis`, the positions; the
    weights take `dtype`.
    """
    logits = _float32_or_wider(logits) * scale
    if visible is not None:
        logits = tf.where(visible, logits, _MASKED_LOGIT)
    return tf.cast(tf.nn.softmax(logits, axis=axis), dtype)


def _float32_or_wider(tensor: tf.Tensor) -> tf.Tensor:
    """`tensor` as float32 if its dtype is narrower (mixed precision), else as it is."""
    return tensor if tensor.dtype in (tf.float32, tf.float64) else tf.cast(tensor, tf.float32)


def _attend_prefix_and_own(query, keys, values, own_keys, own_values, visible, scale: float):
    """`_attend` over a row's prefix (`visible` slots of `keys`, `values`) and its own position.

    The same scaled dot-product attention as `_attend` over the prefix with the own position
    written in, without the copy of the cache that writing it takes: the own position's logit
    is computed apart and joins the prefix's logits in one softmax. The prefix is laid out
    positions before heads, as exact search gathers it from its pool: with one query per row,
    each logit is a product summed over `head_dim` and the output a weighted sum over
    positions, elementwise, so the gathered keys and values are read once and never
    transposed to the head-major layout a matrix product would need. Products and sums are
    float32 (or wider), as the logits of `_attend`.

    Args:
        query: `[rows, heads, 1, head_dim]` (the same memory as `[rows, 1, heads, head_dim]`).
        keys: The prefixes' keys `[rows, slots, heads, head_dim]`.
        values: Likewise, the values.
        own_keys: The step's own keys `[rows, 1, heads, head_dim]`.
        own_values: Likewise, its values.
        visible: bool `[rows, slots + 1, 1]`, True at each row's prefix positions and at its
            own, last (`PrefixSlots.visible`).
        scale: The factor of the logits, `head_dim ** -0.5`.

    Returns:
        `[rows, heads, 1, head_dim]`.
    """
    num_heads, head_dim = keys.shape[2], keys.shape[3]
    query = _float32_or_wider(tf.reshape(query, [-1, 1, num_heads, head_dim]))
    logits = tf.concat(
        [
            tf.reduce_sum(_float32_or_wider(keys) * query, axis=-1),
            tf.reduce_sum(_float32_or_wider(own_keys) * query, axis=-1),
        ],
        axis=1,
    )
    weights = _attention_weights(logits, visible, scale, logits.dtype, axis=1)[..., tf.newaxis]
    slots = tf.shape(keys)[1]
    heads = tf.reduce_sum(weights[:, :slots] * _float32_or_wider(values), axis=1)
    heads += weights[:, slots] * _float32_or_wider(own_values)[:, 0]
    return tf.reshape(tf.cast(heads, own_values.dtype), [-1, num_heads, 1, head_dim])


def _self_attention(attention, weights: LayerWeights, x, keys, values, slots):
    """The self-attention block's attention output, and the keys and values it returns.

    Those are the cache with this position's keys and values appended (`slots` None) or
    written (`SelfAttentionSlots`), or this position's alone (`PrefixSlots`).
    """
    num_heads, head_dim = attention._num_heads, attention._key_dim
    query = _split_heads(weights.query(x), num_heads, head_dim)
    new_keys = _split_heads(weights.key(x), num_heads, head_dim)
    new_values = _split_heads(weights.value(x), num_heads, head_dim)
    if isinstance(slots, PrefixSlots):
        own_keys, own_values = (
            tf.reshape(t, [-1, 1, num_heads, head_dim]) for t in (new_keys, new_values)
        )
        heads = _attend_prefix_and_own(
            query, keys, values, own_keys, own_values, slots.visible, head_dim**-0.5
        )
        return weights.self_output(_merge_heads(heads)), own_keys, own_values
    if slots is None:
        keys = tf.concat([keys, new_keys], axis=2)
        values = tf.concat([values, new_values], axis=2)
        visible = None
    else:
        keys = tf.where(slots.written, new_keys, keys)
        values = tf.where(slots.written, new_values, values)
        visible = slots.visible
    heads = _attend(query, keys, values, visible, head_dim**-0.5)
    return weights.self_output(_merge_heads(heads)), keys, values


def _cross_attention(
    attention,
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
    num_heads, head_dim = attention._num_heads, attention._key_dim
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
        heads = _attend(
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
    """`_attend` of `[sources * rows_per_source, H * D]` queries, consecutive per source.

    Returns:
        `[sources * rows_per_source, H * D]`.
    """
    head_dim = query.shape[-1] // num_heads
    query = tf.reshape(query, [-1, rows_per_source, num_heads, head_dim])
    heads = _attend(tf.transpose(query, [0, 2, 1, 3]), keys, values, visible, head_dim**-0.5)
    heads = tf.transpose(heads, [0, 2, 1, 3])
    return tf.reshape(heads, [-1, num_heads * head_dim])


def _block_input(norm: NormWeights, normalize_first: bool, x: tf.Tensor) -> tf.Tensor:
    """A residual block's input: normalised first in a pre-norm layer."""
    return layer_norm(norm, x) if normalize_first else x


def _block_output(norm: NormWeights, normalize_first: bool, residual, outputs) -> tf.Tensor:
    """`residual + outputs`, normalised after in a post-norm layer."""
    x = residual + outputs
    return x if normalize_first else layer_norm(norm, x)


def _feedforward(layer, weights: LayerWeights, x: tf.Tensor) -> tf.Tensor:
    """The feed-forward block's two `Dense` layers (as their `call`: matmul, bias, activation)."""
    intermediate, output = layer._feedforward_intermediate_dense, layer._feedforward_output_dense
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
    layer: keras_hub.layers.TransformerDecoder,
    x: tf.Tensor,
    keys: tf.Tensor,
    values: tf.Tensor,
    cross_keys: tf.Tensor,
    cross_values: tf.Tensor,
    source_visible: tf.Tensor,
    slots: SelfAttentionSlots | PrefixSlots | None = None,
    weights: LayerWeights | None = None,
    rows_per_source: int | SourceGroups = 1,
) -> LayerStep:
    """`layer` at one new position of every row, from the keys and values of earlier ones.

    Equals the layer's `call` at that position in inference mode (dropout off).

    Args:
        layer: A built keras-hub `TransformerDecoder` with cross-attention.
        x: `[rows, hidden]`, the layer's input at the new position.
        keys: Self-attention keys `[rows, heads, positions, head_dim]`: the filled prefix or
            the fixed slots that `slots` describes; after `PrefixSlots`, the row prefixes
            `[rows, positions, heads, head_dim]`.
        values: Self-attention values, like `keys`.
        cross_keys: Keys over the encoder outputs, `[sources, heads, source_length, head_dim]`,
            where `sources = rows / rows_per_source`.
        cross_values: Values over the encoder outputs, like `cross_keys`.
        source_visible: bool `[sources, 1, 1, source_length]`, True at real source tokens.
        slots: None for a filled prefix; else which slots to read (and, for fixed slots,
            where to write).
        weights: `layer_weights(layer, x.dtype)`; computed here if None.
        rows_per_source: How many consecutive rows share each source row of `cross_keys`,
            `cross_values` and `source_visible` (a static int; the beams of a sentence), or a
            `SourceGroups` of rows in any number per source.

    Returns:
        A `LayerStep`.
    """
    if weights is None:
        weights = layer_weights(layer, x.dtype)
    pre_norm = layer.normalize_first
    with tf.name_scope("self_attention"):
        attended, keys, values = _self_attention(
            layer._self_attention_layer,
            weights,
            _block_input(weights.self_norm, pre_norm, x),
            keys,
            values,
            slots,
        )
        x = _block_output(weights.self_norm, pre_norm, x, attended)
    with tf.name_scope("cross_attention"):
        attended = _cross_attention(
            layer._cross_attention_layer,
            weights,
            _block_input(weights.cross_norm, pre_norm, x),
            cross_keys,
            cross_values,
            source_visible,
            rows_per_source,
        )
        x = _block_output(weights.cross_norm, pre_norm, x, attended)
    with tf.name_scope("feedforward"):
        hidden = _feedforward(layer, weights, _block_input(weights.feedforward_norm, pre_norm, x))
        x = _block_output(weights.feedforward_norm, pre_norm, x, hidden)
    return LayerStep(outputs=x, keys=keys, values=values)


def cross_keys_and_values(layer, encoder_outputs: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The cross-attention keys and values of `layer` over `encoder_outputs`, head-major.

    Args:
        layer: A keras-hub `TransformerDecoder` with cross-attention.
        encoder_outputs: `[rows, source_length, hidden]`.

    Returns:
        `(keys, values)`, each `[rows, heads, source_length, head_dim]`.
    """
    attention = layer._cross_attention_layer
    num_heads, head_dim = attention._num_heads, attention._key_dim
    return (
        heads_of(attention._key_dense, encoder_outputs, num_heads, head_dim),
        heads_of(attention._value_dense, encoder_outputs, num_heads, head_dim),
    )
