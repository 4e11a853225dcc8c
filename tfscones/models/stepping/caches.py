"""The Transformer stepper's self-attention caches: one class per kind, each its own read and write.

A decoding step reads each decoder layer's keys and values of earlier positions from its cache
(`layer`), learns once per step how its position meets them (`step_slots`: the slots it writes
and attends to), and returns the cache of the same kind with its position in it (`written`).
The step never asks which kind it has. Keys and values are head-major,
`[rows, heads, positions, head_dim]`, so that attention is a batched matrix product, except in
`PrefixCache`, where exact search gathers positions from its pool.

- `SlotCache`: a slot for every position, written in place. Shapes never change, so it runs
  under XLA, and rows may be at different positions (an `index` per row).
- `GrowingCache`: exactly the positions decoded so far; a step appends its own, so its work
  grows with the output, not with the longest output allowed.
- `PrefixCache`: each row's own prefix, gathered by exact search; a step attends to it and to
  its own position, which it returns alone (no copy of the prefix with it written in).
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from tfscones.models.stepping.attention import attend, attend_prefix_and_own

KeysAndValues = tuple[tuple[tf.Tensor, tf.Tensor], ...]


class AppendedSlots:
    """How a step meets a `GrowingCache`: it appends its keys and values and attends to all."""

    def attend(self, query, keys, values, new_keys, new_values):
        """Attention of `query` over the cached positions and its own, appended.

        Args:
            query: `[rows, heads, 1, head_dim]`.
            keys: The cached positions' keys, `[rows, heads, positions, head_dim]`.
            values: Their values, likewise.
            new_keys: The step's own keys, `[rows, heads, 1, head_dim]`.
            new_values: The step's own values, likewise.

        Returns:
            `(heads, keys, values)`: `[rows, heads, 1, head_dim]`, and the keys and values with
            the step's position appended.
        """
        keys = tf.concat([keys, new_keys], axis=2)
        values = tf.concat([values, new_values], axis=2)
        return attend(query, keys, values, None, query.shape[-1] ** -0.5), keys, values


class SelfAttentionSlots(NamedTuple):
    """How a step meets a `SlotCache`: the slot it writes and the slots it attends to.

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

    def attend(self, query, keys, values, new_keys, new_values):
        """`AppendedSlots.attend`, the step's keys and values written at each row's slot.

        Args:
            query: `[rows, heads, 1, head_dim]`.
            keys: The cache's keys, `[rows, heads, slots, head_dim]`.
            values: The cache's values, likewise.
            new_keys: The step's own keys, `[rows, heads, 1, head_dim]`.
            new_values: The step's own values, likewise.

        Returns:
            `(heads, keys, values)`: `[rows, heads, 1, head_dim]`, and the cache's keys and
            values with the step's written in.
        """
        keys = tf.where(self.written, new_keys, keys)
        values = tf.where(self.written, new_values, values)
        return attend(query, keys, values, self.visible, query.shape[-1] ** -0.5), keys, values


class PrefixSlots(NamedTuple):
    """How a step meets a `PrefixCache`: which slots of each row's prefix it attends to.

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

    def attend(self, query, keys, values, new_keys, new_values):
        """Attention over each row's prefix and its own position; returns that position alone.

        Args:
            query: `[rows, heads, 1, head_dim]`.
            keys: The prefixes' keys, `[rows, slots, heads, head_dim]`.
            values: Their values, likewise.
            new_keys: The step's own keys, `[rows, heads, 1, head_dim]`.
            new_values: The step's own values, likewise.

        Returns:
            `(heads, own_keys, own_values)`: `[rows, heads, 1, head_dim]`, and the step's keys
            and values `[rows, 1, heads, head_dim]`.
        """
        _, heads, _, head_dim = query.shape
        own_keys, own_values = (
            tf.reshape(t, [-1, 1, heads, head_dim]) for t in (new_keys, new_values)
        )
        attended = attend_prefix_and_own(
            query, keys, values, own_keys, own_values, self.visible, head_dim**-0.5
        )
        return attended, own_keys, own_values


class SlotCache(NamedTuple):
    """A self-attention cache with a slot for every position, written in place.

    Attributes:
        entries: `[rows, layers, 2, heads, width, head_dim]` (axis 2: keys, values).
    """

    entries: tf.Tensor

    @classmethod
    def empty(cls, rows, layers: int, heads: int, width: int, head_dim: int, dtype) -> SlotCache:
        """Zeros for `rows` rows of `width` positions."""
        return cls(tf.zeros([rows, layers, 2, heads, width, head_dim], dtype))

    def layer(self, index: int) -> tuple[tf.Tensor, tf.Tensor]:
        """Layer `index`'s keys and values, each `[rows, heads, width, head_dim]`."""
        with tf.name_scope("cache_slices"):
            return self.entries[:, index, 0], self.entries[:, index, 1]

    def step_slots(self, index: tf.Tensor, rows: tf.Tensor) -> SelfAttentionSlots:
        """The slots of a step at `index` (scalar, or int32 `[rows]`)."""
        return SelfAttentionSlots.at(tf.broadcast_to(index, [rows]), tf.shape(self.entries)[4])

    def written(self, keys_and_values: KeysAndValues) -> SlotCache:
        """The cache of every layer's keys and values, as the step returned them."""
        with tf.name_scope("cache_stack"):
            return SlotCache(tf.stack([tf.stack(pair, axis=1) for pair in keys_and_values], axis=1))


class GrowingCache(NamedTuple):
    """A self-attention cache that holds exactly the positions decoded so far.

    Each layer's keys and values are separate tensors, so a step only appends its position to
    each (one concatenation per tensor) instead of slicing and re-stacking one tensor of every
    layer, which copied the whole cache at every step. Its length changes from step to step, so
    a `tf.while_loop` needs a shape invariant for it, and XLA cannot compile it.

    Attributes:
        layers: One `(keys, values)` pair per decoder layer, each
            `[rows, heads, positions, head_dim]`.
    """

    layers: KeysAndValues

    @classmethod
    def empty(cls, rows, layers: int, heads: int, head_dim: int, dtype) -> GrowingCache:
        """A cache of `rows` rows holding no position."""
        nothing = tf.zeros([rows, heads, 0, head_dim], dtype)
        return cls(tuple((nothing, nothing) for _ in range(layers)))

    def layer(self, index: int) -> tuple[tf.Tensor, tf.Tensor]:
        """Layer `index`'s keys and values."""
        return self.layers[index]

    def step_slots(self, index: tf.Tensor, rows: tf.Tensor) -> AppendedSlots:
        """A step appends its position."""
        del index, rows
        return AppendedSlots()

    def written(self, keys_and_values: KeysAndValues) -> GrowingCache:
        """The cache one position longer."""
        return GrowingCache(tuple(keys_and_values))


class PrefixCache(NamedTuple):
    """Each row's own prefix of self-attention keys and values, for rows at different positions.

    Exact search steps prefixes of different lengths together, each from its parent's cached
    positions: row `r` holds its positions `0..index[r]-1` in its first slots, and the slots
    after them are never read. A step on it attends to them and to its own position and
    returns a `PrefixCache` of that position alone, `[rows, 1, heads, head_dim]` per tensor:
    the caller keeps positions itself (exact search's pool). Positions come before heads, as
    exact search gathers them from its pool of entries, so that no step transposes them.

    Attributes:
        layers: One `(keys, values)` pair per decoder layer, each
            `[rows, slots, heads, head_dim]`.
    """

    layers: KeysAndValues

    @classmethod
    def gathered(cls, entries: tf.Tensor | tf.Variable, slots: tf.Tensor) -> PrefixCache:
        """The prefixes of rows whose positions are the `entries` at `slots`.

        Each layer's keys and values are gathered on their own, so that every tensor comes out
        in the layout a step reads, without a transpose.

        Args:
            entries: `[capacity, layers, 2, heads, head_dim]` (a tensor or a variable, as exact
                search's pool): each entry is one position of one row of a `SlotCache`.
            slots: int32 `[rows, positions]`: row `r`'s position `p` is entry `slots[r, p]`.
        """
        # Indices (slot, 0, 0) of every position, made once; a layer's keys or values are at
        # the offset (0, layer, part) from them.
        at_slots = tf.pad(
            tf.convert_to_tensor(slots, tf.int32)[..., tf.newaxis], [[0, 0]] * 2 + [[0, 2]]
        )

        def part(layer: int, keys_or_values: int) -> tf.Tensor:
            return tf.gather_nd(entries, at_slots + tf.constant([0, layer, keys_or_values]))

        return cls(tuple((part(i, 0), part(i, 1)) for i in range(entries.shape[1])))

    def entries(self) -> tf.Tensor:
        """The entries `[rows, layers, 2, heads, head_dim]` of a step's own position."""
        keys_and_values = [tensor for layer in self.layers for tensor in layer]
        _, _, heads, head_dim = keys_and_values[0].shape
        entries = tf.concat(keys_and_values, axis=1)
        return tf.reshape(entries, [-1, len(self.layers), 2, heads, head_dim])

    def layer(self, index: int) -> tuple[tf.Tensor, tf.Tensor]:
        """Layer `index`'s prefixes of keys and values."""
        return self.layers[index]

    def step_slots(self, index: tf.Tensor, rows: tf.Tensor) -> PrefixSlots:
        """The slots before each row's position `index` (int32 `[rows]`)."""
        del rows
        return PrefixSlots.before(index, tf.shape(self.layers[0][0])[1])

    def written(self, keys_and_values: KeysAndValues) -> PrefixCache:
        """The step's own position alone."""
        return PrefixCache(tuple(keys_and_values))


__all__ = [
    "AppendedSlots",
    "GrowingCache",
    "PrefixCache",
    "PrefixSlots",
    "SelfAttentionSlots",
    "SlotCache",
]
