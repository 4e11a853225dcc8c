"""Model errors and search errors: the statistics of SCONES §4.3-4.4 and entmax Table 4.

A search error is the search's failure to find the translation the model scores highest; a model
error is the model scoring an inadequate translation highest, the empty one most notably (the
"cat got your tongue" problem, Stahlberg & Byrne 2019).

- `empty_translation_scores`: the log score of the empty translation, EOS alone.
- `empty_string_rate`: how often the empty translation outscores the beam output (entmax paper,
  Table 4: an upper bound on how often the empty string is the model's argmax).
- `search_error_rate`: how often a search misses the best translation that exact search found
  (SCONES, Fig. 7).
- `length_ratio`: hypothesis length / reference length, as sacrebleu counts them (SCONES,
  Figs. 4-5).
- `score_summary`: mean and standard deviation of log scores, -inf set apart (SCONES, Fig. 6).

Every score here is a sum of the head's log scores (`model.head.log_scores`) over a
translation's tokens, EOS included, with no length penalty: beam search's `log_scores`, not its
ranking `scores`. It is a log-probability under softmax and entmax and Σ log σ(z) under the
SCONES sigmoid head; entmax gives -inf to a translation with a zero-probability token.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tfscones.data.preprocessing import teacher_forcing_inputs
from tfscones.data.vocab_ids import EOS_ID, PAD_ID
from tfscones.decoding.compiled import per_model_function
from tfscones.evaluation.metrics import corpus_bleu
from tfscones.ranges import AT_LEAST_ONE, NON_NEGATIVE

DEFAULT_TOLERANCE = 1e-4


def empty_translation_scores(
    model: Any, source_ids: np.ndarray | tf.Tensor | tf.RaggedTensor, batch_size: int = 64
) -> np.ndarray:
    """Log score of the empty translation of each source: the head's log score of EOS after BOS.

    The empty translation is the sequence [EOS] alone, so its score is one token's: under
    softmax log P(EOS | x, BOS), under the sigmoid head log σ(z_EOS), under entmax -inf unless
    EOS is in the first step's support. Runs `batch_size` sources per model call, in a
    `tf.function` traced once per model.

    Args:
        model: A `Seq2SeqTransformer`, or any model whose call takes `source_ids` and
            `target_in_ids` and returns logits `[batch, length, vocabulary]`, with a `head`.
        source_ids: int source ids `[sentences, length]` padded with 0 (or ragged), each row
            as the model was trained on: pieces then EOS (see `source_ids_for_model`).
        batch_size: Sources per model call.

    Returns:
        float32 `[sentences]`.

    Raises:
        ValueError: If there are no sources or `batch_size` is not positive.
    """
    AT_LEAST_ONE.check("batch_size", batch_size)
    if not isinstance(source_ids, tf.RaggedTensor):
        source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    count = int(source_ids.shape[0])
    if count == 0:
        raise ValueError("no sources to score.")
    function = _compiled_empty_scores(model)
    batches = []
    for start in range(0, count, batch_size):
        batch = source_ids[start : start + batch_size]
        if isinstance(batch, tf.RaggedTensor):
            batch = batch.to_tensor(default_value=PAD_ID)
        batches.append(function(tf.cast(batch, tf.int32)).numpy())
    return np.concatenate(batches)


def _compiled_empty_scores(model: Any) -> tf.types.experimental.PolymorphicFunction:
    """The `tf.function` of `_empty_scores` for a model, made once while the model lives."""

    def build(model_ref):
        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
        def empty_scores(source_ids):
            return _empty_scores(model_ref(), source_ids)

        return empty_scores

    return per_model_function(model, (_empty_scores,), build)


def _empty_scores(model: Any, source_ids: tf.Tensor) -> tf.Tensor:
    """The head's log score of EOS after BOS: the empty translation [EOS], teacher-forced."""
    target_in = teacher_forcing_inputs(tf.fill([tf.shape(source_ids)[0], 1], EOS_ID))
    logits = model({"source_ids": source_ids, "target_in_ids": target_in}, training=False)
    return model.head.log_scores(tf.cast(logits[:, 0], tf.float32))[:, EOS_ID]


def empty_string_rate(
    empty_scores: np.ndarray | Sequence[float], hypothesis_scores: np.ndarray | Sequence[float]
) -> float:
    """Fraction of sentences whose empty translation scores strictly higher than the hypothesis.

    The entmax paper's Table 4 (with beam search hypotheses). -inf is never higher than
    anything, so an empty translation of zero probability never counts, even against a
    hypothesis of zero probability.

    Example:
    >>> empty_string_rate([-1.0, -np.inf, -5.0], [-2.0, -3.0, -4.0])
    0.3333333333333333

    Args:
        empty_scores: Log score of each sentence's empty translation
            (`empty_translation_scores`).
        hypothesis_scores: Log score of each sentence's hypothesis (no length penalty).

    Returns:
        The fraction, in [0, 1].

    Raises:
        ValueError: If the arrays are empty, differ in shape, or hold NaN or +inf.
    """
    empty, hypotheses = _score_arrays(
        empty_scores=empty_scores, hypothesis_scores=hypothesis_scores
    )
    return float(np.mean(empty > hypotheses))


def search_error_rate(
    search_scores: np.ndarray | Sequence[float],
    best_scores: np.ndarray | Sequence[float],
    tolerance: float = DEFAULT_TOLERANCE,
) -> float:
    """Fraction of sentences where a search's translation scores below the best known one.

    A sentence is a search error when `search < best - tolerance * max(1, |best|)`: the
    tolerance is absolute for scores within [-1, 1] and relative beyond, so float32 rounding of
    long sums never counts as an error. A search that finds no translation (-inf) below a finite
    best is an error; when the best is -inf, nothing is.

    `best_scores` must be upper bounds, as exact search gives (SCONES §4.4). A search score
    above its best by more than the tolerance means they are not, and raises; where exact
    search was cut off before it proved its result optimal, pass
    `np.maximum(best_scores, search_scores)` to use the best translation found by either.

    Example:
    >>> search_error_rate([-3.0, -2.0, -np.inf], [-2.0, -2.0, -1.0])
    0.6666666666666666

    Args:
        search_scores: Log score of each sentence's search result (no length penalty).
        best_scores: Log score of each sentence's best translation (exact search).
        tolerance: Gap allowed, relative to `max(1, |best|)`; at least 0.

    Returns:
        The fraction, in [0, 1].

    Raises:
        ValueError: If the arrays are empty, differ in shape, or hold NaN or +inf; if the
            tolerance is negative or not finite; or if a search score exceeds its best.
    """
    NON_NEGATIVE.check("tolerance", tolerance)
    search, best = _score_arrays(search_scores=search_scores, best_scores=best_scores)
    finite = np.isfinite(best)
    slack = tolerance * np.maximum(1.0, np.abs(np.where(finite, best, 0.0)))
    above = np.flatnonzero(search > best + slack)
    if above.size:
        raise ValueError(
            f"search_scores exceed best_scores at sentences {above[:10].tolist()}: best_scores "
            "must be the best known scores (pass np.maximum(best_scores, search_scores))."
        )
    return float(np.mean(search < best - slack))


def _score_arrays(**named_scores) -> list[np.ndarray]:
    """The score arrays as float64, after checking they match in shape and hold no NaN or +inf."""
    arrays = [np.asarray(scores, dtype=np.float64) for scores in named_scores.values()]
    names = list(named_scores)
    for name, array in zip(names, arrays, strict=True):
        if array.shape != arrays[0].shape:
            raise ValueError(
                f"{name} {array.shape} and {names[0]} {arrays[0].shape} differ in shape."
            )
        if array.size == 0:
            raise ValueError(f"{name} is empty.")
        if np.any(np.isnan(array) | (array == np.inf)):
            raise ValueError(f"{name} holds NaN or +inf; log scores are finite or -inf.")
    return arrays


def length_ratio(
    hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str | None]]
) -> float:
    """Hypothesis length / reference length over a corpus, as corpus BLEU counts them.

    The lengths are sacrebleu's `sys_len` and `ref_len` (`metrics.corpus_bleu`: 13a
    tokens, so punctuation marks count as words); with several reference streams, each
    sentence's reference length is the one closest to its hypothesis.

    Example:
    >>> length_ratio(["a b", "c"], ["a b c", "c d e"])
    0.5

    Args:
        hypotheses: Detokenised translations, one per segment.
        references: One reference stream or a list of streams, as in `corpus_bleu`.

    Returns:
        The ratio; 1 means translations as long as the references.

    Raises:
        ValueError: If the references hold no token, or as `corpus_bleu`.
        TypeError: As `corpus_bleu`.
    """
    bleu = corpus_bleu(hypotheses, references)
    if bleu.ref_len == 0:
        raise ValueError("the references hold no token.")
    return bleu.sys_len / bleu.ref_len


@dataclasses.dataclass(frozen=True)
class ScoreSummary:
    """Mean and spread of log scores, with -inf (zero-probability translations) set apart.

    Attributes:
        mean: Mean of the finite scores; NaN if there is none.
        std: Population standard deviation (ddof 0) of the finite scores; NaN if there is none.
        num_finite: Finite scores.
        num_neg_inf: Scores of -inf.
    """

    mean: float
    std: float
    num_finite: int
    num_neg_inf: int


def score_summary(scores: np.ndarray | Sequence[float]) -> ScoreSummary:
    """Mean and standard deviation of log scores ignoring -inf, and how many are -inf.

    SCONES Fig. 6 compares these for exact-search and empty translations; with an entmax head
    many empty translations score -inf, which a plain mean would turn into -inf.

    Example:
    >>> score_summary([-1.0, -3.0, -np.inf])
    ScoreSummary(mean=-2.0, std=1.0, num_finite=2, num_neg_inf=1)

    Args:
        scores: Log scores, finite or -inf.

    Returns:
        The `ScoreSummary`.

    Raises:
        ValueError: If `scores` is empty or holds NaN or +inf.
    """
    (scores,) = _score_arrays(scores=scores)
    finite = scores[np.isfinite(scores)]
    if finite.size == 0:
        return ScoreSummary(float("nan"), float("nan"), 0, int(scores.size))
    return ScoreSummary(
        mean=float(np.mean(finite)),
        std=float(np.std(finite)),
        num_finite=int(finite.size),
        num_neg_inf=int(scores.size - finite.size),
    )


__all__ = [
    "DEFAULT_TOLERANCE",
    "ScoreSummary",
    "empty_string_rate",
    "empty_translation_scores",
    "length_ratio",
    "score_summary",
    "search_error_rate",
]
