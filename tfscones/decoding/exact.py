"""Exact search: the model's single best translation, or the best found within a state budget.

Stahlberg & Byrne (2019), as used in SCONES §4.3 (Stahlberg & Kumar 2022, Appendix A): depth-first
search over output prefixes, pruned with an admissible bound. Every head scores a token with a log
score that is at most 0 (log-softmax, log σ(z) = -softplus(-z), log entmax), so a prefix's score
only falls as it grows: a prefix that does not beat the best complete translation found so far
cannot grow into one that does, and is dropped. The search starts from the best beam-search
hypothesis as its lower bound, so it never returns anything worse than beam search, and it always
expands a prefix's best-scoring child first, so that good translations, and with them tight bounds,
are found early.

The search space is the one every decoder here searches (see `tfscones.decoding.common`): the
token sequences that end with EOS within the sentence's length limit, plus those that reach the
limit without EOS. Sentences search side by side, and the prefixes they expand are scored in
batched calls of `model.next_token_logits` (no cache: prefixes share none) of up to
`rows_per_call` rows; a sentence left with few others expands several of its prefixes per
call. A state is one expanded prefix (one row of a model call). A sentence stops, marked
incomplete, when it has expanded `state_budget` prefixes (the paper's 1M); its answer is then
the best found so far, which is no longer guaranteed optimal (the paper's Table 7 reports how
often this happens).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID
from tfscones.decoding import common
from tfscones.decoding.compiled import per_model_function
from tfscones.decoding.search import Search
from tfscones.decoding.step import PrefixScoringModel
from tfscones.decoding.translate import compiled_search, source_ids_for_model

DEFAULT_STATE_BUDGET = 1_000_000
DEFAULT_ROWS_PER_CALL = 256
PREFIX_LENGTH_MULTIPLE = 8


@dataclasses.dataclass(frozen=True)
class ExactSearchResult:
    """The outcome of exact search for one sentence.

    Attributes:
        ids: The translation's tokens, its EOS included (absent only when the translation
            reached the sentence's length limit).
        score: The sum of the head's log scores of `ids`.
        states: Prefixes expanded (model-call rows) for this sentence.
        complete: True if the search proved `ids` optimal; False if it stopped at its state
            budget, when `ids` is the best found so far.
        initial_score: The score of the beam-search hypothesis the search started from.
    """

    ids: tuple[int, ...]
    score: float
    states: int
    complete: bool
    initial_score: float

    @property
    def improved(self) -> bool:
        """Whether exact search found a better translation than its initial beam search."""
        return self.score > self.initial_score


class _Frame:
    """A prefix's children that beat the bound when it was expanded, best first, and a cursor."""

    __slots__ = ("prefix", "tokens", "scores", "next")

    def __init__(self, prefix: tuple[int, ...], tokens: np.ndarray, scores: np.ndarray):
        self.prefix, self.tokens, self.scores, self.next = prefix, tokens, scores, 0

    def next_beats(self, bound: float) -> bool:
        return self.next < len(self.tokens) and self.scores[self.next] > bound


class _SentenceSearch:
    """The depth-first search of one sentence: its stack of frames and its best translation.

    Each frame holds an expanded prefix's children sorted best first; the search always takes
    the next child of the top (deepest) frame, so it tries each prefix's best child first, and
    drops a frame as soon as its next child cannot beat the best translation (nor can the worse
    ones after it). Children are kept as arrays, not pushed one by one, which matters when a
    loose bound lets thousands of a prefix's children through.
    """

    def __init__(self, limit: int, ids: tuple[int, ...], score: float, budget: int):
        self.limit = limit
        self.best_ids = ids
        self.best_score = score
        self.initial_score = score
        self.budget = budget
        self.states = 0
        root = _Frame((), np.array([-1]), np.array([0.0]))
        self._stack = [root] if 0.0 > score else []

    @property
    def done(self) -> bool:
        return not self._stack or self.states >= self.budget

    def pop(self, count: int) -> list[tuple[float, tuple[int, ...]]]:
        """Up to `count` prefixes that can still beat the best, within the budget."""
        count = min(count, self.budget - self.states)
        popped = []
        while self._stack and len(popped) < count:
            frame = self._stack[-1]
            if not frame.next_beats(self.best_score):
                self._stack.pop()
                continue
            token, score = frame.tokens[frame.next], frame.scores[frame.next]
            frame.next += 1
            popped.append((float(score), frame.prefix + ((int(token),) if token >= 0 else ())))
        self.states += len(popped)
        return popped

    def expand(self, score: float, prefix: tuple[int, ...], log_scores: np.ndarray) -> None:
        """Completes the prefix's children that beat the best, or pushes them as a frame."""
        child_scores = score + log_scores.astype(np.float64)
        if child_scores[EOS_ID] > self.best_score:
            self._improve(prefix + (EOS_ID,), child_scores[EOS_ID])
        child_scores[EOS_ID] = -np.inf
        candidates = np.flatnonzero(child_scores > self.best_score)
        if candidates.size == 0:
            return
        if len(prefix) + 1 == self.limit:
            best = candidates[np.argmax(child_scores[candidates])]
            self._improve(prefix + (int(best),), child_scores[best])
            return
        order = candidates[np.argsort(-child_scores[candidates], kind="stable")]
        self._stack.append(_Frame(prefix, order, child_scores[order]))

    def result(self) -> ExactSearchResult:
        return ExactSearchResult(
            ids=self.best_ids,
            score=float(self.best_score),
            states=self.states,
            complete=not any(frame.next_beats(self.best_score) for frame in self._stack),
            initial_score=float(self.initial_score),
        )

    def _improve(self, ids: tuple[int, ...], score: float) -> None:
        self.best_ids, self.best_score = ids, float(score)


def exact_search(
    model: PrefixScoringModel,
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
        model: A `PrefixScoringModel` (`tfscones.decoding.step`): a `StepModel` for the initial
            beam search, with `next_token_logits`, as `Seq2SeqTransformer` has them.
        source_ids: int `[batch, source_length]`, each row ending with EOS, padded with 0.
        state_budget: Most prefixes a sentence may expand before it stops (incomplete).
        beam_size: Beam of the search that gives the initial lower bound.
        rows_per_call: Most prefixes scored in one model call.
        max_length: Most output tokens, EOS included (default: the model's
            `max_sequence_length`).
        max_length_a: Output tokens allowed per source token.
        max_length_b: Output tokens allowed in addition.

    Returns:
        One `ExactSearchResult` per source row, in order.

    Raises:
        ValueError: If `state_budget`, `beam_size` or `rows_per_call` is not positive.
    """
    for name, value in (
        ("state_budget", state_budget),
        ("beam_size", beam_size),
        ("rows_per_call", rows_per_call),
    ):
        if value < 1:
            raise ValueError(f"{name} must be positive, got {value}.")
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    width = common.max_output_length(model, max_length)
    beam = Search(
        "beam",
        beam_size=beam_size,
        max_length=width,
        max_length_a=max_length_a,
        max_length_b=max_length_b,
    )
    initial = compiled_search(model, beam)(source_ids)
    encoder_outputs, source_padding_mask = model.encode(source_ids)
    limits = common.output_length_limits(source_ids, max_length_a, max_length_b, width)
    searches = [
        _SentenceSearch(
            limit=int(limit),
            ids=tuple(int(t) for t in ids[:length]),
            score=float(score),
            budget=state_budget,
        )
        for limit, ids, length, score in zip(
            limits.numpy(),
            initial.ids[:, 0].numpy(),
            initial.lengths[:, 0].numpy(),
            initial.scores[:, 0].numpy(),
            strict=True,
        )
    ]
    source = (encoder_outputs, source_padding_mask)
    _search_side_by_side(model, source, searches, rows_per_call)
    return [search.result() for search in searches]


def _search_side_by_side(
    model: PrefixScoringModel,
    source: tuple[tf.Tensor, tf.Tensor],
    searches: list[_SentenceSearch],
    rows_per_call: int,
) -> None:
    """Runs every sentence's search, scoring the prefixes of all of them in shared calls."""
    score_prefixes = _prefix_scorer(model)
    active = [i for i, search in enumerate(searches) if not search.done]
    while active:
        per_sentence = max(1, rows_per_call // len(active))
        requests = [
            (i, score, tokens)
            for i in active[:rows_per_call]
            for score, tokens in searches[i].pop(per_sentence)
        ]
        if requests:
            log_scores = _score_requests(score_prefixes, source, requests)
            # In reverse, so that each sentence's best popped prefix ends on top of its stack.
            for (i, score, tokens), row_scores in reversed(
                list(zip(requests, log_scores, strict=True))
            ):
                searches[i].expand(score, tokens, row_scores)
        active = [i for i in active if not searches[i].done]


def _score_requests(score_prefixes, source: tuple, requests: list) -> np.ndarray:
    """The log scores `[len(requests), vocabulary]` after each `(sentence, score, prefix)`."""
    rows = tf.constant([i for i, _, _ in requests], tf.int32)
    prefixes, lengths = _padded_prefixes([tokens for _, _, tokens in requests])
    rows_source = tf.nest.map_structure(lambda x: tf.gather(x, rows), source)
    return score_prefixes(rows_source, prefixes, lengths).numpy()


def _padded_prefixes(prefixes: Sequence[tuple[int, ...]]) -> tuple[tf.Tensor, tf.Tensor]:
    """BOS + tokens, padded to a multiple of 8 columns so few shapes are traced; and lengths."""
    lengths = np.array([len(tokens) + 1 for tokens in prefixes], np.int32)
    columns = PREFIX_LENGTH_MULTIPLE * math.ceil(lengths.max() / PREFIX_LENGTH_MULTIPLE)
    padded = np.full([len(prefixes), columns], PAD_ID, np.int32)
    padded[:, 0] = BOS_ID
    for row, tokens in enumerate(prefixes):
        padded[row, 1 : len(tokens) + 1] = tokens
    return tf.constant(padded), tf.constant(lengths)


def _prefix_scorer(model: PrefixScoringModel):
    """The `tf.function` of the head's log scores after each prefix, made once per model."""

    def build(model_ref):
        @tf.function(reduce_retracing=True)
        def score(source, prefixes, lengths):
            model = model_ref()
            logits = model.next_token_logits(prefixes, lengths, *source)
            return model.head.log_scores(logits)

        return score

    return per_model_function(model, (_prefix_scorer,), build)


def exact_translate(
    model: PrefixScoringModel,
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
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}.")
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
