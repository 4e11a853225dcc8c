"""Beam search and diverse beam search, scored by the model's head.

Both are one search: `num_groups` groups of `group_size` beams each. A group is an ordinary beam
search whose candidates are ranked by their log-score minus `diversity_strength` times the number
of beams of earlier groups that chose the same token at this step (the Hamming diversity of
Vijayakumar et al. 2018, "Diverse Beam Search", eq. 4 and Algorithm 1). Plain beam search is one
group with no diversity term.

Scores come from `model.head.log_scores`: log-softmax for softmax, log σ for SCONES (so a
hypothesis's score is Σ log σ(z_y), the log-probability that every token is correct), log entmax
for entmax, whose zero-probability tokens score -inf and never enter a beam. The search never asks
which head it has.

Hypotheses are kept in two sets per group, as in Tensor2Tensor and TF Model Garden:
- alive: the `group_size` best unfinished prefixes, extended at every step;
- finished: the best hypotheses that ended with EOS, or that reached their sentence's length
  limit (`common.output_length_limits`, as greedy search; such a hypothesis ends without EOS),
  ranked by `log_score / lp(length)` with the GNMT length penalty
  `lp(length) = ((5 + length) / 6) ** length_penalty` (Wu et al. 2016, eq. 14; `length` counts
  the output tokens, EOS included; `length_penalty=0` turns it off, as in the SCONES paper).

Each step draws the `2 * group_size` best extensions of a group's alive beams, so that even if
`group_size` of them end with EOS there are `group_size` left to stay alive. As in fairseq, an
ending extension joins the finished set only if it is among the `group_size` best, the ones a beam
of that size would keep; so a beam of one is greedy search.

Early stopping is exact. Every head's per-token log-score is at most 0, so a prefix's log-score
only falls as it grows, and its best possible final ranking score is
`log_score / lp(max_length_of_its_sentence)`. A group is done when its finished set is full and
its worst finished score is at least that bound for its best alive beam; the loop stops when every
group of every sentence is done. Running on to the length limit (`padded=True`, which always runs
`max_output_length` steps so that the loop has a fixed trip count) gives the same output.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import tensorflow as tf

from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID
from tfscones.decoding import common
from tfscones.decoding.registry import (
    Decoder,
    NBest,
    check_settings,
    decoder_arguments,
    register,
    setting,
    settings_count,
)
from tfscones.models.stepping import Decodable, StepModel
from tfscones.ranges import DIVERSITY_STRENGTH, LENGTH_PENALTY, SEARCH_COUNT, Range

NEG_INF = float("-inf")


class BeamOutput(NamedTuple):
    """What `beam_search` and `diverse_beam_search` return, best hypothesis first.

    Attributes:
        ids: int32 `[batch, num_hypotheses, max_output_length]`: each hypothesis's tokens, its EOS
            included (unless it was cut at its length limit), then PAD (0).
        lengths: int32 `[batch, num_hypotheses]`, tokens in each hypothesis, EOS included; 0 for
            an empty slot (a sentence with fewer possible hypotheses than asked for, which only
            a sparse entmax head can cause).
        scores: float32 `[batch, num_hypotheses]`, the ranking score `log_scores / lp(lengths)`
            (equal to `log_scores` when `length_penalty` is 0); -inf for an empty slot.
        log_scores: float32 `[batch, num_hypotheses]`, the sum of `model.head.log_scores` of the
            hypothesis's tokens.
        token_log_scores: float32 `[batch, num_hypotheses, max_output_length]`, each token's
            `model.head.log_scores` (the terms of `log_scores`), then 0.
    """

    ids: tf.Tensor
    lengths: tf.Tensor
    scores: tf.Tensor
    log_scores: tf.Tensor
    token_log_scores: tf.Tensor


class _SearchSettings(NamedTuple):
    num_groups: int
    group_size: int
    finished_per_group: int
    diversity_strength: float
    length_penalty: float
    width: int
    padded: bool


class _Hypotheses(NamedTuple):
    """A set of hypotheses per sentence and group: `[batch, num_groups, size, ...]`."""

    ids: tf.Tensor
    log_scores: tf.Tensor
    scores: tf.Tensor
    lengths: tf.Tensor
    token_log_scores: tf.Tensor


def length_penalty_factor(lengths: tf.Tensor, length_penalty: float) -> tf.Tensor:
    """GNMT's `lp(length) = ((5 + length) / 6) ** length_penalty` (Wu et al. 2016, eq. 14).

    Args:
        lengths: Output lengths (any shape), EOS included.
        length_penalty: The exponent α; 0 gives 1 for every length.

    Returns:
        float32 tensor of the shape of `lengths`.
    """
    return tf.pow((5.0 + tf.cast(lengths, tf.float32)) / 6.0, length_penalty)


def beam_search(
    model: Decodable,
    source_ids: tf.Tensor,
    beam_size: int = 4,
    num_hypotheses: int = 1,
    length_penalty: float = 0.0,
    max_length: int | None = None,
    max_length_a: float = common.DEFAULT_MAX_LENGTH_A,
    max_length_b: float = common.DEFAULT_MAX_LENGTH_B,
    padded: bool = False,
    jit_compile: bool = False,
) -> BeamOutput:
    """Translates a batch with beam search; returns the `num_hypotheses` best, best first.

    See the module docstring for the alive and finished sets, the scores, the length limits and
    the exact early stop. With `beam_size=1` this is greedy search. All shapes are static, so the
    search runs eagerly, in `tf.function` and with `jit_compile=True`.

    Example:
    ```python
    model = Seq2SeqTransformer.from_preset("tiny", vocabulary_size=100, head="sigmoid")
    search = tf.function(lambda source: beam_search(model, source, beam_size=4, num_hypotheses=2,
                                                    jit_compile=True), jit_compile=True)
    output = search(tf.constant([[5, 6, 1, 0], [7, 1, 0, 0]]))
    output.ids  # [2, 2, 256] int32; output.scores: [2, 2], the best of each sentence first
    ```

    Args:
        model: A `Decodable` (`tfscones.models.stepping`): a model such as a
            `Seq2SeqTransformer`, or a `StepModel`.
        source_ids: int `[batch, source_length]`, each row ending with EOS, padded with 0.
        beam_size: Alive hypotheses kept per sentence (`tfscones.ranges.SEARCH_COUNT`).
        num_hypotheses: Finished hypotheses returned per sentence, between 1 and `beam_size`.
        length_penalty: GNMT length-penalty exponent α in [0, 5] (0, the default, turns it
            off; `tfscones.ranges.LENGTH_PENALTY` says why at most 5).
        max_length: Most tokens a hypothesis may have, EOS included: the static width of the
            cache and of `ids`. Defaults to `model.max_sequence_length`.
        max_length_a: Output tokens allowed per source token (default 1.5).
        max_length_b: Output tokens allowed in addition (default 10).
        padded: Run exactly `max_length` steps (a fixed trip count) instead of stopping early;
            the output is the same.
        jit_compile: True when the caller compiles this with XLA (`tf.function(...,
            jit_compile=True)`): the search then uses a cache of fixed shape
            (`common.search_cache`).

    Returns:
        A `BeamOutput`.

    Raises:
        ValueError: If `beam_size`, `num_hypotheses` or `length_penalty` is out of range.
    """
    BeamSettings(beam_size, num_hypotheses, length_penalty)  # Refuses what Search refuses.
    return diverse_beam_search(
        model,
        source_ids,
        beam_size=beam_size,
        num_groups=1,
        diversity_strength=0.0,
        hypotheses_per_group=num_hypotheses,
        length_penalty=length_penalty,
        max_length=max_length,
        max_length_a=max_length_a,
        max_length_b=max_length_b,
        padded=padded,
        jit_compile=jit_compile,
    )


def diverse_beam_search(
    model: Decodable,
    source_ids: tf.Tensor,
    beam_size: int = 4,
    num_groups: int = 2,
    diversity_strength: float = 0.5,
    hypotheses_per_group: int = 1,
    length_penalty: float = 0.0,
    max_length: int | None = None,
    max_length_a: float = common.DEFAULT_MAX_LENGTH_A,
    max_length_b: float = common.DEFAULT_MAX_LENGTH_B,
    padded: bool = False,
    jit_compile: bool = False,
) -> BeamOutput:
    """Diverse beam search (Vijayakumar et al. 2018) with Hamming diversity; n-best across groups.

    The `beam_size` beams are split into `num_groups` groups of `beam_size // num_groups`. At each
    step the groups choose in turn; group `g` ranks its candidates by log-score minus
    `diversity_strength` times the number of beams of groups `0..g-1` that chose the same token at
    this step. The penalty only steers the choice: hypotheses keep and report their model
    log-scores, and finished ones are ranked by `log_scores / lp(length)`. Each group contributes
    its `hypotheses_per_group` best finished hypotheses; the output holds all of them,
    `num_groups * hypotheses_per_group` per sentence, sorted best first. With one group (or a
    strength of 0 and one group) it is `beam_search`.

    Args:
        model: The model (see `beam_search`).
        source_ids: int `[batch, source_length]`, each row ending with EOS, padded with 0.
        beam_size: Beams per sentence over all groups; a multiple of `num_groups`.
        num_groups: Number of groups G ≥ 1.
        diversity_strength: λ in [0, 1000], the penalty per earlier beam that chose the same
            token (`tfscones.ranges.DIVERSITY_STRENGTH`).
        hypotheses_per_group: Finished hypotheses each group returns, at most its size.
        length_penalty: As in `beam_search`.
        max_length: As in `beam_search`.
        max_length_a: As in `beam_search`.
        max_length_b: As in `beam_search`.
        padded: As in `beam_search`.
        jit_compile: As in `beam_search`.

    Returns:
        A `BeamOutput` with `num_groups * hypotheses_per_group` hypotheses per sentence.

    Raises:
        ValueError: If an argument is out of range or `beam_size` is not a multiple of
            `num_groups`.
    """
    SEARCH_COUNT.check("beam_size", beam_size)
    SEARCH_COUNT.check("num_groups", num_groups)
    DIVERSITY_STRENGTH.check("diversity_strength", diversity_strength)
    SEARCH_COUNT.check("hypotheses_per_group", hypotheses_per_group)
    LENGTH_PENALTY.check("length_penalty", length_penalty)
    group_size = _checked_group_size(beam_size, num_groups, hypotheses_per_group)
    model = model.stepper()
    settings = _SearchSettings(
        num_groups=int(num_groups),
        group_size=group_size,
        finished_per_group=int(hypotheses_per_group),
        diversity_strength=float(diversity_strength),
        length_penalty=float(length_penalty),
        width=common.max_output_length(model, max_length),
        padded=bool(padded),
    )
    return _search(model, source_ids, settings, max_length_a, max_length_b, jit_compile)


def _checked_group_size(beam_size: int, num_groups: int, hypotheses_per_group: int) -> int:
    """Beams per group, after refusing groups that do not split the beam or hold too few.

    The counts are each of their range already (`SEARCH_COUNT`); this checks them together.
    """
    _check_at_most("num_groups", num_groups, beam_size)
    if beam_size % num_groups:
        raise ValueError(
            f"beam_size ({beam_size}) must be a multiple of num_groups ({num_groups})."
        )
    group_size = beam_size // num_groups
    _check_at_most("hypotheses_per_group", hypotheses_per_group, group_size)
    return group_size


def _check_at_most(name: str, count: int, most: int) -> None:
    """Refuses a count of `SEARCH_COUNT` above `most`, naming the range [1, most]."""
    Range(1, most, integer=True).check(name, count)


def _search(
    model: StepModel,
    source_ids,
    settings: _SearchSettings,
    max_length_a,
    max_length_b,
    jit_compile: bool,
):
    """The search shared by `beam_search` and `diverse_beam_search`.

    Outside XLA, for a model whose cache grows and whose beams share their sentence's encoder
    tensors (it `shares_sources`), a sentence whose groups are all done leaves the batch
    (`_search_sentences_going`), unless the search is `padded` or the batch one sentence;
    otherwise every sentence is stepped until the last is done (`_search_every_sentence`).
    Both find the same hypotheses: a sentence's search never reads another's.
    """
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    source = common.encode_source(model, source_ids, settings.width, max_length_a, max_length_b)

    def every_sentence():
        return _search_every_sentence(model, source, settings, jit_compile)

    if (
        settings.padded
        or not common.cache_grows(model, jit_compile)
        or not model.capabilities.shares_sources
    ):
        return _best_first(every_sentence(), settings)
    finished = tf.cond(
        tf.shape(source_ids)[0] > 1,
        lambda: _search_sentences_going(model, source, settings),
        every_sentence,
    )
    return _best_first(finished, settings)


def _search_every_sentence(
    model, source: common.EncodedSource, settings: _SearchSettings, jit_compile: bool
) -> _Hypotheses:
    """The search loop over every sentence of the batch; returns the finished sets."""
    beams = settings.num_groups * settings.group_size
    batch_size = tf.shape(source.max_lengths)[0]
    step_source, rows_per_source = common.repeat_for_rows(model, source, beams)
    max_lengths = source.max_lengths[:, tf.newaxis]
    score_bound_divisor = length_penalty_factor(max_lengths, settings.length_penalty)
    weights = model.step_weights()

    def keep_going(step, alive, alive_tokens, finished, cache):
        del alive_tokens, cache
        if settings.padded:
            return step < settings.width
        done = _groups_done(alive, finished, score_bound_divisor)
        return tf.logical_and(step < settings.width, tf.logical_not(tf.reduce_all(done)))

    def body(step, alive, alive_tokens, finished, cache):
        logits, cache = common.decode_step(
            model,
            step_source,
            tf.reshape(alive_tokens, [-1]),
            cache,
            step,
            weights,
            rows_per_source,
        )
        alive, origins, finished = _extend(
            step, alive, _log_scores(model, logits, settings), finished, max_lengths, settings
        )
        # A fixed cache keeps its static shape (XLA's loop needs it).
        cache = tf.nest.map_structure(
            lambda new, old: tf.ensure_shape(new, old.shape), _reorder(cache, origins), cache
        )
        return step + 1, alive, tf.gather(alive.ids, step, axis=3), finished, cache

    cache = common.search_cache(model, batch_size * beams, settings.width, jit_compile)
    loop_variables = (
        tf.constant(0),
        _initial_alive(batch_size, settings),
        tf.fill([batch_size, settings.num_groups, settings.group_size], BOS_ID),
        _empty_hypotheses(batch_size, settings, settings.finished_per_group),
        cache.cache,
    )
    _, _, _, finished, _ = tf.while_loop(
        keep_going,
        body,
        loop_variables,
        shape_invariants=common.loop_shape_invariants(loop_variables, cache),
        maximum_iterations=settings.width,
    )
    return finished


def _search_sentences_going(
    model, source: common.EncodedSource, settings: _SearchSettings
) -> _Hypotheses:
    """The search loop where a sentence leaves the batch once its groups are all done.

    The loop holds the sentences still going (`going`, their indices in the batch), their
    source, beams, finished sets and cache; after each step it writes their finished sets to
    `output` and gathers what the sentences that go on need. Needs a growing cache and a model
    that `shares_sources` (the source has one row per sentence).
    """
    beams = settings.num_groups * settings.group_size
    batch_size = tf.shape(source.max_lengths)[0]
    weights = model.step_weights()

    def keep_going(step, going, *_):
        return tf.logical_and(step < settings.width, tf.size(going) > 0)

    def body(step, going, source, alive, alive_tokens, finished, cache, output):
        logits, cache = common.decode_step(
            model, source, tf.reshape(alive_tokens, [-1]), cache, step, weights, beams
        )
        max_lengths = source.max_lengths[:, tf.newaxis]
        alive, origins, finished = _extend(
            step, alive, _log_scores(model, logits, settings), finished, max_lengths, settings
        )
        output = tf.nest.map_structure(
            lambda t, new: tf.tensor_scatter_nd_update(t, going[:, tf.newaxis], new),
            output,
            finished,
        )
        divisor = length_penalty_factor(max_lengths, settings.length_penalty)
        done = tf.reduce_all(_groups_done(alive, finished, divisor), axis=1)
        kept = tf.cast(tf.reshape(tf.where(tf.logical_not(done)), [-1]), tf.int32)
        going, source, alive, finished, origins = tf.nest.map_structure(
            lambda t: tf.gather(t, kept), (going, source, alive, finished, origins)
        )
        cache = _reorder(cache, origins, kept)
        return (
            step + 1,
            going,
            source,
            alive,
            tf.gather(alive.ids, step, axis=3),
            finished,
            cache,
            output,
        )

    cache = common.search_cache(model, batch_size * beams, settings.width)
    empty = _empty_hypotheses(batch_size, settings, settings.finished_per_group)
    loop_variables = (
        tf.constant(0),
        tf.range(batch_size),
        source,
        _initial_alive(batch_size, settings),
        tf.fill([batch_size, settings.num_groups, settings.group_size], BOS_ID),
        empty,
        cache.cache,
        empty,
    )
    # The sentences going (indices, source, beams, finished sets, cache) shrink in number.
    invariants = common.shrinking_shape_invariants(
        common.loop_shape_invariants(loop_variables, cache), slice(1, 7)
    )
    *_, output = tf.while_loop(
        keep_going,
        body,
        loop_variables,
        shape_invariants=invariants,
        maximum_iterations=settings.width,
    )
    return output


def _log_scores(model, logits, settings: _SearchSettings) -> tf.Tensor:
    """The head's log-scores of the next token, `[sentences, groups, group_size, vocabulary]`.

    The vocabulary's size stays static (the batch's is not), so that `common.top_k` knows the
    candidates' row length and takes its blockwise path on large vocabularies.
    """
    log_scores = model.head.log_scores(logits)
    vocabulary_size = log_scores.shape[-1] or -1
    return tf.reshape(log_scores, [-1, settings.num_groups, settings.group_size, vocabulary_size])


def _reorder(cache, origins: tf.Tensor, sentences: tf.Tensor | None = None):
    """The cache rows of the new alive beams, whose `origins` index their sentence's beams.

    Args:
        cache: The step's cache, each sentence's beams consecutive rows.
        origins: int32 `[kept, groups, group_size]`, from `_extend`, of the sentences kept.
        sentences: int32 `[kept]`, the kept sentences' indices in the step; None for all of
            them, in order.
    """
    if sentences is None:
        sentences = tf.range(tf.shape(origins)[0])
    beams = origins.shape[1] * origins.shape[2]
    rows = tf.reshape(origins + sentences[:, tf.newaxis, tf.newaxis] * beams, [-1])
    with tf.name_scope("reorder_cache"):
        return tf.nest.map_structure(lambda t: tf.gather(t, rows), cache)


def _empty_hypotheses(batch_size, settings: _SearchSettings, size: int) -> _Hypotheses:
    shape = [batch_size, settings.num_groups, size]
    return _Hypotheses(
        ids=tf.zeros(shape + [settings.width], tf.int32),
        log_scores=tf.fill(shape, NEG_INF),
        scores=tf.fill(shape, NEG_INF),
        lengths=tf.zeros(shape, tf.int32),
        token_log_scores=tf.zeros(shape + [settings.width], tf.float32),
    )


def _initial_alive(batch_size, settings: _SearchSettings) -> _Hypotheses:
    """One live beam per group (log-score 0) and dead copies (-inf), so step 0 is not repeated.

    For alive beams, `scores` holds the search objective: the log-score plus the diversity
    penalties the beam has collected (equal to the log-score in plain beam search).
    """
    hypotheses = _empty_hypotheses(batch_size, settings, settings.group_size)
    first = tf.one_hot(0, settings.group_size, on_value=0.0, off_value=NEG_INF)
    start = tf.broadcast_to(first, tf.shape(hypotheses.log_scores))
    return hypotheses._replace(log_scores=start, scores=start)


def _extend(step, alive, log_scores, finished, max_lengths, settings: _SearchSettings):
    """One step for every group in turn: new alive beams, their origins, new finished sets.

    Args:
        step: The position being predicted (0 for the first output token).
        alive: The alive `_Hypotheses`, `[batch, groups, group_size, ...]`.
        log_scores: float32 `[batch, groups, group_size, vocabulary]` of the next token.
        finished: The finished `_Hypotheses`.
        max_lengths: int32 `[batch, 1]`, each sentence's length limit.
        settings: The search settings.

    Returns:
        `(alive, origins, finished)`: origins are int32 `[batch, groups, group_size]`, the index
        (over all of the sentence's beams) of the beam each new alive beam extends.
    """
    token_counts = tf.zeros_like(log_scores[:, 0, 0])
    last_step = step + 1 >= max_lengths
    new_alive, origins, new_finished = [], [], []
    # The first group, and every group without diversity, has no penalty: skipping its
    # full-vocabulary terms (zeros) changes no value. Counts are only needed by later groups.
    diverse = settings.diversity_strength > 0
    for group in range(settings.num_groups):
        group_alive = tf.nest.map_structure(lambda t, g=group: t[:, g], alive)
        group_finished = tf.nest.map_structure(lambda t, g=group: t[:, g], finished)
        penalty = None
        if diverse and group > 0:
            penalty = settings.diversity_strength * token_counts[:, tf.newaxis, :]
        candidates = _top_candidates(step, group_alive, log_scores[:, group], penalty, settings)
        ending = tf.logical_or(tf.equal(candidates.tokens, EOS_ID), last_step)
        group_alive, group_origins = _next_alive(candidates, ending, settings.group_size)
        new_alive.append(group_alive)
        origins.append(group_origins + group * settings.group_size)
        new_finished.append(_next_finished(step, candidates, ending, group_finished, settings))
        if diverse and group + 1 < settings.num_groups:
            token_counts += _chosen_token_counts(candidates, settings.group_size, token_counts)
    stack = lambda *groups: tf.stack(groups, axis=1)  # noqa: E731
    return (
        tf.nest.map_structure(stack, *new_alive),
        tf.stack(origins, axis=1),
        tf.nest.map_structure(stack, *new_finished),
    )


def _chosen_token_counts(candidates, group_size: int, like: tf.Tensor) -> tf.Tensor:
    """How often each token is among a group's `group_size` best candidates: `[batch, vocab]`.

    These are the tokens the group's beams take at this step, EOS included (as in fairseq's
    diverse beam search), which later groups are penalised for repeating.
    """
    chosen = candidates.tokens[:, :group_size]
    possible = tf.math.is_finite(candidates.log_scores[:, :group_size])
    one_hot = tf.one_hot(chosen, tf.shape(like)[-1], dtype=like.dtype)
    return tf.reduce_sum(one_hot * tf.cast(possible, like.dtype)[..., tf.newaxis], axis=1)


class _Candidates(NamedTuple):
    """The `2 * group_size` best extensions of a group's alive beams, `[batch, 2 * group_size]`."""

    ids: tf.Tensor
    tokens: tf.Tensor
    origins: tf.Tensor
    log_scores: tf.Tensor
    objectives: tf.Tensor
    token_log_scores: tf.Tensor


def _top_candidates(step, alive, log_scores, penalty, settings: _SearchSettings) -> _Candidates:
    """Ranks every (beam, token) extension by objective; keeps the `2 * group_size` best.

    `penalty` is None for no diversity penalty. Without diversity (`diversity_strength` 0) a
    beam's objective is its log-score, so the candidates' log-scores are their objectives.
    """
    vocabulary_size = tf.shape(log_scores)[-1]
    objectives = alive.scores[..., tf.newaxis] + log_scores
    if penalty is not None:
        objectives = objectives - penalty
    batch_size = tf.shape(log_scores)[0]
    static_size = log_scores.shape[-1]
    row_length = -1 if static_size is None else settings.group_size * static_size
    objectives = tf.reshape(objectives, [batch_size, row_length])
    objectives, flat_indices = common.top_k(objectives, k=2 * settings.group_size)
    if settings.diversity_strength > 0:
        candidate_log_scores = alive.log_scores[..., tf.newaxis] + log_scores
        candidate_log_scores = tf.gather(
            tf.reshape(candidate_log_scores, [batch_size, -1]), flat_indices, batch_dims=1
        )
    else:
        candidate_log_scores = objectives
    origins = flat_indices // vocabulary_size
    tokens = flat_indices % vocabulary_size
    at_step = tf.range(settings.width) == step
    ids = tf.gather(alive.ids, origins, batch_dims=1)
    ids = tf.where(at_step, tokens[..., tf.newaxis], ids)
    flat_log_scores = tf.reshape(log_scores, [batch_size, row_length])
    token_log_score = tf.gather(flat_log_scores, flat_indices, batch_dims=1)
    token_log_scores = tf.gather(alive.token_log_scores, origins, batch_dims=1)
    token_log_scores = tf.where(at_step, token_log_score[..., tf.newaxis], token_log_scores)
    return _Candidates(
        ids=ids,
        tokens=tokens,
        origins=origins,
        log_scores=candidate_log_scores,
        objectives=objectives,
        token_log_scores=token_log_scores,
    )


def _next_alive(candidates: _Candidates, ending, group_size: int):
    """The `group_size` best candidates that do not end here (dead ones score -inf)."""
    objectives = tf.where(ending, NEG_INF, candidates.objectives)
    objectives, chosen = tf.math.top_k(objectives, k=group_size)
    log_scores = tf.gather(candidates.log_scores, chosen, batch_dims=1)
    log_scores = tf.where(tf.math.is_finite(objectives), log_scores, NEG_INF)
    alive = _Hypotheses(
        ids=tf.gather(candidates.ids, chosen, batch_dims=1),
        log_scores=log_scores,
        scores=objectives,
        lengths=tf.zeros_like(chosen),
        token_log_scores=tf.gather(candidates.token_log_scores, chosen, batch_dims=1),
    )
    return alive, tf.gather(candidates.origins, chosen, batch_dims=1)


def _next_finished(step, candidates: _Candidates, ending, finished, settings: _SearchSettings):
    """Merges the candidates that end here into the finished set; keeps the best."""
    lengths = tf.fill(tf.shape(candidates.tokens), step + 1)
    # Candidates come best first; only the group's `group_size` best may finish (as in fairseq),
    # so that an ending which beam search would not have kept alive is not kept finished either.
    in_beam = tf.range(tf.shape(candidates.tokens)[1]) < settings.group_size
    valid = ending & in_beam & tf.math.is_finite(candidates.log_scores)
    scores = candidates.log_scores / length_penalty_factor(lengths, settings.length_penalty)
    new = _Hypotheses(
        ids=tf.where(valid[..., tf.newaxis], candidates.ids, PAD_ID),
        log_scores=tf.where(valid, candidates.log_scores, NEG_INF),
        scores=tf.where(valid, scores, NEG_INF),
        lengths=tf.where(valid, lengths, 0),
        token_log_scores=tf.where(valid[..., tf.newaxis], candidates.token_log_scores, 0.0),
    )
    # Existing hypotheses come first, so that top_k keeps them on ties.
    merged = tf.nest.map_structure(lambda a, b: tf.concat([a, b], axis=1), finished, new)
    _, best = tf.math.top_k(merged.scores, k=settings.finished_per_group)
    return tf.nest.map_structure(lambda t: tf.gather(t, best, batch_dims=1), merged)


def _groups_done(alive: _Hypotheses, finished: _Hypotheses, score_bound_divisor) -> tf.Tensor:
    """Whether no alive beam of a group can still enter its full finished set: `[batch, groups]`.

    `score_bound_divisor` is `lp(max_length)` per sentence, `[batch, 1]`.
    """
    best_alive = tf.reduce_max(alive.log_scores, axis=2)
    bound = best_alive / score_bound_divisor
    worst_finished = tf.reduce_min(finished.scores, axis=2)
    full = tf.reduce_all(tf.math.is_finite(finished.scores), axis=2)
    no_alive = tf.logical_not(tf.math.is_finite(best_alive))
    return tf.logical_or(no_alive, tf.logical_and(full, worst_finished >= bound))


def _best_first(finished: _Hypotheses, settings: _SearchSettings) -> BeamOutput:
    """Pools every group's finished hypotheses per sentence and sorts them by score."""
    count = settings.num_groups * settings.finished_per_group
    batch_size = tf.shape(finished.scores)[0]
    pooled = tf.nest.map_structure(
        lambda t: tf.reshape(t, tf.concat([[batch_size, count], tf.shape(t)[3:]], axis=0)),
        finished,
    )
    _, order = tf.math.top_k(pooled.scores, k=count)
    pooled = tf.nest.map_structure(lambda t: tf.gather(t, order, batch_dims=1), pooled)
    return BeamOutput(
        ids=pooled.ids,
        lengths=pooled.lengths,
        scores=pooled.scores,
        log_scores=pooled.log_scores,
        token_log_scores=pooled.token_log_scores,
    )


BEAM_SIZE = setting(4, "--beam", "beams per sentence", SEARCH_COUNT)
NUM_HYPOTHESES = setting(1, None, "hypotheses returned per sentence, best first", SEARCH_COUNT)
LENGTH_PENALTY_EXPONENT = setting(
    0.0, "--length-penalty", "GNMT length-penalty exponent (0: off)", LENGTH_PENALTY
)


@dataclasses.dataclass(frozen=True)
class BeamSettings:
    """The settings of `beam_search` (see there); checked when made."""

    beam_size: int = BEAM_SIZE
    num_hypotheses: int = NUM_HYPOTHESES
    length_penalty: float = LENGTH_PENALTY_EXPONENT

    def __post_init__(self):
        check_settings(self)
        _check_at_most("num_hypotheses", self.num_hypotheses, self.beam_size)


@dataclasses.dataclass(frozen=True)
class DiverseBeamSettings:
    """The settings of `diverse_beam_search` (see there); checked when made.

    `num_hypotheses` are the best across the groups, each group contributing at most
    `ceil(num_hypotheses / num_groups)`.
    """

    beam_size: int = BEAM_SIZE
    num_hypotheses: int = NUM_HYPOTHESES
    length_penalty: float = LENGTH_PENALTY_EXPONENT
    num_groups: int = setting(2, "--groups", "groups the beams are split into", SEARCH_COUNT)
    diversity_strength: float = setting(
        0.5,
        "--diversity-strength",
        "penalty per earlier group's beam that chose the same token",
        DIVERSITY_STRENGTH,
    )

    def __post_init__(self):
        check_settings(self)
        _checked_group_size(self.beam_size, self.num_groups, self.hypotheses_per_group)

    @property
    def hypotheses_per_group(self) -> int:
        """Finished hypotheses each group contributes."""
        return math.ceil(self.num_hypotheses / self.num_groups)


def _beam_nbest(stepper, source_ids, settings: BeamSettings, limits, jit_compile) -> NBest:
    arguments = decoder_arguments(settings, limits)
    return NBest(*beam_search(stepper, source_ids, **arguments, jit_compile=jit_compile))


def _diverse_beam_nbest(stepper, source_ids, settings: DiverseBeamSettings, limits, jit_compile):
    arguments = decoder_arguments(settings, limits)
    count = arguments.pop("num_hypotheses")
    arguments["hypotheses_per_group"] = settings.hypotheses_per_group
    output = diverse_beam_search(stepper, source_ids, **arguments, jit_compile=jit_compile)
    return NBest(*(tensor[:, :count] for tensor in output))


def _beams(settings: BeamSettings | DiverseBeamSettings, stepper: Decodable) -> int:
    return settings.beam_size


BEAM = register(
    Decoder(
        "beam",
        "beam search, ranked by the head's log-scores over the length penalty",
        BeamSettings,
        _beam_nbest,
        hypotheses=settings_count,
        rows_per_sentence=_beams,
    )
)
DIVERSE_BEAM = register(
    Decoder(
        "diverse_beam",
        "diverse beam search (Vijayakumar et al. 2018): groups penalised for repeating tokens",
        DiverseBeamSettings,
        _diverse_beam_nbest,
        hypotheses=settings_count,
        rows_per_sentence=_beams,
    )
)
