"""From sentence pairs to padded training batches that `keras.Model.fit` consumes.

pairs -> shuffle -> repeat -> SentencePiece ids (in graph) -> length filter -> decoder
inputs/targets -> bucket by length, batch by tokens, pad 0.
"""

from collections.abc import Sequence

import tensorflow as tf

from tfscones.data.batching import batch_by_tokens, default_bucket_lengths
from tfscones.data.length_filter import filter_by_length
from tfscones.data.preprocessing import append_eos, teacher_forcing_inputs
from tfscones.data.tokenizer import Tokenizer


def translation_dataset(
    pairs: tf.data.Dataset,
    tokenizer: Tokenizer,
    *,
    target_tokenizer: Tokenizer | None = None,
    tokens_per_batch: int = 4096,
    min_length: int = 1,
    max_length: int = 128,
    max_length_ratio: float | None = 3.0,
    bucket_lengths: Sequence[int] | None = None,
    shuffle_buffer_size: int = 0,
    repeat: bool = False,
    drop_remainder: bool = False,
    static_shapes: bool = False,
    seed: int | None = None,
) -> tf.data.Dataset:
    """Builds batches `({"source_ids": s, "target_in_ids": t_in}, t_out)` from string pairs.

    For a pair whose pieces are `x` and `y`: `source_ids` = x + [EOS] (what
    `tokenizer.tokenize(source, add_eos=True)` gives at inference), `target_in_ids` = [BOS] + y
    and `target_out_ids` = y + [EOS]; all int32, padded with 0. Within a batch `source_ids` is
    [B, S] and both target tensors are [B, T].

    Example:
    ```python
    corpus = read_parallel_text("train.de", "train.en")
    batches = translation_dataset(corpus.dataset(), Tokenizer.from_file("spm.model"),
                                  tokens_per_batch=8192, shuffle_buffer_size=100_000, seed=1)
    model.fit(batches, epochs=10)
    ```

    Args:
        pairs: Dataset of `(source, target)` scalar strings, e.g. from `read_parallel_text` or
            `load_tfds_pairs`.
        tokenizer: Tokenizer of the source side, and of the target side unless
            `target_tokenizer` is given (a joint vocabulary, as in SCONES).
        target_tokenizer: Separate target-side tokenizer.
        tokens_per_batch: Most entries (padding included) of any tensor of a batch.
        min_length: Fewest SentencePiece pieces a side may have (1 drops empty sentences).
        max_length: Most pieces a side may have. Sequences are one token longer (EOS or BOS).
        max_length_ratio: Largest ratio of the longer side's pieces to the shorter's; None for no
            limit.
        bucket_lengths: Strictly increasing padded lengths of the buckets; the last must be at
            least `max_length + 1`. Defaults to `default_bucket_lengths(max_length + 1)`.
        shuffle_buffer_size: Size of the buffer shuffling pairs before tokenisation; 0 keeps
            their order. Reshuffled each epoch.
        repeat: Repeat the pairs forever (give `steps_per_epoch` to `fit`).
        drop_remainder: Drop each bucket's incomplete last batch, for fixed batch sizes.
        static_shapes: Pad to the bucket length instead of the batch's longest sequence, so each
            bucket has one shape (TPU, XLA).
        seed: Shuffle seed; with a seed the batches are the same on every run.

    Returns:
        The batched dataset, prefetching.

    Raises:
        ValueError: If a length or batching setting is inconsistent.
    """
    if target_tokenizer is None:
        target_tokenizer = tokenizer
    if bucket_lengths is None:
        bucket_lengths = default_bucket_lengths(max_length + 1)
    if max(bucket_lengths, default=0) < max_length + 1:
        raise ValueError(
            f"bucket_lengths {list(bucket_lengths)} cannot hold max_length={max_length} pieces "
            "plus EOS/BOS"
        )
    pairs = shuffled_epochs(pairs, shuffle_buffer_size, seed, repeat)
    pieces = pairs.map(
        lambda source, target: (
            tokenizer.tokenize(source),
            target_tokenizer.tokenize_target(target),
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    pieces = filter_by_length(
        pieces, min_length=min_length, max_length=max_length, max_length_ratio=max_length_ratio
    )
    examples = pieces.map(model_example, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    batches = batch_by_tokens(
        examples,
        tokens_per_batch=tokens_per_batch,
        bucket_lengths=bucket_lengths,
        static_shapes=static_shapes,
        drop_remainder=drop_remainder,
    )
    return batches.prefetch(tf.data.AUTOTUNE)


SEED_STRIDE = 1_000_003
"""Data epoch e of a seeded, repeated pipeline is shuffled with seed `seed * SEED_STRIDE + e`."""


def shuffled_epochs(
    pairs: tf.data.Dataset, shuffle_buffer_size: int, seed: int | None, repeat: bool
) -> tf.data.Dataset:
    """The pairs shuffled (each pass over them anew) and, with `repeat`, repeated forever.

    With a seed and `repeat`, the order of each pass (data epoch) depends only on the seed and
    the pass's number, not on how many iterators the dataset has had: `skip(n)` of a new
    pipeline gives the batches an uninterrupted run drew after its n-th, which is how a killed
    run resumes on the same data (`tfscones.training.runner.fit`). A shuffle with
    `reshuffle_each_iteration` would draw another order for each new iterator.
    """
    if shuffle_buffer_size <= 0:
        return pairs.repeat() if repeat else pairs
    if seed is None or not repeat:
        shuffled = pairs.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
        return shuffled.repeat() if repeat else shuffled
    seed = tf.constant(seed, tf.int64)
    return tf.data.Dataset.counter().flat_map(
        lambda epoch: pairs.shuffle(
            shuffle_buffer_size, seed=seed * SEED_STRIDE + epoch, reshuffle_each_iteration=False
        )
    )


def model_example(
    source_pieces: tf.Tensor, target_pieces: tf.Tensor
) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
    """Turns one pair of piece ids into the model's inputs and the decoder's targets.

    Args:
        source_pieces: 1-D int32 source piece ids.
        target_pieces: 1-D int32 target piece ids.

    Returns:
        `({"source_ids": source + [EOS], "target_in_ids": [BOS] + target}, target + [EOS])`:
        the target input is the target output shifted right (`teacher_forcing_inputs`).
    """
    target_out = append_eos(target_pieces)
    features = {
        "source_ids": append_eos(source_pieces),
        "target_in_ids": teacher_forcing_inputs(target_out),
    }
    return features, target_out
