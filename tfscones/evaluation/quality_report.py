"""How well a model's confidence predicts quality, on one test set: every figure of one report.

    report = confidence_quality(model, tokenizer, sources, references, multiref=(srcs, refs))

For each unsupervised measure (`tfscones.evaluation.quality_estimation.MEASURES`, signed so
that higher means better; a measure the head does not define is left out):

- `correlation`: Pearson and Spearman with the sentence chrF (sacrebleu) of the model's own
  greedy translation, with bootstrap 95% intervals;
- `flagging_auroc`: the AUROC of flagging the worst 10% of those translations by chrF;
- `corruption_auroc`: the AUROC of telling each reference from its corruptions
  (`tfscones.evaluation.corruptions`), per corruption (None where no reference has it) and
  over all of them, over the texts the model reads whole;
- `multiref_wins` (given a multi-reference set): the fraction of sources whose every reference
  has a higher confidence than every corruption of each (the SCONES paper's claim that a
  multi-label head need not split its belief between correct translations).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from tfscones.decoding import score_texts, translate
from tfscones.evaluation.corruptions import corruptions, wins_over_corruptions
from tfscones.evaluation.metrics import sentence_chrf
from tfscones.evaluation.quality_estimation import (
    DROPOUT_PASSES,
    MEASURES,
    auroc,
    correlation,
    flagging_auroc,
    quality_measures,
    signed,
)


def confidence_quality(
    model: Any,
    tokenizer: Any,
    sources: Sequence[str],
    references: Sequence[str],
    multiref: tuple[Sequence[str], Sequence[Sequence[str]]] | None = None,
    passes: int = DROPOUT_PASSES,
    seed: int = 1,
) -> dict:
    """Every figure of the module docstring for one model on one test set, as plain data.

    Args:
        model: A `Seq2SeqTransformer`.
        tokenizer: Its `tfscones.data.Tokenizer`.
        sources: The test sources.
        references: One reference each.
        multiref: Optionally, sources with as many references each (two, say).
        passes: Monte Carlo dropout passes (0 for a model trained without dropout: its two
            dropout measures are left out).
        seed: Seeds the corruptions and the bootstrap.
    """
    translations = translate(model, tokenizer, sources)
    chrf = np.array([sentence_chrf(t, r) for t, r in zip(translations, references, strict=True)])
    own = quality_measures(model, tokenizer, sources, translations, passes)
    names = [name for name in MEASURES if np.isfinite(getattr(own, name)).any()]
    report = {
        "sentences": len(sources),
        "dropout_passes": passes,
        "mean_chrf": float(chrf.mean()),
        "correlation": {
            name: dataclasses.asdict(correlation(signed(own, name), chrf, seed=seed))
            for name in names
        },
        "flagging_auroc": {name: flagging_auroc(signed(own, name), chrf) for name in names},
        "corruption_auroc": _corruption_auroc(
            model, tokenizer, sources, references, names, passes, seed
        ),
    }
    if multiref is not None:
        report["multiref_wins"] = _multiref_wins(model, tokenizer, *multiref, seed)
    return report


def _corruption_auroc(model, tokenizer, sources, references, names, passes, seed) -> dict:
    """Per measure, the AUROC of each corruption against the references, and of all pooled."""
    real = quality_measures(model, tokenizer, sources, references, passes)
    results = {name: {} for name in names}
    pooled = {name: [] for name in names}
    for kind, texts in corruptions(references, seed).items():
        kept = [i for i, text in enumerate(texts) if text is not None]
        corrupted = quality_measures(
            model, tokenizer, [sources[i] for i in kept], [texts[i] for i in kept], passes
        )
        for name in names:
            worse = _scored(signed(corrupted, name))
            better = _scored(signed(real, name)[kept])
            results[name][kind] = auroc(better, worse) if len(better) and len(worse) else None
            pooled[name].append(worse)
    for name in names:
        results[name]["all"] = auroc(_scored(signed(real, name)), np.concatenate(pooled[name]))
    return results


def _scored(values: np.ndarray) -> np.ndarray:
    """The values of the texts the model could score whole (NaN: too long to read)."""
    return values[~np.isnan(values)]


def _multiref_wins(model, tokenizer, sources, references, seed) -> float:
    """`wins_over_corruptions` of the confidences (summed log scores) of a multi-reference set.

    Raises:
        ValueError: If the sources have different numbers of references.
    """
    if len({len(row) for row in references}) != 1:
        raise ValueError("every source of the multi-reference set needs as many references.")
    columns = list(zip(*references, strict=True))
    scores = [score_texts(model, tokenizer, sources, list(column)) for column in columns]
    corrupted = []
    for column in columns:
        by_kind = corruptions(list(column), seed)
        corrupted.append(
            [_scores_or_none(model, tokenizer, sources, texts) for texts in by_kind.values()]
        )
    return wins_over_corruptions(
        [[float(s[i]) for s in scores] for i in range(len(sources))],
        [
            [[kind[i] for kind in corrupted[column]] for column in range(len(columns))]
            for i in range(len(sources))
        ],
    )


def _scores_or_none(model, tokenizer, sources, texts) -> list[float | None]:
    kept = [i for i, text in enumerate(texts) if text is not None]
    scored = score_texts(model, tokenizer, [sources[i] for i in kept], [texts[i] for i in kept])
    values: list[float | None] = [None] * len(texts)
    for i, value in zip(kept, scored, strict=True):
        values[i] = float(value)
    return values
