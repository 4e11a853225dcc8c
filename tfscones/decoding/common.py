"""What every decoder does before its search: encode once, cache the encoder, bound the lengths.

A decoder takes a `Decodable` (a model, or a stepper) and steps the
`tfscones.models.stepping.StepModel` that its `stepper()` returns: `encode(source_ids) ->
(encoder_outputs, source_padding_mask)`, `cross_attention_cache(...)`, a cache,
`decode_step(...) -> (logits, cache)`, `head` and `max_sequence_length`, and what its
`capabilities` declare. `encode_source` runs the parts that do not depend on the target and
returns them as an `EncodedSource`, a tuple of tensors with the batch first, so a beam or
sampling decoder can tile or reorder it with `tf.nest.map_structure`.

Length rule (fairseq's `--max-len-a/--max-len-b`): sentence `i` may produce at most
`min(floor(a * source_length_i + b), max_output_length)` tokens, its EOS included, where
`source_length_i` counts its non-pad source tokens (the source's EOS included) and
`max_output_length` is the length of the decoding cache, a Python int so that shapes are static.
The defaults a = 1.5, b = 10 leave room for a target half as long again as its source, plus a
few tokens for very short sources (a one-word source still gets 10 or more tokens). fairseq's own
defaults (a = 0, b = 200) are a fixed cap, which lets a model that fails to emit EOS run to 200
tokens on every short sentence; a rule proportional to the source stops such runs early.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf

try:  # private, so only for an early error message; without it XLA's own error remains
    from tensorflow.python.ops.control_flow_util import GraphOrParentsInXlaContext
except ImportError:  # pragma: no cover - a TensorFlow that moved it
    GraphOrParentsInXlaContext = None

from tfscones.data.preprocessing import padding_mask
from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID
from tfscones.models.stepping import SourceGroups, StepModel
from tfscones.ranges import AT_LEAST_ONE, NON_NEGATIVE

DEFAULT_MAX_LENGTH_A = 1.5
DEFAULT_MAX_LENGTH_B = 10


@dataclasses.dataclass(frozen=True)
class OutputLimits:
    """How long an output may be: the one length-limit value of searches and exports.

    Sentence `i` may produce at most `min(floor(max_length_a * source_length_i + max_length_b),
    max_length)` tokens, its EOS included (the module docstring explains the rule).

    Attributes:
        max_length: Most output tokens, EOS included: the static length of the decoding cache
            (None: the model's `max_sequence_length`).
        max_length_a: Output tokens allowed per source token.
        max_length_b: Output tokens allowed in addition.
    """

    max_length: int | None = None
    max_length_a: float = DEFAULT_MAX_LENGTH_A
    max_length_b: float = DEFAULT_MAX_LENGTH_B

    def __post_init__(self):
        if self.max_length is not None:
            AT_LEAST_ONE.check("max_length", self.max_length)
        NON_NEGATIVE.check("max_length_a", self.max_length_a)
        NON_NEGATIVE.check("max_length_b", self.max_length_b)

    def arguments(self) -> dict[str, Any]:
        """The limits as the keyword arguments of the decoding functions."""
        return dataclasses.asdict(self)


class EncodedSource(NamedTuple):
    """The source side of a batch, computed once and used by every decoding step.

    Attributes:
        encoder_outputs: `[batch, source_length, hidden_dim]` from `model.encode`.
        source_padding_mask: bool `[batch, source_length]`, True at real tokens.
        cross_attention_cache: The decoder's keys and values over the encoder,
            `model.cross_attention_cache(encoder_outputs)`: any nest of tensors, rows first.
        max_lengths: int32 `[batch]`, the most tokens each sentence may produce (EOS included),
            between 1 and the decoder's `max_output_length`.
    """

    encoder_outputs: tf.Tensor
    source_padding_mask: tf.Tensor
    cross_attention_cache: Any
    max_lengths: tf.Tensor


def max_output_length(model: StepModel, max_length: int | None = None) -> int:
    """The static number of target positions a decoder allocates (the cache's length).

    Args:
        model: The model; its `max_sequence_length` is the default.
        max_length: An explicit length, which may exceed the model's `max_sequence_length`.

    Returns:
        A positive Python int.

    Raises:
        ValueError: If the length is not positive.
    """
    if max_length is None:
        return int(model.max_sequence_length)
    return AT_LEAST_ONE.check("max_length", max_length)


def output_length_limits(
    source_ids: tf.Tensor,
    max_length_a: float,
    max_length_b: float,
    max_output_length: int,
) -> tf.Tensor:
    """Per-sentence output lengths, `clip(floor(a * source_length + b), 1, max_output_length)`.

    Args:
        source_ids: int `[batch, source_length]`, padded with 0.
        max_length_a: Tokens allowed per source token.
        max_length_b: Tokens allowed in addition.
        max_output_length: The cap, the length of the decoding cache.

    Returns:
        int32 `[batch]`.
    """
    source_lengths = tf.reduce_sum(tf.cast(padding_mask(source_ids), tf.float32), axis=1)
    limits = tf.floor(max_length_a * source_lengths + max_length_b)
    limits = tf.clip_by_value(limits, 1.0, float(max_output_length))
    return tf.cast(limits, tf.int32)


def encode_source(
    model: StepModel,
    source_ids: tf.Tensor,
    max_output_length: int,
    max_length_a: float = DEFAULT_MAX_LENGTH_A,
    max_length_b: float = DEFAULT_MAX_LENGTH_B,
) -> EncodedSource:
    """Runs the encoder and the cross-attention projections once, and bounds each output length.

    Args:
        model: The model (see the module docstring for the interface it needs).
        source_ids: int `[batch, source_length]`, each row ending with EOS, padded with 0.
        max_output_length: The cap on output lengths (from `max_output_length`).
        max_length_a: Output tokens allowed per source token.
        max_length_b: Output tokens allowed in addition.

    Returns:
        The `EncodedSource`.

    Raises:
        ValueError: If `max_length_a` or `max_length_b` is negative or not finite.
    """
    NON_NEGATIVE.check("max_length_a", max_length_a)
    NON_NEGATIVE.check("max_length_b", max_length_b)
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    encoder_outputs, source_padding_mask = model.encode(source_ids)
    return EncodedSource(
        encoder_outputs=encoder_outputs,
        source_padding_mask=source_padding_mask,
        cross_attention_cache=model.cross_attention_cache(encoder_outputs),
        max_lengths=output_length_limits(source_ids, max_length_a, max_length_b, max_output_length),
    )


def repeat_for_rows(
    model: StepModel, source: EncodedSource, rows_per_source: int
) -> tuple[EncodedSource, int]:
    """The source a search steps with when it decodes `rows_per_source` rows per sentence.

    A model that `shares_sources` (its `StepCapabilities`) gets `source` as it is, one row per
    sentence, and reads each sentence's encoder tensors once for all of
    its rows (beam search's beams); any other model gets every row of `source` repeated
    `rows_per_source` times, one per decoded row.

    Args:
        model: The model.
        source: From `encode_source`, one row per sentence.
        rows_per_source: Rows decoded per sentence, consecutive (sentence `i`'s are rows
            `i * rows_per_source ...`).

    Returns:
        `(source, rows_per_source)` for `decode_step`: the rows per source row of that source
        (1 when it was repeated).
    """
    if rows_per_source == 1 or model.capabilities.shares_sources:
        return source, rows_per_source
    return tf.nest.map_structure(lambda t: tf.repeat(t, rows_per_source, axis=0), source), 1


def decode_step(
    model: StepModel,
    source: EncodedSource,
    token_ids: tf.Tensor,
    cache: Any,
    index: tf.Tensor | int,
    weights: Any,
    rows_per_source: int | SourceGroups = 1,
) -> tuple[tf.Tensor, Any]:
    """One step of `model.decode_step` with the encoder's tensors of `source`.

    Args:
        model: The model.
        source: From `encode_source` (tiled or reordered like `token_ids` if need be), or one
            row per `rows_per_source` rows of `token_ids` (from `repeat_for_rows`).
        token_ids: int32 `[batch]`, the target tokens at position `index` (BOS at 0).
        cache: The self-attention cache holding positions `0..index-1`.
        index: The position of `token_ids`.
        weights: `model.step_weights()`, made before the loop.
        rows_per_source: Consecutive rows of `token_ids` per row of `source`, from
            `repeat_for_rows`, or a `SourceGroups`; other than 1 only for a model that
            `shares_sources`.

    Returns:
        `(logits, cache)`: float32 logits `[batch, vocabulary_size]` of the token at position
        `index + 1` and the updated cache.
    """
    return model.decode_step(
        token_ids,
        source.encoder_outputs,
        source.source_padding_mask,
        cache,
        index,
        cross_attention_cache=source.cross_attention_cache,
        step_weights=weights,
        rows_per_source=rows_per_source,
    )


TOP_K_BLOCK = 64


def top_k(values: tf.Tensor, k: int) -> tuple[tf.Tensor, tf.Tensor]:
    """`tf.math.top_k(values, k)` of `[rows, n]` (the same values and indices, ties included).

    Beam search draws a few candidates from every beam's whole vocabulary, a row of
    `beams * vocabulary` scores per sentence, where `tf.math.top_k` compares every entry. Here the
    row is cut into blocks of `TOP_K_BLOCK` entries: the `k` best entries lie in the `k` blocks
    with the best maxima (ties to the lower block), so one vectorised maximum per block, a top-k of
    the block maxima and a top-k within the `k` blocks chosen give the same answer, in the same
    order (on ties the lower index first, as `tf.math.top_k`). Rows shorter than
    `8 * k * TOP_K_BLOCK` entries use `tf.math.top_k` itself.

    Args:
        values: float `[rows, n]`, `n` static.
        k: How many entries to keep, at most `n`.

    Returns:
        `(values, indices)`, each `[rows, k]`, best first.
    """
    length = values.shape[-1]
    if length is None or length < 8 * k * TOP_K_BLOCK:
        return tf.math.top_k(values, k=k)
    blocks = -(-length // TOP_K_BLOCK)
    padded = tf.pad(
        values,
        [[0, 0], [0, blocks * TOP_K_BLOCK - length]],
        constant_values=float("-inf"),
    )
    padded = tf.reshape(padded, [-1, blocks, TOP_K_BLOCK])
    _, best_blocks = tf.math.top_k(tf.reduce_max(padded, axis=2), k=k)
    best_blocks = tf.sort(best_blocks, axis=1)
    candidates = tf.reshape(tf.gather(padded, best_blocks, batch_dims=1), [-1, k * TOP_K_BLOCK])
    top_values, positions = tf.math.top_k(candidates, k=k)
    block_of = tf.gather(best_blocks, positions // TOP_K_BLOCK, batch_dims=1)
    return top_values, block_of * TOP_K_BLOCK + positions % TOP_K_BLOCK


class SearchCache(NamedTuple):
    """The self-attention cache a search starts from, and the shapes it keeps in the loop.

    Attributes:
        cache: `model.growing_cache(rows)` or `model.initial_cache(rows, width)`: a nest of
            tensors.
        shape_invariant: The `tf.while_loop` shape invariant of `cache` (a nest like it):
            its static shape, or for a growing cache, its rank with every dimension unknown.
    """

    cache: Any
    shape_invariant: Any


def search_cache(
    model: StepModel, rows: tf.Tensor | int, width: int, jit_compile: bool = False
) -> SearchCache:
    """The cache of a search over `rows` sequences of at most `width` positions.

    A model that `grows_cache` (its `StepCapabilities`) gets a `growing_cache` unless the search is
    compiled with XLA: a step then attends to, and beam search reorders, only the positions decoded
    so far, not all `width` of them. Under XLA, where shapes must not change, and for a model
    without it, the cache is `model.initial_cache(rows, width)`. The caller says whether it compiles
    with XLA: every decoder takes `jit_compile` and passes it down (`compiled_search` passes its
    own). A caller that compiles with XLA but says False would trace a loop whose cache grows, which
    XLA rejects only when it compiles ("Input and output shapes of loop body do not match"); that is
    caught here, before the loop is traced, with an error that names the fix.

    Args:
        model: The model.
        rows: Number of sequences decoded together.
        width: The most positions a sequence may have.
        jit_compile: Whether the search is traced for XLA (`tf.function(jit_compile=True)`).

    Returns:
        A `SearchCache`.

    Raises:
        ValueError: If `jit_compile` is False but the graph being traced is compiled with XLA
            (a `tf.function(jit_compile=True)` or a function called inside one).
    """
    if cache_grows(model, jit_compile):
        _check_not_in_xla()
        cache = model.growing_cache(rows)
        return SearchCache(
            cache, tf.nest.map_structure(lambda t: tf.TensorShape([None] * t.shape.rank), cache)
        )
    cache = model.initial_cache(rows, width)
    return SearchCache(cache, tf.nest.map_structure(lambda t: t.shape, cache))


def cache_grows(model: StepModel, jit_compile: bool) -> bool:
    """Whether a search gets `model.growing_cache` (see `search_cache`): its shapes may change."""
    return model.capabilities.grows_cache and not jit_compile


def _check_not_in_xla() -> None:
    """Raises the error that names the fix when an XLA-compiled search asked for a growing cache."""
    if GraphOrParentsInXlaContext is None:
        return
    if GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()):
        raise ValueError(
            "This search is being traced for XLA (tf.function(jit_compile=True)) but was called "
            "with jit_compile=False, so its cache would grow at every step, which XLA cannot "
            "compile. Pass jit_compile=True to the decoder too (greedy_decode, beam_search, "
            "diverse_beam_search, sample_decode, Search.decode, decode_experts...), as in "
            "tf.function(lambda s: greedy_decode(model, s, jit_compile=True), jit_compile=True)."
        )


def loop_shape_invariants(loop_variables: tuple, cache: SearchCache) -> tuple:
    """Shape invariants of a search loop's variables: each its static shape, but the cache's.

    Args:
        loop_variables: The loop's initial values, `cache.cache` among them.
        cache: The `SearchCache` whose `cache` is one of `loop_variables`.

    Returns:
        A tuple like `loop_variables`, for `tf.while_loop(shape_invariants=...)`.
    """
    return tuple(
        cache.shape_invariant
        if value is cache.cache
        else tf.nest.map_structure(lambda t: tf.convert_to_tensor(t).shape, value)
        for value in loop_variables
    )


def shrinking_shape_invariants(invariants: tuple, shrinking: slice) -> tuple:
    """`invariants` with an unknown first axis for the loop variables at `shrinking`.

    A loop that drops its finished rows (or sentences) carries their tensors with fewer rows
    from step to step; its other variables keep their shapes.

    Args:
        invariants: From `loop_shape_invariants`, one per loop variable.
        shrinking: The positions of the loop variables whose rows shrink.

    Returns:
        The invariants, each of those with its first axis unknown.
    """
    invariants = list(invariants)
    invariants[shrinking] = tf.nest.map_structure(
        lambda shape: tf.TensorShape([None]).concatenate(shape[1:]), invariants[shrinking]
    )
    return tuple(invariants)


class TokenByTokenOutput(NamedTuple):
    """Sequences grown one chosen token at a time, one row per decoded sequence.

    Attributes:
        ids: int32 `[rows, width]`: the tokens, EOS included (when produced before the row's
            length limit), then PAD (0).
        lengths: int32 `[rows]`, tokens produced, EOS included.
        scores: float32 `[rows]`, the sum of `model.head.log_scores` of the produced tokens.
        token_log_scores: float32 `[rows, width]`, each produced token's `model.head.log_scores`
            (the terms of `scores`), then 0.
    """

    ids: tf.Tensor
    lengths: tf.Tensor
    scores: tf.Tensor
    token_log_scores: tf.Tensor


def decode_token_by_token(
    model: StepModel,
    source: EncodedSource,
    width: int,
    choose: Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.Tensor],
    jit_compile: bool = False,
    drop_stopped_rows: bool = False,
) -> TokenByTokenOutput:
    """Extends every row by one chosen token per step, from BOS, until EOS or its length limit.

    The loop of greedy search and sampling: they differ only in `choose`. A row stops after its
    EOS or when it reaches `source.max_lengths` (then without EOS); the loop stops as soon as
    every row has stopped. Shapes are static, so it runs eagerly, in `tf.function` and under XLA.

    With `drop_stopped_rows`, where the cache grows (outside XLA, for a model that
    `grows_cache`: the loop's shapes may change), a row that stops leaves the batch: later
    steps decode only the rows still going, so a batch's short sentences cost no work while its
    longest one finishes (`_decode_rows_still_going`; a batch of one row takes the loop over
    every row, which saves it the gathers).

    Args:
        model: The model.
        source: From `encode_source`, one row per decoded sequence (tiled if need be).
        width: The static number of positions (`max_output_length`).
        choose: `choose(step, logits, log_scores) -> int32 [rows]`, the next token of every
            row from the step's float32 logits and `model.head.log_scores` of them.
        jit_compile: Whether the caller compiles this with XLA (see `search_cache`).
        drop_stopped_rows: Whether to decode only the rows still going; `choose` must then
            choose each row's token from that row's scores alone (greedy search's argmax, not
            sampling, whose noise is drawn for the whole batch), and the model decode each
            row from its own token, cache and source alone, as a real model does. Ignored
            where the cache is fixed.

    Returns:
        A `TokenByTokenOutput`.
    """
    if not (drop_stopped_rows and cache_grows(model, jit_compile)):
        return _decode_every_row(model, source, width, choose, jit_compile)
    # One row has none to drop: the loop over every row spares it the gathers, a few percent of
    # a step at batch 1.
    return tf.cond(
        tf.shape(source.max_lengths)[0] > 1,
        lambda: _decode_rows_still_going(model, source, width, choose),
        lambda: _decode_every_row(model, source, width, choose, jit_compile),
    )


def _step_and_choose(model, source, tokens, cache, step, weights, choose) -> tuple:
    """One decoder step of every row and the token `choose` takes for it.

    Returns:
        `(chosen, chosen_scores, cache)`: int32 `[rows]`, their float32 log scores, the cache.
    """
    logits, cache = decode_step(model, source, tokens, cache, step, weights)
    log_scores = model.head.log_scores(logits)
    chosen = choose(step, logits, log_scores)
    return chosen, tf.gather(log_scores, chosen, batch_dims=1), cache


def _decode_every_row(
    model: StepModel,
    source: EncodedSource,
    width: int,
    choose: Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.Tensor],
    jit_compile: bool,
) -> TokenByTokenOutput:
    """`decode_token_by_token`, each step decoding every row, stopped ones too (fixed shapes)."""
    rows = tf.shape(source.max_lengths)[0]
    weights = model.step_weights()

    def keep_going(step, tokens, finished, *_):
        del tokens
        return tf.logical_and(step < width, tf.logical_not(tf.reduce_all(finished)))

    def body(step, tokens, finished, cache, ids, lengths, token_log_scores):
        chosen, chosen_scores, cache = _step_and_choose(
            model, source, tokens, cache, step, weights, choose
        )
        active = tf.logical_not(finished)
        chosen = tf.where(active, chosen, PAD_ID)
        chosen_scores = tf.where(active, chosen_scores, 0.0)
        ids = tf.tensor_scatter_nd_update(ids, [[step]], chosen[tf.newaxis])
        token_log_scores = tf.tensor_scatter_nd_update(
            token_log_scores, [[step]], chosen_scores[tf.newaxis]
        )
        lengths += tf.cast(active, tf.int32)
        finished = finished | tf.equal(chosen, EOS_ID) | (step + 1 >= source.max_lengths)
        return step + 1, chosen, finished, cache, ids, lengths, token_log_scores

    cache = search_cache(model, rows, width, jit_compile)
    loop_variables = (
        tf.constant(0),
        tf.fill([rows], tf.constant(BOS_ID, tf.int32)),
        tf.zeros([rows], tf.bool),
        cache.cache,
        tf.zeros([width, rows], tf.int32),
        tf.zeros([rows], tf.int32),
        tf.zeros([width, rows], tf.float32),
    )
    _, _, _, _, ids, lengths, token_log_scores = tf.while_loop(
        keep_going,
        body,
        loop_variables,
        shape_invariants=loop_shape_invariants(loop_variables, cache),
        maximum_iterations=width,
    )
    return _token_by_token_output(tf.transpose(ids), lengths, tf.transpose(token_log_scores))


def _token_by_token_output(ids, lengths, token_log_scores) -> TokenByTokenOutput:
    """The output, its `scores` the sum of `token_log_scores` (in position order)."""
    return TokenByTokenOutput(
        ids=ids,
        lengths=lengths,
        scores=tf.reduce_sum(token_log_scores, axis=1),
        token_log_scores=token_log_scores,
    )


def _decode_rows_still_going(
    model: StepModel,
    source: EncodedSource,
    width: int,
    choose: Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.Tensor],
) -> TokenByTokenOutput:
    """`decode_token_by_token`, each step decoding only the rows that have not stopped.

    The loop keeps the still-going rows' tokens, source and cache, and `going`, their rows in
    the output; after each step it gathers those of the rows that go on. Every row's tokens,
    scores and length are those of the loop over every row: each row's step reads only that
    row's tokens, cache and source.
    """
    rows = tf.shape(source.max_lengths)[0]
    weights = model.step_weights()

    def keep_going(step, going, *_):
        return tf.logical_and(step < width, tf.size(going) > 0)

    def body(step, going, tokens, source, cache, ids, lengths, token_log_scores):
        chosen, chosen_scores, cache = _step_and_choose(
            model, source, tokens, cache, step, weights, choose
        )
        positions = tf.stack([going, tf.fill(tf.shape(going), step)], axis=1)
        ids = tf.tensor_scatter_nd_update(ids, positions, chosen)
        token_log_scores = tf.tensor_scatter_nd_update(token_log_scores, positions, chosen_scores)
        lengths = tf.tensor_scatter_nd_add(lengths, going[:, tf.newaxis], tf.ones_like(chosen))
        goes_on = tf.logical_and(tf.not_equal(chosen, EOS_ID), step + 1 < source.max_lengths)
        kept = tf.reshape(tf.where(goes_on), [-1])
        going, tokens, source, cache = tf.nest.map_structure(
            lambda t: tf.gather(t, kept), (going, chosen, source, cache)
        )
        return step + 1, going, tokens, source, cache, ids, lengths, token_log_scores

    cache = search_cache(model, rows, width)
    loop_variables = (
        tf.constant(0),
        tf.range(rows),
        tf.fill([rows], tf.constant(BOS_ID, tf.int32)),
        source,
        cache.cache,
        tf.zeros([rows, width], tf.int32),
        tf.zeros([rows], tf.int32),
        tf.zeros([rows, width], tf.float32),
    )
    # The rows still going (their indices, tokens, source and cache) shrink in number.
    invariants = shrinking_shape_invariants(
        loop_shape_invariants(loop_variables, cache), slice(1, 5)
    )
    _, _, _, _, _, ids, lengths, token_log_scores = tf.while_loop(
        keep_going, body, loop_variables, shape_invariants=invariants, maximum_iterations=width
    )
    return _token_by_token_output(ids, lengths, token_log_scores)


def has_text(source_ids: tf.Tensor) -> tf.Tensor:
    """Whether each source `[batch]` has a piece before its end (its first EOS or PAD).

    A source without one (an empty or whitespace-only line, or all padding) is empty, and its
    translation is the empty one, with score 0, on every path: `Search.decode`, the library's
    and the command's `translate`, and every SavedModel signature.
    """
    first = source_ids[:, :1]
    return tf.reduce_any(tf.not_equal(first, EOS_ID) & tf.not_equal(first, PAD_ID), axis=1)
