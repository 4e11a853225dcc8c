"""One model on one test set: the analyses the SCONES and entmax papers make their case with.

`analyze_model` runs them all and returns a `ModelAnalysis`:

- the beam curve: BLEU (SCONES Fig. 3), length ratio (Fig. 4), mean log score and speed for
  each beam size, and the beam-search error rate against exact search (Fig. 7);
- exact search on the first `exact_sentences` sources (SCONES §4.3, Fig. 5, Tables 6-7): its
  BLEU and length ratio beside beam-4's on the same sentences, the fraction that hit the state
  budget, states explored per second and per sentence, and the log scores of its translations
  and of the empty translation (Fig. 6);
- model errors: how often the empty translation outscores beam-4's (entmax paper Table 4);
- force-decoded statistics: expected calibration error with 10 bins (entmax paper Table 6),
  accuracy, reliability bins, and the mean support size (Table 5).

Every score is the sum of the head's log scores, without length penalty (see
`model_errors`). The best known score of a sentence, against which search errors are
counted, is the highest of exact search's and every beam's: exact search that stopped at its
budget may have been beaten by a wider beam.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tfscones.decoding.exact import DEFAULT_STATE_BUDGET, exact_translate
from tfscones.decoding.search import Search
from tfscones.decoding.translate import source_ids_for_model, translate_nbest
from tfscones.evaluation import model_errors
from tfscones.evaluation.calibration import DEFAULT_NUM_BINS, force_decode
from tfscones.evaluation.metrics import corpus_bleu, reference_streams
from tfscones.ranges import AT_LEAST_ONE

DEFAULT_BEAM_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
REFERENCE_BEAM = 4
ROWS_PER_BATCH = 512


@dataclasses.dataclass(frozen=True)
class BeamPoint:
    """Beam search of one size over every analysed sentence.

    Attributes:
        beam_size: The beam.
        bleu: Corpus BLEU (sacrebleu).
        length_ratio: Hypothesis length / reference length.
        mean_log_score: Mean log score of the translations (finite ones).
        sentences_per_second: Decoding speed, batches of `512 // beam_size` sentences, the
            decoder traced beforehand.
        search_error_rate: Fraction of the exact-search sentences whose beam translation scores
            below the best known; None without exact search.
    """

    beam_size: int
    bleu: float
    length_ratio: float
    mean_log_score: float
    sentences_per_second: float
    search_error_rate: float | None


@dataclasses.dataclass(frozen=True)
class ExactSearchStatistics:
    """Exact search on the first `sentences` sources.

    Attributes:
        sentences: Sentences searched.
        state_budget: The per-sentence state budget.
        bleu: Corpus BLEU of the exact-search translations.
        length_ratio: Their length ratio.
        beam_bleu: Beam-4 BLEU on the same sentences.
        beam_length_ratio: Beam-4 length ratio on the same sentences.
        incomplete_fraction: Sentences that hit the budget (SCONES Table 7).
        improved_fraction: Sentences where exact search beat its beam-4 start.
        empty_fraction: Sentences whose exact-search translation is empty.
        seconds: Wall-clock time of the search.
        states: Per-sentence states explored.
        exact_scores: Log scores of the exact-search translations.
        empty_scores: Log scores of the empty translations of the same sentences.
    """

    sentences: int
    state_budget: int
    bleu: float
    length_ratio: float
    beam_bleu: float
    beam_length_ratio: float
    incomplete_fraction: float
    improved_fraction: float
    empty_fraction: float
    seconds: float
    states: list[int]
    exact_scores: list[float]
    empty_scores: list[float]

    @property
    def states_per_second(self) -> float:
        return sum(self.states) / self.seconds

    def states_percentiles(self) -> dict[str, float]:
        """Median, 90th and 99th percentiles and maximum of the per-sentence states."""
        states = np.asarray(self.states)
        return {
            "median": float(np.median(states)),
            "p90": float(np.percentile(states, 90)),
            "p99": float(np.percentile(states, 99)),
            "max": float(states.max()),
        }


@dataclasses.dataclass(frozen=True)
class ForcedStatistics:
    """Force-decoded statistics of the references.

    Attributes:
        expected_calibration_error: ECE over 10 evenly spaced bins.
        accuracy: Fraction of positions whose argmax is the reference token.
        mean_support_size: Mean number of tokens with nonzero probability.
        bin_confidence: Mean confidence per bin (NaN where empty).
        bin_accuracy: Accuracy per bin (NaN where empty).
        bin_counts: Predictions per bin.
    """

    expected_calibration_error: float
    accuracy: float
    mean_support_size: float
    bin_confidence: list[float]
    bin_accuracy: list[float]
    bin_counts: list[int]


@dataclasses.dataclass(frozen=True)
class ModelAnalysis:
    """Everything `analyze_model` measures for one model (module docstring).

    Attributes:
        sentences: Sentences analysed.
        head: The model's head, as its config names it.
        beam_curve: One `BeamPoint` per beam size, ascending.
        exact: Exact-search statistics, or None when it was not run.
        empty_string_rate: Fraction of sentences whose empty translation outscores beam-4's.
        empty_scores: Log-score summary of the empty translations of every sentence.
        forced: Force-decoded statistics.
        seconds: Wall-clock time of the whole analysis.
        references: The reference streams BLEU and length ratios were computed against
            (force decoding reads the first).
    """

    sentences: int
    head: str
    beam_curve: list[BeamPoint]
    exact: ExactSearchStatistics | None
    empty_string_rate: float
    empty_scores: model_errors.ScoreSummary
    forced: ForcedStatistics
    seconds: float
    references: int = 1

    @classmethod
    def from_dict(cls, values: dict) -> ModelAnalysis:
        """The analysis `dataclasses.asdict` turned into `values` (as `analysis.json` holds it)."""
        exact = values["exact"]
        return cls(
            **{
                **values,
                "beam_curve": [BeamPoint(**point) for point in values["beam_curve"]],
                "exact": ExactSearchStatistics(**exact) if exact else None,
                "empty_scores": model_errors.ScoreSummary(**values["empty_scores"]),
                "forced": ForcedStatistics(**values["forced"]),
            }
        )

    def beam(self, beam_size: int) -> BeamPoint | None:
        """The beam curve's point of a beam size, or None if the curve has no such beam."""
        return next((point for point in self.beam_curve if point.beam_size == beam_size), None)


def analyze_model(
    model: Any,
    tokenizer: Any,
    sources: Sequence[str],
    references: Sequence[str] | Sequence[Sequence[str]],
    beam_sizes: Sequence[int] = DEFAULT_BEAM_SIZES,
    exact_sentences: int | None = None,
    state_budget: int = DEFAULT_STATE_BUDGET,
) -> ModelAnalysis:
    """Runs every analysis of the module docstring for one model.

    Example:
    ```python
    analysis = analyze_model(model, tokenizer, sources, references, exact_sentences=100)
    analysis.beam(4).bleu, analysis.exact.bleu, analysis.empty_string_rate
    ```

    Args:
        model: The model.
        tokenizer: A `tfscones.data.Tokenizer` of its vocabulary.
        sources: Source sentences.
        references: One reference translation per source, or several such streams (a
            multi-reference test set: BLEU and length ratios use them all, force decoding the
            first).
        beam_sizes: Beam sizes of the curve; 4 is always added (the reference beam).
        exact_sentences: Exact search on this many of the first sentences (None: all; 0: none).
        state_budget: Exact search's per-sentence state budget.

    Returns:
        The `ModelAnalysis`.

    Raises:
        ValueError: If there are no sentences, a reference stream and the sources differ in
            length, or a beam size is not positive.
    """
    if not sources:
        raise ValueError("no sentences to analyse.")
    streams = reference_streams(sources, references)
    for size in beam_sizes:
        AT_LEAST_ONE.check("beam_sizes", size)
    started = time.perf_counter()
    count = len(sources) if exact_sentences is None else min(exact_sentences, len(sources))
    beams = {
        size: _beam_translations(model, tokenizer, sources, size)
        for size in sorted({*beam_sizes, REFERENCE_BEAM})
    }
    source_ids = source_ids_for_model(
        tokenizer, tf.constant(list(sources)), model.max_sequence_length
    )
    empty = model_errors.empty_translation_scores(model, source_ids)
    exact = None
    if count:
        exact = _exact_statistics(
            model,
            tokenizer,
            sources[:count],
            [stream[:count] for stream in streams],
            beams,
            empty,
            state_budget,
        )
    best_known = _best_known_scores(beams, exact)
    return ModelAnalysis(
        sentences=len(sources),
        head=repr(model.head),
        beam_curve=[_beam_point(size, beams[size], streams, best_known) for size in beams],
        exact=exact,
        empty_string_rate=model_errors.empty_string_rate(empty, beams[REFERENCE_BEAM].scores),
        empty_scores=model_errors.score_summary(empty),
        forced=_forced_statistics(model, tokenizer, sources, streams[0]),
        seconds=time.perf_counter() - started,
        references=len(streams),
    )


@dataclasses.dataclass(frozen=True)
class _BeamTranslations:
    texts: list[str]
    scores: np.ndarray
    seconds: float


def _beam_translations(model, tokenizer, sources, beam_size) -> _BeamTranslations:
    search = Search("beam", beam_size=beam_size, num_hypotheses=1)
    batch_size = max(1, ROWS_PER_BATCH // beam_size)
    translate_nbest(model, tokenizer, sources[:1], search=search)  # Traced before timing.
    started = time.perf_counter()
    nbest = translate_nbest(model, tokenizer, sources, batch_size=batch_size, search=search)
    seconds = time.perf_counter() - started
    texts = [row[0][0] if row else "" for row in nbest]
    scores = np.array([row[0][1] if row else -np.inf for row in nbest], np.float64)
    return _BeamTranslations(texts=texts, scores=scores, seconds=seconds)


def _exact_statistics(
    model, tokenizer, sources, references, beams, empty, state_budget
) -> ExactSearchStatistics:
    count = len(sources)
    started = time.perf_counter()
    translated = exact_translate(
        model, tokenizer, sources, state_budget=state_budget, beam_size=REFERENCE_BEAM
    )
    seconds = time.perf_counter() - started
    texts = [text for text, _ in translated]
    results = [result for _, result in translated]
    beam_texts = beams[REFERENCE_BEAM].texts[:count]
    return ExactSearchStatistics(
        sentences=count,
        state_budget=state_budget,
        bleu=corpus_bleu(texts, references).score,
        length_ratio=model_errors.length_ratio(texts, references),
        beam_bleu=corpus_bleu(beam_texts, references).score,
        beam_length_ratio=model_errors.length_ratio(beam_texts, references),
        incomplete_fraction=float(np.mean([not result.complete for result in results])),
        improved_fraction=float(np.mean([result.improved for result in results])),
        empty_fraction=float(np.mean([text == "" for text in texts])),
        seconds=seconds,
        states=[result.states for result in results],
        exact_scores=[result.score for result in results],
        empty_scores=[float(score) for score in empty[:count]],
    )


def _best_known_scores(beams, exact: ExactSearchStatistics | None) -> np.ndarray | None:
    """Per exact-search sentence, the highest score any search found."""
    if exact is None:
        return None
    count = exact.sentences
    beam_scores = np.stack([beam.scores[:count] for beam in beams.values()])
    return np.maximum(np.asarray(exact.exact_scores), beam_scores.max(axis=0))


def _beam_point(size, beam: _BeamTranslations, references, best_known) -> BeamPoint:
    finite = beam.scores[np.isfinite(beam.scores)]
    errors = None
    if best_known is not None:
        errors = model_errors.search_error_rate(beam.scores[: len(best_known)], best_known)
    return BeamPoint(
        beam_size=size,
        bleu=corpus_bleu(beam.texts, references).score,
        length_ratio=model_errors.length_ratio(beam.texts, references),
        mean_log_score=float(finite.mean()) if finite.size else float("-inf"),
        sentences_per_second=len(beam.texts) / beam.seconds,
        search_error_rate=errors,
    )


def _forced_statistics(model, tokenizer, sources, references) -> ForcedStatistics:
    forced = force_decode(model, tokenizer, sources, references)
    bins = forced.calibration_bins(DEFAULT_NUM_BINS)
    return ForcedStatistics(
        expected_calibration_error=bins.expected_calibration_error,
        accuracy=forced.accuracy,
        mean_support_size=forced.mean_support_size,
        bin_confidence=[float(value) for value in bins.mean_confidence],
        bin_accuracy=[float(value) for value in bins.accuracy],
        bin_counts=[int(value) for value in bins.counts],
    )
