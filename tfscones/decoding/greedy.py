"""Greedy decoding: the argmax of the raw logits at every step, the same for every head."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import tensorflow as tf

from tfscones.decoding import common
from tfscones.decoding.registry import Decoder, NBest, decoder_arguments, register
from tfscones.models.stepping import Decodable


class GreedyOutput(NamedTuple):
    """What `greedy_decode` returns.

    Attributes:
        ids: int32 `[batch, max_output_length]`: each sentence's tokens, its EOS included (when
            it produced one before its length limit), then PAD (0). The width is static, the
            decoder's `max_output_length`, so the function compiles once under XLA.
        lengths: int32 `[batch]`, the number of tokens produced, EOS included.
        scores: float32 `[batch]`, the sum of `model.head.log_scores` of the produced tokens.
        token_log_scores: float32 `[batch, max_output_length]`, each produced token's
            `model.head.log_scores` (the terms of `scores`), then 0.
    """

    ids: tf.Tensor
    lengths: tf.Tensor
    scores: tf.Tensor
    token_log_scores: tf.Tensor


def greedy_decode(
    model: Decodable,
    source_ids: tf.Tensor,
    max_length: int | None = None,
    max_length_a: float = common.DEFAULT_MAX_LENGTH_A,
    max_length_b: float = common.DEFAULT_MAX_LENGTH_B,
    jit_compile: bool = False,
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
    shapes are fixed, so the function runs eagerly, in `tf.function` and under XLA (pass
    `jit_compile=True` then).

    Example:
    ```python
    model = Seq2SeqTransformer.from_preset("tiny", vocabulary_size=100, head="sigmoid")
    decode = tf.function(
        lambda source: greedy_decode(model, source, jit_compile=True), jit_compile=True
    )
    output = decode(tf.constant([[5, 6, 1, 0], [7, 1, 0, 0]]))
    output.ids  # [2, 128] int32; output.lengths, output.scores: [2]
    ```

    Args:
        model: A `Decodable` (`tfscones.models.stepping`): a model such as a
            `Seq2SeqTransformer`, or a `StepModel`.
        source_ids: int `[batch, source_length]`, each row ending with EOS, padded with 0.
        max_length: Most tokens any sentence may produce, EOS included: the static length of the
            decoding cache and the width of `ids`. Defaults to `model.max_sequence_length`.
        max_length_a: Output tokens allowed per source token (default 1.5).
        max_length_b: Output tokens allowed in addition (default 10).
        jit_compile: True when the caller compiles this with XLA (`tf.function(...,
            jit_compile=True)`): the search then uses a cache of fixed shape
            (`common.search_cache`). False (eagerly or in a plain `tf.function`) lets the
            cache grow with the output, which is faster.

    Returns:
        A `GreedyOutput` `(ids, lengths, scores, token_log_scores)`.
    """
    model = model.stepper()
    width = common.max_output_length(model, max_length)
    source = common.encode_source(model, source_ids, width, max_length_a, max_length_b)

    def choose(step, logits, log_scores):
        del step, log_scores
        return tf.argmax(logits, axis=-1, output_type=tf.int32)

    output = common.decode_token_by_token(
        model, source, width, choose, jit_compile, drop_stopped_rows=True
    )
    return GreedyOutput(**output._asdict())


@dataclasses.dataclass(frozen=True)
class GreedySettings:
    """Greedy search has no settings."""


def _greedy_nbest(stepper, source_ids, settings: GreedySettings, limits, jit_compile) -> NBest:
    arguments = decoder_arguments(settings, limits)
    output = greedy_decode(stepper, source_ids, **arguments, jit_compile=jit_compile)
    ids, lengths, scores, token_log_scores = (tensor[:, tf.newaxis] for tensor in output)
    return NBest(ids, lengths, scores, scores, token_log_scores)


GREEDY = register(
    Decoder("greedy", "the argmax of the logits at every step", GreedySettings, _greedy_nbest)
)
