"""Scaled dot-product attention as keras computes it, for one query position per row.

The decoding step (`tfscones.models.stepping.layer_step`) and its caches
(`tfscones.models.stepping.caches`) attend with these: logits in float32 (or wider), scaled after
the product, masked to a large negative value and normalised in float32, the probabilities in the
keys' dtype, as `keras.ops.dot_product_attention`.
"""

from __future__ import annotations

import tensorflow as tf

MASKED_LOGIT = -1e9


def attend(query, keys, values, visible, scale: float) -> tf.Tensor:
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
    return tf.matmul(attention_weights(logits, visible, scale, keys.dtype), values)


def attention_weights(logits, visible, scale: float, dtype, axis: int = -1) -> tf.Tensor:
    """The softmax of scaled, masked attention logits, as `keras.ops.dot_product_attention`.

    Logits are float32 (or wider), scaled, masked to a large negative value where not
    `visible` (None: nowhere) and normalised in float32 along `axis`, the positions; the
    weights take `dtype`.
    """
    logits = float32_or_wider(logits) * scale
    if visible is not None:
        logits = tf.where(visible, logits, MASKED_LOGIT)
    return tf.cast(tf.nn.softmax(logits, axis=axis), dtype)


def float32_or_wider(tensor: tf.Tensor) -> tf.Tensor:
    """`tensor` as float32 if its dtype is narrower (mixed precision), else as it is."""
    return tensor if tensor.dtype in (tf.float32, tf.float64) else tf.cast(tensor, tf.float32)


def attend_prefix_and_own(query, keys, values, own_keys, own_values, visible, scale: float):
    """`attend` over a row's prefix (`visible` slots of `keys`, `values`) and its own position.

    The same scaled dot-product attention as `attend` over the prefix with the own position
    written in, without the copy of the cache that writing it takes: the own position's logit
    is computed apart and joins the prefix's logits in one softmax. The prefix is laid out
    positions before heads, as exact search gathers it from its pool: with one query per row,
    each logit is a product summed over `head_dim` and the output a weighted sum over
    positions, elementwise, so the gathered keys and values are read once and never
    transposed to the head-major layout a matrix product would need. Products and sums are
    float32 (or wider), as the logits of `attend`.

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
    query = float32_or_wider(tf.reshape(query, [-1, 1, num_heads, head_dim]))
    logits = tf.concat(
        [
            tf.reduce_sum(float32_or_wider(keys) * query, axis=-1),
            tf.reduce_sum(float32_or_wider(own_keys) * query, axis=-1),
        ],
        axis=1,
    )
    weights = attention_weights(logits, visible, scale, logits.dtype, axis=1)[..., tf.newaxis]
    slots = tf.shape(keys)[1]
    heads = tf.reduce_sum(weights[:, :slots] * float32_or_wider(values), axis=1)
    heads += weights[:, slots] * float32_or_wider(own_values)[:, 0]
    return tf.reshape(tf.cast(heads, own_values.dtype), [-1, num_heads, 1, head_dim])


__all__ = ["attend", "attend_prefix_and_own", "attention_weights", "float32_or_wider"]
