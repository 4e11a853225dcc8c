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
"""

from __future__ import annotations

from typing import NamedTuple

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
    rows = tf.shape(inputs)[0]
    hidden_dim = dense.kernel.shape[0]
    flat = tf.reshape(inputs, [-1, hidden_dim])
    kernel = tf.reshape(tf.cast(dense.kernel, inputs.dtype), [hidden_dim, num_heads * head_dim])
    projected = tf.matmul(flat, kernel) + tf.reshape(tf.cast(dense.bias, inputs.dtype), [-1])
    if inputs.shape.rank == 2:
        # One position: `[rows, 1, heads, head_dim]` and `[rows, heads, 1, head_dim]` are the
        # same memory, so no transpose is needed.
        return tf.reshape(projected, [rows, num_heads, 1, head_dim])
    projected = tf.reshape(projected, [rows, -1, num_heads, head_dim])
    return tf.transpose(projected, [0, 2, 1, 3])


def _output_of(dense, heads: tf.Tensor) -> tf.Tensor:
    """The attention output projection (`EinsumDense` `[heads, head_dim, hidden]`) of one position.

    Args:
        dense: The attention layer's `_output_dense`.
        heads: `[rows, heads, 1, head_dim]`.

    Returns:
        `[rows, hidden]`.
    """
    num_heads, head_dim, hidden_dim = dense.kernel.shape
    kernel = tf.reshape(tf.cast(dense.kernel, heads.dtype), [num_heads * head_dim, hidden_dim])
    flat = tf.reshape(heads, [-1, num_heads * head_dim])
    return tf.matmul(flat, kernel) + tf.cast(dense.bias, heads.dtype)


def _attend(query, keys, values, visible, scale: float) -> tf.Tensor:
    """Scaled dot-product attention of one query per row and head, as keras's.

    Logits are float32 (or wider), scaled after the product, masked to a large negative value and
    normalised in float32; the probabilities take the keys' dtype before weighting the values,
    as `keras.ops.dot_product_attention` computes them.

    Args:
        query: `[rows, heads, 1, head_dim]`.
        keys: `[rows, heads, positions, head_dim]`.
        values: `[rows, heads, positions, head_dim]`.
        visible: None, or bool broadcastable to `[rows, heads, 1, positions]`.
        scale: The factor of the logits, `head_dim ** -0.5`.

    Returns:
        `[rows, heads, 1, head_dim]`.
    """
    logits = tf.matmul(query, keys, transpose_b=True)
    if logits.dtype != tf.float64:
        logits = tf.cast(logits, tf.float32)
    logits = logits * scale
    if visible is not None:
        logits = tf.where(visible, logits, _MASKED_LOGIT)
    probabilities = tf.cast(tf.nn.softmax(logits, axis=-1), keys.dtype)
    return tf.matmul(probabilities, values)


def _self_attention(attention, x, keys, values, slots: SelfAttentionSlots | None):
    """The self-attention block's attention output and the keys and values after this position."""
    num_heads, head_dim = attention._num_heads, attention._key_dim
    query = heads_of(attention._query_dense, x, num_heads, head_dim)
    new_keys = heads_of(attention._key_dense, x, num_heads, head_dim)
    new_values = heads_of(attention._value_dense, x, num_heads, head_dim)
    if slots is None:
        keys = tf.concat([keys, new_keys], axis=2)
        values = tf.concat([values, new_values], axis=2)
        visible = None
    else:
        keys = tf.where(slots.written, new_keys, keys)
        values = tf.where(slots.written, new_values, values)
        visible = slots.visible
    heads = _attend(query, keys, values, visible, head_dim**-0.5)
    return _output_of(attention._output_dense, heads), keys, values


def _cross_attention(attention, x, cross_keys, cross_values, source_visible):
    num_heads, head_dim = attention._num_heads, attention._key_dim
    query = heads_of(attention._query_dense, x, num_heads, head_dim)
    heads = _attend(query, cross_keys, cross_values, source_visible, head_dim**-0.5)
    return _output_of(attention._output_dense, heads)


def _block_input(layer_norm, normalize_first: bool, x: tf.Tensor) -> tf.Tensor:
    """A residual block's input: normalised first in a pre-norm layer."""
    return layer_norm(x) if normalize_first else x


def _block_output(layer_norm, normalize_first: bool, residual, outputs) -> tf.Tensor:
    """`residual + outputs`, normalised after in a post-norm layer."""
    x = residual + outputs
    return x if normalize_first else layer_norm(x)


class LayerStep(NamedTuple):
    """What one decoder layer's step returns.

    Attributes:
        outputs: `[rows, hidden]`, the layer's output at this position.
        keys: `[rows, heads, positions, head_dim]`, the self-attention keys with this position's.
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
    slots: SelfAttentionSlots | None = None,
) -> LayerStep:
    """`layer` at one new position of every row, from the keys and values of earlier ones.

    Equals the layer's `call` at that position in inference mode (dropout off).

    Args:
        layer: A built keras-hub `TransformerDecoder` with cross-attention.
        x: `[rows, hidden]`, the layer's input at the new position.
        keys: Self-attention keys `[rows, heads, positions, head_dim]`: the filled prefix, or the
            fixed slots that `slots` describes.
        values: Self-attention values, like `keys`.
        cross_keys: Keys over the encoder outputs, `[rows, heads, source_length, head_dim]`.
        cross_values: Values over the encoder outputs, like `cross_keys`.
        source_visible: bool `[rows, 1, 1, source_length]`, True at real source tokens.
        slots: None for a filled prefix, else where to write and which slots to read.

    Returns:
        A `LayerStep`.
    """
    pre_norm = layer.normalize_first
    with tf.name_scope("self_attention"):
        norm = layer._self_attention_layer_norm
        attended, keys, values = _self_attention(
            layer._self_attention_layer, _block_input(norm, pre_norm, x), keys, values, slots
        )
        x = _block_output(norm, pre_norm, x, attended)
    with tf.name_scope("cross_attention"):
        norm = layer._cross_attention_layer_norm
        attended = _cross_attention(
            layer._cross_attention_layer,
            _block_input(norm, pre_norm, x),
            cross_keys,
            cross_values,
            source_visible,
        )
        x = _block_output(norm, pre_norm, x, attended)
    with tf.name_scope("feedforward"):
        norm = layer._feedforward_layer_norm
        hidden = layer._feedforward_intermediate_dense(_block_input(norm, pre_norm, x))
        x = _block_output(norm, pre_norm, x, layer._feedforward_output_dense(hidden))
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
