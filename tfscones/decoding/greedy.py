"""Greedy decoding: the argmax of the raw logits at every step, the same for every head."""

from __future__ import annotations

from typing import Any, NamedTuple

import tensorflow as tf

from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID
from tfscones.decoding import common


class GreedyOutput(NamedTuple):
    """What `greedy_decode` returns.

    Attributes:
        ids: int32 `[batch, max_output_length]`: each sentence's tokens, its EOS included (when
            it produced one before its length limit), then PAD (0). The width is static, the
            decoder's `max_output_length`, so the function compiles once under XLA.
        lengths: int32 `[batch]`, the number of tokens produced, EOS included.
        scores: float32 `[batch]`, the sum of `model.head.log_scores` of the produced tokens.
    """

    ids: tf.Tensor
    lengths: tf.Tensor
    scores: tf.Tensor


def greedy_decode(
    model: Any,
    source_ids: tf.Tensor,
    max_length: int | None = None,
    max_length_a: float = common.DEFAULT_MAX_LENGTH_A,
    max_length_b: float = common.DEFAULT_MAX_LENGTH_B,
) -> GreedyOutput:
    """Translates a batch by taking the highest logit at each step, starting from BOS.

    The argmax of the raw logits is the argmax of the probabilities under any head (softmax,
    SCONES sigmoid, entmax: all are monotone in each logit), so no activation is computed to
    choose a token (SCONES paper, footnote 7). The head only scores the chosen tokens: `scores`
    adds up `model.head.log_scores`, which is finite for every head because the argmax token
    always has positive probability (for entmax, the largest logit is always in the support).

    The encoder and the decoder's keys and values over it are computed once. Each sentence stops
    after its EOS or at its length limit, `min(floor(max_length_a * source_length + max_length_b),
    max_length)` tokens, where `source_length` counts its non-pad source tokens; a sentence cut
    at its limit ends without EOS. The loop stops as soon as every sentence has stopped. All
    shapes are fixed, so the function runs eagerly, in `tf.function` and with `jit_compile=True`.

    Example:
    ```python
    model = Seq2SeqTransformer.from_preset("tiny", vocabulary_size=100, head="sigmoid")
    decode = tf.function(lambda source: greedy_decode(model, source), jit_compile=True)
    output = decode(tf.constant([[5, 6, 1, 0], [7, 1, 0, 0]]))
    output.ids  # [2, 128] int32; output.lengths, output.scores: [2]
    ```

    Args:
        model: A `Seq2SeqTransformer`, or any object with its decoding interface (see
            `tfscones.decoding.common`).
        source_ids: int `[batch, source_length]`, each row ending with EOS, padded with 0.
        max_length: Most tokens any sentence may produce, EOS included: the static length of the
            decoding cache and the width of `ids`. Defaults to `model.max_sequence_length`.
        max_length_a: Output tokens allowed per source token (default 1.5).
        max_length_b: Output tokens allowed in addition (default 10).

    Returns:
        A `GreedyOutput` `(ids, lengths, scores)`.
    """
    width = common.max_output_length(model, max_length)
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    source = common.encode_source(model, source_ids, width, max_length_a, max_length_b)
    batch_size = tf.shape(source_ids)[0]

    def keep_going(step, tokens, finished, *_):
        del tokens
        return tf.logical_and(step < width, tf.logical_not(tf.reduce_all(finished)))

    def body(step, tokens, finished, cache, ids, lengths, scores):
        logits, cache = common.decode_step(model, source, tokens, cache, step)
        chosen = tf.argmax(logits, axis=-1, output_type=tf.int32)
        chosen_scores = tf.gather(model.head.log_scores(logits), chosen, batch_dims=1)
        active = tf.logical_not(finished)
        chosen = tf.where(active, chosen, PAD_ID)
        ids = tf.tensor_scatter_nd_update(ids, [[step]], chosen[tf.newaxis])
        lengths += tf.cast(active, tf.int32)
        scores += tf.where(active, chosen_scores, 0.0)
        finished = finished | tf.equal(chosen, EOS_ID) | (step + 1 >= source.max_lengths)
        return step + 1, chosen, finished, cache, ids, lengths, scores

    _, _, _, _, ids, lengths, scores = tf.while_loop(
        keep_going,
        body,
        (
            tf.constant(0),
            tf.fill([batch_size], tf.constant(BOS_ID, tf.int32)),
            tf.zeros([batch_size], tf.bool),
            model.initial_cache(batch_size, width),
            tf.zeros([width, batch_size], tf.int32),
            tf.zeros([batch_size], tf.int32),
            tf.zeros([batch_size], tf.float32),
        ),
        maximum_iterations=width,
    )
    return GreedyOutput(ids=tf.transpose(ids), lengths=lengths, scores=scores)
