"""Reference-free quality estimation: how well a model's own numbers predict translation quality.

The unsupervised measures of Fomicheva et al. (2020, "Unsupervised Quality Estimation for Neural
Machine Translation"), for any head, from teacher forcing the model on given translations:

- `log_confidence`: the summed log scores (the log of `tfscones.decoding.confidence`'s
  confidence: log P(y | x) for a normalised head, log P(adequate) under SCONES);
- `normalised`: that sum over the tokens, EOS included (their TP, length-normalised);
- `mean_entropy`: the mean over the tokens of the entropy of the head's distribution over the
  vocabulary (their Softmax-Ent), defined for heads whose probabilities are a distribution
  (`ScoreKind.normalised`), NaN for the SCONES heads;
- `dropout_mean`, `dropout_variance`: the mean and the variance of the summed log scores over
  `passes` forward passes with dropout on (their D-TP and D-Var; Monte Carlo dropout, Gal &
  Ghahramani 2016). The paper uses 30 passes (`DROPOUT_PASSES`); a model trained without
  dropout has none to draw, and 0 passes leave the two measures NaN.

    measures = quality_measures(model, tokenizer, sources, translations, passes=30)
    correlation(measures.normalised, sentence_chrf)   # Pearson, Spearman, bootstrap intervals
    auroc(scores_of_real, scores_of_corrupted)         # P(a real one outscores a corrupted one)

`correlation` and `auroc` are scipy's (`scipy.stats.pearsonr`, `spearmanr`, `bootstrap`,
`mannwhitneyu`).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.stats
import tensorflow as tf

from tfscones.decoding.scoring import (
    check_text_pairs,
    in_length_sorted_batches,
    teacher_forced,
    tokenised_pairs,
)
from tfscones.ranges import AT_LEAST_ONE, NON_NEGATIVE_INTEGER

DROPOUT_PASSES = 30
CONFIDENCE_LEVEL = 0.95


@dataclasses.dataclass(frozen=True)
class QualityMeasures:
    """Each measure of the module docstring, float64 `[translations]`, NaN where undefined."""

    log_confidence: np.ndarray
    normalised: np.ndarray
    mean_entropy: np.ndarray
    dropout_mean: np.ndarray
    dropout_variance: np.ndarray


def quality_measures(
    model: Any,
    tokenizer: Any,
    sources: Sequence[str],
    targets: Sequence[str],
    passes: int = DROPOUT_PASSES,
    batch_size: int = 64,
) -> QualityMeasures:
    """The unsupervised quality measures of each target as a translation of its source.

    Tokenised as `tfscones.decoding.score_texts` tokenises; a target longer than the model
    reads gets NaN throughout.

    Args:
        model: A `Seq2SeqTransformer`.
        tokenizer: The `tfscones.data.Tokenizer` of its vocabulary.
        sources: Source sentences.
        targets: One translation per source.
        passes: Forward passes with dropout on, each with the masks the model's dropout
            layers draw next (seed them with `keras.utils.set_random_seed` before the model is
            built); 0 leaves `dropout_mean` and `dropout_variance` NaN.
        batch_size: Pairs per model call.

    Raises:
        TypeError: If `sources` or `targets` is one string.
        ValueError: If they differ in length, `passes` is negative or `batch_size` is not >= 1.
    """
    check_text_pairs(sources, targets)
    NON_NEGATIVE_INTEGER.check("passes", passes)
    AT_LEAST_ONE.check("batch_size", batch_size)
    if not sources:
        return QualityMeasures(*(np.zeros(0) for _ in dataclasses.fields(QualityMeasures)))
    source_ids, target_ids, unreadable = tokenised_pairs(model, tokenizer, sources, targets)

    def measure(sources_batch, targets_batch):
        forced = teacher_forced(model, sources_batch, targets_batch)
        counts = tf.cast(forced.lengths, tf.float32)
        entropy = _token_entropies(model, forced.logits)
        entropy = tf.reduce_sum(tf.where(forced.is_token, entropy, 0.0), axis=1) / counts
        return {"scores": forced.scores, "counts": counts, "entropy": entropy}

    deterministic = in_length_sorted_batches(measure, source_ids, target_ids, batch_size)
    dropped = np.full((1, len(sources)), np.nan)
    if passes:
        dropped = _dropout_scores(model, source_ids, target_ids, passes, batch_size)
    scores = deterministic["scores"].numpy().astype(np.float64)
    measures = QualityMeasures(
        log_confidence=scores,
        normalised=scores / deterministic["counts"].numpy(),
        mean_entropy=deterministic["entropy"].numpy().astype(np.float64),
        dropout_mean=dropped.mean(axis=0),
        dropout_variance=dropped.var(axis=0),
    )
    return QualityMeasures(
        **{
            field.name: np.where(unreadable, np.nan, getattr(measures, field.name))
            for field in dataclasses.fields(measures)
        }
    )


def _dropout_scores(model, source_ids, target_ids, passes: int, batch_size: int) -> np.ndarray:
    """The summed log scores of each pair in each of `passes` passes with dropout on."""
    return np.stack(
        [
            in_length_sorted_batches(
                lambda s, t: {"scores": teacher_forced(model, s, t, training=True).scores},
                source_ids,
                target_ids,
                batch_size,
            )["scores"].numpy()
            for _ in range(passes)
        ]
    ).astype(np.float64)


def _token_entropies(model: Any, logits: tf.Tensor) -> tf.Tensor:
    """Entropy (nats) of the head's distribution at each position; NaN if it is not one."""
    if not model.head.score_kind.normalised:
        return tf.fill(tf.shape(logits)[:-1], float("nan"))
    probabilities = model.head.probabilities(logits)
    logs = tf.math.log(tf.where(probabilities > 0, probabilities, 1.0))
    return -tf.reduce_sum(probabilities * logs, axis=-1)


@dataclasses.dataclass(frozen=True)
class Correlation:
    """Pearson's and Spearman's correlation of a measure with quality, with 95% intervals.

    Attributes:
        pearson: Pearson's r.
        spearman: Spearman's ρ.
        pearson_interval: The bootstrap 95% interval of r (pairs resampled).
        spearman_interval: The bootstrap 95% interval of ρ.
        pairs: The pairs measured (those with both numbers finite).
    """

    pearson: float
    spearman: float
    pearson_interval: tuple[float, float]
    spearman_interval: tuple[float, float]
    pairs: int


def correlation(
    measure: Sequence[float], quality: Sequence[float], resamples: int = 1000, seed: int = 1
) -> Correlation:
    """How well `measure` predicts `quality`, pair by pair (pairs with a NaN are left out).

    Constant numbers have no correlation: NaN, as has an interval where resamples are constant.

    The intervals are percentile bootstraps over the pairs (`scipy.stats.bootstrap`,
    `paired=True`), `resamples` of them, seeded.

    Raises:
        ValueError: If the two differ in length, or fewer than 3 pairs are finite.
    """
    x, y = _finite_pairs(measure, quality)

    def pearson(a, b):
        return scipy.stats.pearsonr(a, b).statistic

    def spearman(a, b):
        return scipy.stats.spearmanr(a, b).statistic

    with warnings.catch_warnings():  # constant numbers (or a resample of them): NaN
        warnings.simplefilter("ignore", scipy.stats.ConstantInputWarning)
        warnings.simplefilter("ignore", scipy.stats.DegenerateDataWarning)
        intervals = _intervals(x, y, (pearson, spearman), resamples, seed)
        return Correlation(
            pearson=float(pearson(x, y)),
            spearman=float(spearman(x, y)),
            pearson_interval=(float(intervals[0].low), float(intervals[0].high)),
            spearman_interval=(float(intervals[1].low), float(intervals[1].high)),
            pairs=len(x),
        )


def _intervals(x, y, statistics, resamples: int, seed: int) -> list:
    """The percentile bootstrap interval of each statistic over the pairs."""
    return [
        scipy.stats.bootstrap(
            (x, y),
            statistic,
            paired=True,
            vectorized=False,
            n_resamples=resamples,
            confidence_level=CONFIDENCE_LEVEL,
            method="percentile",
            rng=np.random.default_rng(seed),
        ).confidence_interval
        for statistic in statistics
    ]


def _finite_pairs(first: Sequence[float], second: Sequence[float]):
    x, y = np.asarray(first, np.float64), np.asarray(second, np.float64)
    if x.shape != y.shape:
        raise ValueError(f"{x.size} measures but {y.size} quality figures.")
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 3:
        raise ValueError(
            f"a correlation needs 3 pairs of finite numbers at least; got {keep.sum()}."
        )
    return x[keep], y[keep]


def auroc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """The area under the ROC curve of telling positives (higher scores) from negatives.

    The probability that a random positive outscores a random negative, ties counting half:
    the Mann-Whitney U of the positives over `len(positive) * len(negative)`.

    Raises:
        ValueError: If either side is empty or holds a NaN.
    """
    positive, negative = np.asarray(positive, np.float64), np.asarray(negative, np.float64)
    if not positive.size or not negative.size:
        raise ValueError("AUROC needs scores of positives and of negatives.")
    if np.isnan(positive).any() or np.isnan(negative).any():
        raise ValueError("AUROC needs scores that are numbers, not NaN.")
    u = scipy.stats.mannwhitneyu(positive, negative, alternative="two-sided").statistic
    return float(u / (positive.size * negative.size))


MEASURES = ("log_confidence", "normalised", "mean_entropy", "dropout_mean", "dropout_variance")
LOWER_IS_BETTER = ("mean_entropy", "dropout_variance")
WORST_FRACTION = 0.1


def signed(measures: QualityMeasures, name: str) -> np.ndarray:
    """A measure with its sign turned so that higher always means a better translation."""
    values = getattr(measures, name)
    return -values if name in LOWER_IS_BETTER else values


def flagging_auroc(measure: Sequence[float], quality: Sequence[float]) -> float:
    """How well a low `measure` flags the worst `WORST_FRACTION` of translations by `quality`.

    The AUROC of telling the worst tenth (lowest quality, at least one translation) from the
    rest by the measure, the worst being the negatives: 1 when every one of them scores below
    every other translation, 0.5 for a measure that knows nothing.

    Raises:
        ValueError: If fewer than 3 pairs are finite.
    """
    x, y = _finite_pairs(measure, quality)
    worst = np.zeros(len(y), bool)
    worst[np.argsort(y, kind="stable")[: max(1, int(WORST_FRACTION * len(y)))]] = True
    return auroc(x[~worst], x[worst])
