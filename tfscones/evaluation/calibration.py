"""Force-decoded statistics of a model: calibration (ECE) and the support size of its head.

Force decoding (teacher forcing) feeds the reference translation to the decoder and reads the
model's prediction at every target position. The entmax paper (Peters & Martins 2021)
reports two statistics of these predictions:

- Expected Calibration Error (its Table 6; Naeini et al. 2015): the predictions are put into
  `num_bins` evenly spaced bins by their confidence, the probability of the most likely token,
  and ECE = Σ_b (n_b / N) |acc_b - conf_b|, where acc_b is the fraction of the bin's predictions
  that equal the reference token and conf_b their mean confidence.
- The mean support size (its Table 5): how many tokens have nonzero probability at a position;
  the whole vocabulary for softmax and sigmoid heads, a few tokens for a trained entmax head.

Confidence means `max_w head.probabilities(z)_w`. For softmax and entmax it is a probability of
a distribution over the vocabulary. For the SCONES sigmoid head it is max_w σ(z_w), the largest
of the per-token binary probabilities P(z=1 | x, y<i·w): these are not normalised over the
vocabulary (several tokens may all be near 1), so its calibration measures how well the best
token's binary classifier is calibrated, not a distribution's.

Example:
```python
forced = force_decode(model, tokenizer, sources, references)
forced.expected_calibration_error()  # 0.05
forced.calibration_bins().accuracy  # for a reliability diagram
forced.mean_support_size  # vocabulary size for softmax, less for entmax
```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tfscones.decoding.compiled import per_model_function
from tfscones.decoding.scoring import check_text_pairs, in_length_sorted_batches, teacher_forced
from tfscones.decoding.translate import source_ids_for_model
from tfscones.ranges import AT_LEAST_ONE

DEFAULT_NUM_BINS = 10

_IDS = tf.TensorSpec([None, None], tf.int32)


@dataclasses.dataclass(frozen=True)
class CalibrationBins:
    """Predictions grouped by confidence: the table behind ECE and a reliability diagram.

    Bin b holds the confidences in `(edges[b], edges[b + 1]]`; the first bin also holds 0.

    Attributes:
        edges: float64 `[num_bins + 1]`, `0, 1/B, ..., 1`.
        counts: int64 `[num_bins]`, predictions in each bin.
        accuracy: float64 `[num_bins]`, fraction of correct predictions; NaN in an empty bin.
        mean_confidence: float64 `[num_bins]`, mean confidence; NaN in an empty bin.
    """

    edges: np.ndarray
    counts: np.ndarray
    accuracy: np.ndarray
    mean_confidence: np.ndarray

    @property
    def expected_calibration_error(self) -> float:
        """Σ_b (n_b / N) |acc_b - conf_b| over the non-empty bins."""
        filled = self.counts > 0
        gaps = np.abs(self.accuracy[filled] - self.mean_confidence[filled])
        return float(np.sum(self.counts[filled] * gaps) / np.sum(self.counts))


def calibration_bins(
    confidences: np.ndarray | Sequence[float],
    correct: np.ndarray | Sequence[bool],
    num_bins: int = DEFAULT_NUM_BINS,
) -> CalibrationBins:
    """Groups predictions into `num_bins` evenly spaced confidence bins on [0, 1].

    Args:
        confidences: Probability of each prediction's most likely token, in [0, 1].
        correct: Whether each prediction is right: booleans, or 0 and 1.
        num_bins: Number of bins, at least 1.

    Returns:
        The `CalibrationBins`.

    Raises:
        ValueError: If the arrays are empty or differ in shape, a confidence is outside [0, 1]
            (or NaN), `correct` holds anything but 0 and 1, or `num_bins` is below 1.
    """
    confidences, correct = _checked_predictions(confidences, correct, num_bins)
    edges = np.arange(num_bins + 1) / num_bins
    bins = np.maximum(np.searchsorted(edges, confidences, side="left") - 1, 0)
    counts = np.bincount(bins, minlength=num_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.bincount(bins, weights=correct, minlength=num_bins) / counts
        mean_confidence = np.bincount(bins, weights=confidences, minlength=num_bins) / counts
    return CalibrationBins(edges, counts, accuracy, mean_confidence)


def expected_calibration_error(
    confidences: np.ndarray | Sequence[float],
    correct: np.ndarray | Sequence[bool],
    num_bins: int = DEFAULT_NUM_BINS,
) -> float:
    """Expected Calibration Error (Naeini et al. 2015) with evenly spaced bins.

    ECE = Σ_b (n_b / N) |acc_b - conf_b| over bins `(b/B, (b+1)/B]` (0 goes to the first).

    Example:
    >>> expected_calibration_error([0.9, 0.9], [True, False])
    0.4

    Args:
        confidences: Probability of each prediction's most likely token, in [0, 1].
        correct: Whether each prediction is right: booleans, or 0 and 1.
        num_bins: Number of bins, at least 1 (the entmax paper uses 10).

    Returns:
        The ECE, in [0, 1].

    Raises:
        ValueError: As `calibration_bins`.
    """
    return calibration_bins(confidences, correct, num_bins).expected_calibration_error


def _checked_predictions(confidences, correct, num_bins) -> tuple[np.ndarray, np.ndarray]:
    """Flat float64 confidences and 0/1 correctness, after checking them and `num_bins`."""
    AT_LEAST_ONE.check("num_bins", num_bins)
    confidences = np.asarray(confidences, dtype=np.float64)
    correct = np.asarray(correct)
    if confidences.shape != correct.shape:
        raise ValueError(
            f"confidences {confidences.shape} and correct {correct.shape} differ in shape."
        )
    if confidences.size == 0:
        raise ValueError("no predictions to calibrate.")
    if not np.all((confidences >= 0.0) & (confidences <= 1.0)):
        raise ValueError("confidences must lie in [0, 1] (NaN is not allowed).")
    if not np.all((correct == 0) | (correct == 1)):
        raise ValueError("correct must hold booleans, or only 0 and 1.")
    return confidences.ravel(), correct.ravel().astype(np.float64)


@dataclasses.dataclass(frozen=True)
class ForcedDecoding:
    """A model's predictions at every reference token (EOS included), sentence after sentence.

    The token arrays hold the tokens of sentence 0, then of sentence 1, and so on, in the order
    of the inputs; `np.split(array, np.cumsum(lengths)[:-1])` splits them by sentence.

    Attributes:
        confidences: float32 `[tokens]`, the head's largest probability at the position
            (for the sigmoid head max σ(z_w), not normalised; see the module docstring),
            clipped to 1 against float32 rounding.
        correct: bool `[tokens]`, whether the argmax of the logits is the reference token.
        support_sizes: int32 `[tokens]`, tokens of nonzero probability, counted as tokens of
            finite log score: the vocabulary size for softmax and sigmoid heads (even where a
            probability underflows to 0 in float32), the support for entmax heads.
        lengths: int32 `[sentences]`, reference tokens of each sentence, EOS included.
        sentence_scores: float32 `[sentences]`, the sum of the head's log scores of each
            reference's tokens (as `TranslationModule.score`); -inf when an entmax head gives a
            reference token zero probability.
    """

    confidences: np.ndarray
    correct: np.ndarray
    support_sizes: np.ndarray
    lengths: np.ndarray
    sentence_scores: np.ndarray

    @property
    def accuracy(self) -> float:
        """Fraction of reference tokens the model predicts (its argmax)."""
        return float(np.mean(self.correct))

    @property
    def mean_support_size(self) -> float:
        """Mean number of nonzero-probability tokens per position (entmax paper, Table 5)."""
        return float(np.mean(self.support_sizes))

    def calibration_bins(self, num_bins: int = DEFAULT_NUM_BINS) -> CalibrationBins:
        """The reliability-diagram table of these predictions (see `calibration_bins`)."""
        return calibration_bins(self.confidences, self.correct, num_bins)

    def expected_calibration_error(self, num_bins: int = DEFAULT_NUM_BINS) -> float:
        """ECE of these predictions (entmax paper, Table 6, with 10 bins)."""
        return expected_calibration_error(self.confidences, self.correct, num_bins)


def force_decode(
    model: Any,
    tokenizer: Any,
    sources: Sequence[str],
    references: Sequence[str],
    batch_size: int = 64,
) -> ForcedDecoding:
    """Teacher-forces each reference on the model and collects its predictions.

    Sources and references are tokenised as in training and by `tfscones.decoding.translate`:
    pieces then EOS, truncated to `model.max_sequence_length` tokens with EOS kept last. Pairs
    are sorted by reference length and run `batch_size` at a time through
    `compiled_force_decode(model)`, one `model(...)` call per batch; the results come back in
    input order. A batch holds `batch_size x length x vocabulary` float32 values several times
    over, so lower `batch_size` for long sentences and large vocabularies.

    Args:
        model: A `Seq2SeqTransformer`, or any model whose call takes `source_ids` and
            `target_in_ids` and returns logits `[batch, length, vocabulary]`, with a `head`.
        tokenizer: The `tfscones.data.Tokenizer` of the model's vocabulary.
        sources: Source sentences.
        references: Their reference translations, one per source.
        batch_size: Sentence pairs per model call.

    Returns:
        The `ForcedDecoding` of every reference token.

    Raises:
        ValueError: If there are no sentences, sources and references differ in number, or
            `batch_size` is not positive.
        TypeError: If `sources` or `references` is a single string.
    """
    check_text_pairs(sources, references, targets_name="references")
    if len(sources) == 0:
        raise ValueError("no sentences to force-decode.")
    AT_LEAST_ONE.check("batch_size", batch_size)
    length = model.max_sequence_length
    source_ids = source_ids_for_model(tokenizer, tf.constant(list(sources)), length)
    target_ids = source_ids_for_model(tokenizer, tf.constant(list(references)), length)
    merged = in_length_sorted_batches(
        compiled_force_decode(model), source_ids, target_ids, batch_size
    )
    return ForcedDecoding(
        confidences=merged["confidences"].flat_values.numpy(),
        correct=merged["correct"].flat_values.numpy(),
        support_sizes=merged["support_sizes"].flat_values.numpy(),
        lengths=merged["confidences"].row_lengths().numpy().astype(np.int32),
        sentence_scores=merged["sentence_scores"].numpy(),
    )


def compiled_force_decode(model: Any) -> tf.types.experimental.PolymorphicFunction:
    """The `tf.function` that force-decodes one padded batch, made once per model.

    It takes int32 `source_ids` and `target_ids` `[batch, length]` of any shape (one trace),
    each row ending with EOS and padded with 0, feeds BOS then the target to the model, and
    returns ragged `[batch, (target length)]` `confidences`, `correct` and `support_sizes`
    (see `ForcedDecoding`) and dense `sentence_scores` `[batch]`. Heads run in float32.

    Args:
        model: The model, as in `force_decode`.

    Returns:
        The function, cached while the model lives.
    """

    def build(model_ref):
        @tf.function(input_signature=[_IDS, _IDS])
        def forced(source_ids, target_ids):
            return _forced_statistics(model_ref(), source_ids, target_ids)

        return forced

    return per_model_function(model, (_forced_statistics,), build)


def _forced_statistics(model, source_ids, target_ids) -> dict[str, tf.Tensor | tf.RaggedTensor]:
    """Per-token statistics of one teacher-forced batch (see `compiled_force_decode`)."""
    forced = teacher_forced(model, source_ids, target_ids)
    confidences = tf.reduce_max(model.head.probabilities(forced.logits), axis=-1)
    predictions = tf.argmax(forced.logits, axis=-1, output_type=tf.int32)
    support_sizes = tf.reduce_sum(tf.cast(forced.log_scores > -np.inf, tf.int32), axis=-1)
    lengths = forced.lengths
    return {
        "confidences": tf.RaggedTensor.from_tensor(tf.minimum(confidences, 1.0), lengths=lengths),
        "correct": tf.RaggedTensor.from_tensor(tf.equal(predictions, target_ids), lengths=lengths),
        "support_sizes": tf.RaggedTensor.from_tensor(support_sizes, lengths=lengths),
        "sentence_scores": forced.scores,
    }


__all__ = [
    "DEFAULT_NUM_BINS",
    "CalibrationBins",
    "ForcedDecoding",
    "calibration_bins",
    "compiled_force_decode",
    "expected_calibration_error",
    "force_decode",
]
