"""Bucketing by sequence length and batching by a budget of tokens, padding with PAD_ID.

A bucket of length L holds sequences of at most L tokens and batches `tokens_per_batch // L` of
them, so no padded tensor of a batch has more than `tokens_per_batch` entries. With
`static_shapes=True` every batch is padded to its bucket's length, so XLA and TPUs see one shape
a bucket instead of one a batch.
"""

import itertools
import math
from collections.abc import Sequence

import tensorflow as tf

from tfscones.data.vocab_ids import PAD_ID


def default_bucket_lengths(
    max_sequence_length: int,
    *,
    min_bucket_length: int = 8,
    step: float = 1.1,
    multiple: int = 8,
) -> list[int]:
    """Bucket lengths growing geometrically, rounded up to a multiple (tensor2tensor-style).

    Args:
        max_sequence_length: Longest sequence the buckets must hold.
        min_bucket_length: Length of the first bucket before rounding.
        step: Growth factor from one bucket to the next (> 1).
        multiple: Every length is a multiple of this (8 suits GPU and TPU tiles).

    Returns:
        Strictly increasing lengths; the last is `max_sequence_length` rounded up to `multiple`.

    Raises:
        ValueError: If an argument is out of range.
    """
    if max_sequence_length < 1 or min_bucket_length < 1 or multiple < 1 or step <= 1:
        raise ValueError(
            "Need max_sequence_length, min_bucket_length, multiple >= 1 and step > 1, got "
            f"{max_sequence_length}, {min_bucket_length}, {multiple}, {step}"
        )
    top = _round_up(max_sequence_length, multiple)
    lengths: list[int] = []
    length = float(min_bucket_length)
    while not lengths or lengths[-1] < top:
        rounded = min(_round_up(math.ceil(length), multiple), top)
        if not lengths or rounded > lengths[-1]:
            lengths.append(rounded)
        length *= step
    return lengths


def batch_by_tokens(
    dataset: tf.data.Dataset,
    *,
    tokens_per_batch: int,
    bucket_lengths: Sequence[int],
    static_shapes: bool = False,
    drop_remainder: bool = False,
) -> tf.data.Dataset:
    """Groups variable-length examples into padded batches of similar length.

    An example's length is the longest first dimension among its tensors, which are all padded
    with PAD_ID (0).

    Args:
        dataset: Examples: any structure of tensors whose first dimension is a sequence
            (e.g. `({"source_ids": s, "target_in_ids": t_in}, t_out)`).
        tokens_per_batch: Budget: batch size times padded length of each tensor stays within it.
        bucket_lengths: Strictly increasing bucket lengths; the last bounds every example.
        static_shapes: Pad every batch to its bucket's length instead of its longest example.
        drop_remainder: Drop each bucket's last incomplete batch, so batch sizes are fixed.

    Returns:
        The batched dataset, with a leading batch dimension on every tensor.

    Raises:
        ValueError: If `bucket_lengths` is not strictly increasing and positive, or
            `tokens_per_batch` is smaller than the largest bucket length.
        tf.errors.InvalidArgumentError: At iteration, if an example is longer than the largest
            bucket length.
    """
    lengths = list(bucket_lengths)
    if not lengths or lengths[0] < 1 or any(a >= b for a, b in itertools.pairwise(lengths)):
        raise ValueError(f"bucket_lengths must increase strictly from >= 1, got {lengths}")
    if tokens_per_batch < lengths[-1]:
        raise ValueError(
            f"tokens_per_batch={tokens_per_batch} cannot hold one sequence of the largest "
            f"bucket length {lengths[-1]}"
        )
    longest = lengths[-1]

    def example_length(*components: tf.Tensor) -> tf.Tensor:
        length = tf.reduce_max([tf.shape(t)[0] for t in tf.nest.flatten(components)])
        check = tf.debugging.assert_less_equal(
            length, longest, message=f"Example longer than the largest bucket length {longest}"
        )
        with tf.control_dependencies([check]):
            return tf.identity(length)

    # A bucket holds lengths below its boundary; the extra last bucket stays empty.
    return dataset.bucket_by_sequence_length(
        example_length,
        bucket_boundaries=[length + 1 for length in lengths],
        bucket_batch_sizes=[tokens_per_batch // length for length in lengths] + [1],
        padding_values=PAD_ID,
        pad_to_bucket_boundary=static_shapes,
        drop_remainder=drop_remainder,
    )


def _round_up(value: int, multiple: int) -> int:
    """Smallest multiple of `multiple` that is >= `value`."""
    return -(-value // multiple) * multiple
