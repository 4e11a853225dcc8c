"""Exact search: the model's single best translation, or the best found within a state budget.

Stahlberg & Byrne (2019), as used in SCONES §4.3 (Stahlberg & Kumar 2022, Appendix A): depth-first
search over output prefixes, pruned with an admissible bound. Every head scores a token with a log
score that is at most 0 (log-softmax, log σ(z) = -softplus(-z), log entmax), so a prefix's score
only falls as it grows: a prefix that does not beat the best complete translation found so far
cannot grow into one that does, and is dropped. The search starts from the best beam-search
hypothesis as its lower bound, so it never returns anything worse than beam search, and it always
expands a prefix's best-scoring child first, so that good translations, and with them tight bounds,
are found early.

The search space is the one every decoder here searches (see `tfscones.decoding.common`): the token
sequences that end with EOS within the sentence's length limit, plus those that reach the limit
without EOS. A state is one expanded prefix, and it costs one cached decoder step: the prefix's last
token goes through the stepper's `decode_step` at its position, attending to its parent's cached
keys and values, which gives the scores of its children and its own keys and values at that
position. An expanded prefix whose children are still to be tried (a frame) keeps its cache in a
pool with one slot per position: a frame's cache is the list of its positions' slots, shared with
its descendants, so a frame costs one position of memory, and a slot is freed once no frame holds
it. Sentences search side by side, and up to `rows_per_call` states, of many frames and sentences
and so at different positions, take one batched step (`decode_step` with a position per row, on each
row's prefix where the stepper `caches_prefixes`); a sentence left with few others expands several
of its prefixes per step. A sentence stops, marked incomplete, when it has expanded `state_budget`
prefixes (the paper's 1M); its answer is then the best found so far, which is no longer guaranteed
optimal (the paper's Table 7 reports how often this happens).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import tensorflow as tf

from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID
from tfscones.decoding import common
from tfscones.decoding.common import OutputLimits
from tfscones.decoding.compiled import per_model_function
from tfscones.decoding.search import Search
from tfscones.decoding.translate import compiled_search, source_ids_for_model
from tfscones.models.stepping import Decodable, SourceGroups, StepCapabilities, StepModel
from tfscones.ranges import AT_LEAST_ONE

if TYPE_CHECKING:
    from tfscones.heads import OutputHead

DEFAULT_STATE_BUDGET = 1_000_000
DEFAULT_ROWS_PER_CALL = 512
CACHE_LENGTH_MULTIPLE = 8


@dataclasses.dataclass(frozen=True)
class ExactSearchResult:
    """The outcome of exact search for one sentence.

    Attributes:
        ids: The translation's tokens, its EOS included (absent only when the translation
            reached the sentence's length limit).
        score: The sum of the head's log scores of `ids`.
        states: Prefixes expanded (decoder-step rows) for this sentence.
        complete: True if the search proved `ids` optimal; False if it stopped at its state
            budget, when `ids` is the best found so far.
        initial_score: The score of the beam-search hypothesis the search started from.
        initial_ids: That hypothesis's tokens.
    """

    ids: tuple[int, ...]
    score: float
    states: int
    complete: bool
    initial_score: float
    initial_ids: tuple[int, ...]

    @property
    def improved(self) -> bool:
        """Whether exact search found a better translation than its initial beam search.

        Compared by tokens: exact search sums the beam hypothesis's log scores again in float64,
        so finding that same hypothesis can give a score a rounding step above the beam's own.
        """
        return self.ids != self.initial_ids


class _Frame:
    """An expanded prefix: its children that beat the bound, best first, a cursor, its cache.

    Attributes:
        prefix: The prefix's tokens (BOS excluded).
        slots: int32 `[len(prefix) + 1]`, the `_CachePool` slots of the keys and values of its
            positions, BOS first: the cache its children's decoder steps attend to.
        tokens: The children's last tokens, best first.
        scores: The children's scores, in the same order.
        next: The index of the next child to try.
    """

    __slots__ = ("prefix", "slots", "tokens", "scores", "next")

    def __init__(
        self, prefix: tuple[int, ...], slots: np.ndarray, tokens: np.ndarray, scores: np.ndarray
    ):
        self.prefix, self.slots, self.tokens, self.scores, self.next = (
            prefix,
            slots,
            tokens,
            scores,
            0,
        )

    def next_beats(self, bound: float) -> bool:
        return self.next < len(self.tokens) and self.scores[self.next] > bound


class _State(NamedTuple):
    """A prefix to expand: one row of a decoder step, from its parent frame's cache.

    The step feeds the prefix's last token (BOS for the empty prefix) at position
    `len(prefix)`, attending to the parent's `len(prefix)` cached positions.

    Attributes:
        score: The prefix's score.
        prefix: Its tokens (BOS excluded).
        parent_slots: The parent frame's `slots` (none for the empty prefix).
    """

    score: float
    prefix: tuple[int, ...]
    parent_slots: np.ndarray

    @property
    def token(self) -> int:
        return self.prefix[-1] if self.prefix else BOS_ID


class _CacheLayout(NamedTuple):
    """Where a `StepModel`'s self-attention cache keeps its positions, found from two caches.

    A cache here is one tensor (in any nest) with the rows first and one axis of positions
    (`StepModel.initial_cache`); an entry is one row at one position, the tensor's shape
    without those two axes.

    Attributes:
        position_axis: The axis of positions.
        entry_shape: The shape of one entry.
        dtype: The cache's dtype.
        structure: A cache of the model's, whose nest `cache` gives the caches it makes.
    """

    position_axis: int
    entry_shape: tuple[int, ...]
    dtype: tf.DType
    structure: Any

    @classmethod
    def of(cls, model: StepModel) -> _CacheLayout:
        """The layout of `model.initial_cache`: the one axis whose length is `max_length`."""
        structure = model.initial_cache(1, 1)
        tensors = tf.nest.flatten(structure)
        if len(tensors) != 1:
            raise ValueError(
                f"exact search pools caches of one tensor, or a stepper that caches_prefixes; "
                f"{type(model).__name__}.initial_cache has {len(tensors)} tensors."
            )
        shape = tensors[0].shape
        longer = tf.nest.flatten(model.initial_cache(1, 2))[0].shape
        axes = [axis for axis in range(shape.rank) if shape[axis] != longer[axis]]
        if len(axes) != 1 or axes[0] == 0:
            raise ValueError(f"a cache needs one axis of positions after the rows: {shape}.")
        (axis,) = axes
        entry_shape = tuple(shape[1:axis]) + tuple(shape[axis + 1 :])
        return cls(axis, entry_shape, tensors[0].dtype, structure)

    def zeros(self, count: int) -> tf.Tensor:
        return tf.zeros([count, *self.entry_shape], self.dtype)

    def cache(self, entries: tf.Tensor) -> Any:
        """A cache from `[rows, positions, *entry_shape]` entries (positions moved in place)."""
        axes = list(range(2, self.position_axis + 1)) + [1]
        rest = list(range(self.position_axis + 1, len(self.entry_shape) + 2))
        tensor = tf.transpose(entries, [0, *axes, *rest])
        return tf.nest.pack_sequence_as(self.structure, [tensor])

    def entries_at(self, cache: Any, positions: tf.Tensor) -> tf.Tensor:
        """Each row's entry at its position: `[rows, *entry_shape]`."""
        (tensor,) = tf.nest.flatten(cache)
        return tf.gather(tensor, positions, axis=self.position_axis, batch_dims=1)


class _CachePool:
    """The decoder's keys and values of expanded prefixes, one position per slot.

    A prefix's cache is the list of its positions' slots: a child adds one slot to its
    parent's list and shares the rest, so a frame costs one position of memory, not a whole
    cache. `entries` is a variable `[capacity, *entry_shape]`, where an entry is a cache row
    at one position (`_CacheLayout`). Frames hold their slots (a count per slot), and a slot
    returns to the free list when no frame holds it. Slot 0 is never handed out: its zeros
    pad every row's cache after the row's positions. The pool doubles when it runs out.

    Args:
        layout: The model's `_CacheLayout`.
        capacity: Slots to start with.
    """

    def __init__(self, layout: _CacheLayout, capacity: int):
        self._layout = layout
        self.entries = tf.Variable(layout.zeros(capacity), trainable=False)
        self._holders = np.zeros(capacity, np.int64)
        self._free = list(range(capacity - 1, 0, -1))

    def allocate(self, count: int) -> np.ndarray:
        """`count` free slots, for the states of one step; `hold` or `free` each afterwards."""
        if len(self._free) < count:
            self._grow(count)
        slots = np.array(self._free[-count:], np.int32)
        del self._free[-count:]
        return slots

    def hold(self, slots: np.ndarray) -> None:
        """Records one more frame whose cache is `slots`."""
        self._holders[slots] += 1

    def release(self, slots: np.ndarray) -> None:
        """Records that a frame whose cache is `slots` is gone; frees the slots none holds."""
        self._holders[slots] -= 1
        self._free.extend(slots[self._holders[slots] == 0].tolist())

    def free(self, slot: int) -> None:
        """Frees an allocated slot that no frame came to hold."""
        self._free.append(slot)

    def _grow(self, count: int) -> None:
        capacity = len(self._holders)
        added = max(capacity, count)
        self.entries = tf.Variable(
            tf.concat([self.entries, self._layout.zeros(added)], axis=0), trainable=False
        )
        self._holders = np.concatenate([self._holders, np.zeros(added, np.int64)])
        self._free.extend(range(capacity + added - 1, capacity - 1, -1))


class _SentenceSearch:
    """The depth-first search of one sentence: its stack of frames and its best translation.

    Each frame holds an expanded prefix's children sorted best first; the search always takes
    the next child of the top (deepest) frame, so it tries each prefix's best child first, and
    drops a frame as soon as its next child cannot beat the best translation (nor can the worse
    ones after it). Children are kept as arrays, not pushed one by one, which matters when a
    loose bound lets thousands of a prefix's children through. Frames hold their caches in the
    `_CachePool`; a frame dropped while its children were being popped lets go of its cache at
    the next `pop`, once those children have been expanded from it.
    """

    def __init__(
        self, limit: int, ids: tuple[int, ...], score: float, budget: int, pool: _CachePool
    ):
        self.limit = limit
        self.best_ids = ids
        self.best_score = score
        self.initial_score = score
        self.initial_ids = ids
        self.budget = budget
        self.states = 0
        self._pool = pool
        root = _Frame((), np.zeros([0], np.int32), np.array([-1]), np.array([0.0]))
        self._stack = [root] if 0.0 > score else []
        self._dropped: list[_Frame] = []

    @property
    def done(self) -> bool:
        return not self._stack or self.states >= self.budget

    def pop(self, count: int) -> list[_State]:
        """Up to `count` prefixes that can still beat the best, within the budget."""
        self._release_dropped()
        count = min(count, self.budget - self.states)
        popped = []
        while self._stack and len(popped) < count:
            frame = self._stack[-1]
            if not frame.next_beats(self.best_score):
                self._dropped.append(self._stack.pop())
                continue
            token, score = frame.tokens[frame.next], frame.scores[frame.next]
            frame.next += 1
            prefix = frame.prefix + ((int(token),) if token >= 0 else ())
            popped.append(_State(float(score), prefix, frame.slots))
        self.states += len(popped)
        return popped

    def expand(
        self, state: _State, candidates: np.ndarray, log_scores: np.ndarray, slot: int
    ) -> None:
        """Completes the state's children that beat the best, or pushes them as a frame.

        Args:
            state: The expanded prefix.
            candidates: Ascending ids of the tokens that may beat the best, EOS always among
                them (`candidate_entries`): every child that does is listed.
            log_scores: The head's log score of each candidate as the next token.
            slot: The pool slot of its last position's keys and values.
        """
        prefix = state.prefix
        is_eos = candidates == EOS_ID
        eos_score = state.score + float(log_scores[is_eos][0])
        if eos_score > self.best_score:
            self._improve(prefix + (EOS_ID,), eos_score)
        candidates = candidates[~is_eos]
        child_scores = state.score + log_scores[~is_eos].astype(np.float64)
        beating = child_scores > self.best_score
        candidates, child_scores = candidates[beating], child_scores[beating]
        if candidates.size == 0:
            self._pool.free(slot)
            return
        if len(prefix) + 1 == self.limit:
            best = np.argmax(child_scores)
            self._improve(prefix + (int(candidates[best]),), child_scores[best])
            self._pool.free(slot)
            return
        order = np.argsort(-child_scores, kind="stable")
        frame = _Frame(
            prefix, np.append(state.parent_slots, slot), candidates[order], child_scores[order]
        )
        self._pool.hold(frame.slots)
        self._stack.append(frame)

    def close(self) -> None:
        """Lets go of every frame's cache; the search is done (it still gives its `result`)."""
        self._release_dropped()
        for frame in self._stack:
            self._pool.release(frame.slots)

    def result(self) -> ExactSearchResult:
        return ExactSearchResult(
            ids=self.best_ids,
            score=float(self.best_score),
            states=self.states,
            complete=not any(frame.next_beats(self.best_score) for frame in self._stack),
            initial_score=float(self.initial_score),
            initial_ids=self.initial_ids,
        )

    def _improve(self, ids: tuple[int, ...], score: float) -> None:
        self.best_ids, self.best_score = ids, float(score)

    def _release_dropped(self) -> None:
        for frame in self._dropped:
            self._pool.release(frame.slots)
        self._dropped = []


def exact_search(
    model: Decodable,
    source_ids: tf.Tensor,
    state_budget: int = DEFAULT_STATE_BUDGET,
    beam_size: int = 4,
    rows_per_call: int = DEFAULT_ROWS_PER_CALL,
    max_length: int | None = None,
    max_length_a: float = common.DEFAULT_MAX_LENGTH_A,
    max_length_b: float = common.DEFAULT_MAX_LENGTH_B,
) -> list[ExactSearchResult]:
    """The highest-scoring translation of each source, by depth-first search (module docstring).

    Example:
    ```python
    results = exact_search(model, source_ids, state_budget=100_000)
    [r.score for r in results]  # >= beam search's, = the optimum where r.complete
    ```

    Args:
        model: A `Decodable` (`tfscones.models.stepping`): a model such as a
            `Seq2SeqTransformer`, or a `StepModel` (its `decode_step` takes one position per
            row on an `initial_cache`).
        source_ids: int `[batch, source_length]`, each row ending with EOS, padded with 0.
        state_budget: Most prefixes a sentence may expand before it stops (incomplete).
        beam_size: Beam of the search that gives the initial lower bound.
        rows_per_call: Most prefixes expanded in one decoder step.
        max_length: Most output tokens, EOS included (default: the model's
            `max_sequence_length`).
        max_length_a: Output tokens allowed per source token.
        max_length_b: Output tokens allowed in addition.

    Returns:
        One `ExactSearchResult` per source row, in order.

    Raises:
        ValueError: If `state_budget`, `beam_size` or `rows_per_call` is not positive.
    """
    AT_LEAST_ONE.check("state_budget", state_budget)
    AT_LEAST_ONE.check("beam_size", beam_size)
    AT_LEAST_ONE.check("rows_per_call", rows_per_call)
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    stepper = model.stepper()
    width = common.max_output_length(stepper, max_length)
    beam = Search("beam", OutputLimits(width, max_length_a, max_length_b), beam_size=beam_size)
    initial = compiled_search(model, beam)(source_ids)
    source = common.encode_source(stepper, source_ids, width, max_length_a, max_length_b)
    limits = source.max_lengths.numpy()
    pool = _CachePool(
        _CacheLayout.of(stepper), capacity=len(limits) * (int(limits.max()) + 1) + rows_per_call + 1
    )
    searches = [
        _SentenceSearch(
            limit=int(limit),
            ids=tuple(int(t) for t in ids[:length]),
            score=float(score),
            budget=state_budget,
            pool=pool,
        )
        for limit, ids, length, score in zip(
            limits,
            initial.ids[:, 0].numpy(),
            initial.lengths[:, 0].numpy(),
            initial.scores[:, 0].numpy(),
            strict=True,
        )
    ]
    step = functools.partial(
        _step_states, _cached_step(model), pool, source, stepper.step_weights()
    )
    _search_side_by_side(step, searches, rows_per_call)
    return [search.result() for search in searches]


def _search_side_by_side(step, searches: list[_SentenceSearch], rows_per_call: int) -> None:
    """Runs every sentence's search, expanding the prefixes of all of them in shared steps.

    Args:
        step: `step(requests, thresholds) -> (candidates, slots)` for a list of
            `(sentence, _State)` and their `candidate_thresholds`: each state's candidate next
            tokens and their log scores, and the pool slot of its last position.
        searches: The sentences' searches.
        rows_per_call: Most states per step.
    """
    active = [i for i, search in enumerate(searches) if not search.done]
    while active:
        per_sentence = max(1, rows_per_call // len(active))
        requests = [
            (i, state) for i in active[:rows_per_call] for state in searches[i].pop(per_sentence)
        ]
        if requests:
            bounds = np.array([searches[i].best_score - state.score for i, state in requests])
            candidates, slots = step(requests, candidate_thresholds(bounds))
            # In reverse, so that each sentence's best popped prefix ends on top of its stack.
            for row in reversed(range(len(requests))):
                i, state = requests[row]
                searches[i].expand(state, *candidates[row], int(slots[row]))
        for i in active:
            if searches[i].done:
                searches[i].close()
        active = [i for i in active if not searches[i].done]


def candidate_thresholds(bounds: np.ndarray) -> np.ndarray:
    """float32 thresholds a little below each row's bound, for `candidate_entries`.

    A child beats the best translation when `prefix score + log score > best`, summed in float64;
    `bounds` = best - prefix score. The thresholds keep a margin below each bound, so the tokens
    above them are a superset of those that beat it (`_SentenceSearch.expand` checks them
    exactly), whatever float32 rounding does to the comparison.

    Args:
        bounds: float64 `[rows]`.

    Returns:
        float32 `[rows]`.
    """
    margin = 1e-5 * (1.0 + np.abs(bounds))
    return (bounds - margin).astype(np.float32)


def candidate_entries(
    head: OutputHead, logits: tf.Tensor, thresholds: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The tokens of every row whose log score exceeds the row's threshold, and every row's EOS.

    Found in the step itself, so that only these few leave it, not the vocabulary's scores. A
    head that can tell which logits score above a threshold (`OutputHead.logit_thresholds`, the
    SCONES heads) is compared on the logits, and scores the candidates alone; any other scores
    the whole vocabulary (`log_scores`) first.

    Args:
        head: The model's `OutputHead`.
        logits: float32 `[rows, vocabulary]`.
        thresholds: float32 `[rows]`, from `candidate_thresholds`.

    Returns:
        `(rows, tokens, scores)`, one entry per candidate, ordered by row and then token id:
        int32 `[candidates]` twice and their float32 log scores.
    """
    is_eos = tf.equal(tf.range(tf.shape(logits)[1]), EOS_ID)[tf.newaxis, :]
    logit_thresholds = head.logit_thresholds(thresholds)
    if logit_thresholds is None:
        log_scores = head.log_scores(logits)
        kept = tf.where((log_scores > thresholds[:, tf.newaxis]) | is_eos)
        scores = tf.gather_nd(log_scores, kept)
    else:
        kept = tf.where((logits > logit_thresholds[:, tf.newaxis]) | is_eos)
        scores = head.log_scores(tf.gather_nd(logits, kept))
    entries = tf.cast(kept, tf.int32)
    return entries[:, 0], entries[:, 1], scores


def candidates_by_row(
    rows: np.ndarray, tokens: np.ndarray, scores: np.ndarray, row_count: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """`candidate_entries`'s output as one `(tokens, log scores)` pair per row (views)."""
    bounds = np.searchsorted(rows, np.arange(row_count + 1)).tolist()
    return [
        (tokens[start:end], scores[start:end])
        for start, end in zip(bounds[:-1], bounds[1:], strict=True)
    ]


def _step_states(
    step,
    pool: _CachePool,
    source: common.EncodedSource,
    weights: Any,
    requests: list,
    thresholds: np.ndarray,
) -> tuple:
    """One batched decoder step of `(sentence, _State)` requests, each from its parent's cache.

    Args:
        step: From `_cached_step`.
        pool: The cache pool; each state's new keys and values go to a slot allocated here.
        source: The sentences' encoder tensors, one row per sentence.
        weights: The stepper's `step_weights()`, made once per search.
        requests: The states, with the index of their sentence.
        thresholds: float32 `[len(requests)]`, from `candidate_thresholds`.

    Returns:
        `(candidates, slots)`: per state, its candidate next tokens and their log scores
        (`candidates_by_row`), and int32 `[len(requests)]`, the slot of each state's last
        position.
    """
    slots = pool.allocate(len(requests))
    positions = np.array([len(state.prefix) for _, state in requests], np.int32)
    width = CACHE_LENGTH_MULTIPLE * math.ceil((positions.max() + 1) / CACHE_LENGTH_MULTIPLE)
    parent_slots = np.zeros([len(requests), width], np.int32)
    for row, (_, state) in enumerate(requests):
        parent_slots[row, : len(state.parent_slots)] = state.parent_slots
    entries = step(
        pool.entries,
        source,
        weights,
        tf.constant([i for i, _ in requests], tf.int32),
        tf.constant(parent_slots),
        tf.constant(positions),
        tf.constant([state.token for _, state in requests], tf.int32),
        tf.constant(slots),
        tf.constant(thresholds),
    )
    rows, tokens, scores = (tensor.numpy() for tensor in entries)
    return candidates_by_row(rows, tokens, scores, len(requests)), slots


def _cached_step(model: Decodable):
    """The `tf.function` of one decoder step of states from their parents' cached positions.

    `step(entries, source, weights, sentences, parent_slots, positions, tokens, slots,
    thresholds)` gathers each row's cache from the pool's `entries` (`parent_slots`, padded
    with slot 0, holds at least `positions + 1` columns) and its sentence's encoder tensors
    from `source` (`_source_access`), steps `tokens` at `positions` with the search's step
    `weights`, writes each row's new entry to its slot in `entries`, and returns the
    `candidate_entries` of the head's log scores above `thresholds`. The kind of cache it
    steps on depends on the stepper's capabilities (`_cache_access`). Made once per model.
    """

    def build(model_ref):
        stepper = model_ref().stepper()
        cache_of, new_entries_of = _cache_access(stepper)
        sources_of = _source_access(stepper.capabilities)
        del stepper  # the step reaches its model through model_ref alone

        @tf.function(reduce_retracing=True)
        def step(
            entries, source, weights, sentences, parent_slots, positions, tokens, slots, thresholds
        ):
            stepper = model_ref().stepper()
            cache = cache_of(stepper, entries, parent_slots)
            step_source, rows_per_source = sources_of(source, sentences)
            logits, cache = common.decode_step(
                stepper, step_source, tokens, cache, positions, weights, rows_per_source
            )
            new_entries = new_entries_of(stepper, cache, positions)
            entries.scatter_update(tf.IndexedSlices(new_entries, slots))
            return candidate_entries(stepper.head, logits, thresholds)

        return step

    return per_model_function(model, (_cached_step,), build)


def _cache_access(stepper: StepModel) -> tuple[Callable, Callable]:
    """How `_cached_step` makes a stepper's cache from pooled entries, and takes the new ones out.

    Returns:
        `(cache_of, new_entries_of)`: `cache_of(stepper, entries, parent_slots)` makes the
        step's cache from the pool's `entries` at each row's `parent_slots`;
        `new_entries_of(stepper, cache, positions)` takes each row's new entry
        `[rows, *entry_shape]` from the cache the step returns. A stepper that
        `caches_prefixes` (`TransformerStepper`) gathers a `prefix_cache` itself, which returns
        the new entries alone; any other steps on an `initial_cache`-shaped cache
        (`_CacheLayout`). Both take the stepper as an argument, so that the step holds its
        model weakly.
    """
    if stepper.capabilities.caches_prefixes:
        return (
            lambda stepper, entries, parent_slots: stepper.prefix_cache(entries, parent_slots),
            lambda stepper, cache, positions: stepper.prefix_entries(cache),
        )
    layout = _CacheLayout.of(stepper)
    return (
        lambda stepper, entries, parent_slots: layout.cache(tf.gather(entries, parent_slots)),
        lambda stepper, cache, positions: layout.entries_at(cache, positions),
    )


def _source_access(capabilities: StepCapabilities) -> Callable:
    """How `_cached_step` gives its rows their sentences' encoder tensors.

    Returns:
        `sources_of(source, sentences)`, which returns the source and `rows_per_source` that
        `common.decode_step` takes for rows of `sentences` (int32 `[rows]`, indices into
        `source`). A stepper that `shares_sources` gets each sentence of the step once, its
        cross-attention keys and values read once for all of its rows (`SourceGroups`); any
        other a copy of its sentence's tensors for every row.
    """
    if capabilities.shares_sources:

        def grouped(source, sentences):
            present, row_sources = tf.unique(sentences)
            present_source = tf.nest.map_structure(lambda t: tf.gather(t, present), source)
            return present_source, SourceGroups.of(row_sources)

        return grouped
    return lambda source, sentences: (
        tf.nest.map_structure(lambda t: tf.gather(t, sentences), source),
        1,
    )


def exact_translate(
    model: Decodable,
    tokenizer: Any,
    sentences: Sequence[str],
    batch_size: int = 64,
    state_budget: int = DEFAULT_STATE_BUDGET,
    beam_size: int = 4,
) -> list[tuple[str, ExactSearchResult]]:
    """Exact search on sentences: each one's best translation as text, with its search result.

    Sources are tokenised as `tfscones.decoding.translate` does (pieces, EOS, truncated to the
    model's `max_sequence_length`) and searched `batch_size` at a time.

    Args:
        model: The model.
        tokenizer: A `tfscones.data.Tokenizer` of the model's vocabulary.
        sentences: Source sentences.
        batch_size: Sentences searched side by side.
        state_budget: Most prefixes a sentence may expand.
        beam_size: Beam of the initial lower bound.

    Returns:
        Per sentence, in order, `(translation, ExactSearchResult)`.
    """
    AT_LEAST_ONE.check("batch_size", batch_size)
    translated = []
    for start in range(0, len(sentences), batch_size):
        batch = tf.constant(list(sentences[start : start + batch_size]), tf.string)
        source_ids = source_ids_for_model(tokenizer, batch, model.max_sequence_length)
        results = exact_search(
            model, source_ids.to_tensor(PAD_ID), state_budget=state_budget, beam_size=beam_size
        )
        ids = tf.ragged.constant([list(result.ids) for result in results], tf.int32)
        texts = tokenizer.detokenize(ids.to_tensor(PAD_ID)).numpy()
        translated += [(t.decode("utf-8"), r) for t, r in zip(texts, results, strict=True)]
    return translated
