"""The dev scores that choose a run's kept model: one per task, named by the config.

`training.selection_metric` names one of `METRICS`. Each scores a dev set's greedy
hypotheses against its references and returns every figure of its family (BLEU alone; WER and
PER together), the named one choosing the model:

- `bleu`, `chrf`: sacrebleu's corpus scores (`tfscones.evaluation.metrics`), higher is better;
- `per`, `wer`: the SIGMORPHON 2020 G2P task's rates, macro-averaged over the words' languages
  (`tfscones.evaluation.phone_errors`), lower is better; the entmax paper chooses its G2P
  checkpoints by dev PER (Peters & Martins 2021, §4.1).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from tfscones.evaluation import metrics
from tfscones.evaluation.phone_errors import error_rates_by_language, macro_average


@dataclasses.dataclass(frozen=True)
class SelectionMetric:
    """A dev score and which way is better.

    Attributes:
        name: The figure that chooses (`bleu`, `chrf`, `per`, `wer`).
        label: How a reader calls it (`BLEU`, `PER`).
        decimals: The decimals it is shown with.
        higher_is_better: Whether a larger figure is a better model.
        compute: `compute(hypotheses, references, languages)`: every figure of the family.
    """

    name: str
    label: str
    decimals: int
    higher_is_better: bool
    compute: Callable[..., dict[str, float]]
    report: Callable[..., dict]

    def score(
        self,
        hypotheses: Sequence[str],
        references: Sequence[str] | Sequence[Sequence[str]],
        languages: Sequence[str | None] | None = None,
    ) -> dict[str, float]:
        """Every figure of the family, the chosen one (`name`) among them.

        Args:
            hypotheses: The model's outputs.
            references: One reference stream (or, for BLEU and chrF, several).
            languages: Each hypothesis's language, for a macro average (None: one group).
        """
        return self.compute(hypotheses, references, languages)

    def test_report(
        self,
        hypotheses: Sequence[str],
        references: Sequence[str],
        languages: Sequence[str | None] | None = None,
    ) -> dict:
        """What a run's `results.json` says of its test set: the family's figures, `test_*`.

        BLEU and chrF with sacrebleu's signature; or macro WER and PER with each language's.
        """
        return self.report(hypotheses, references, languages)

    def shown(self, score: float) -> str:
        """`score` with the metric's label and decimals: `dev PER 3.81` reads `PER 3.81`."""
        return f"{self.label} {score:.{self.decimals}f}"

    @property
    def worst(self) -> float:
        """A score every finite one beats: where a run without a dev score starts."""
        return -math.inf if self.higher_is_better else math.inf

    def is_better(self, score: float, best: float) -> bool:
        """Whether `score` beats `best` (a NaN never does)."""
        if not math.isfinite(score):
            return False
        return score > best if self.higher_is_better else score < best

    def best_of(self, scores: Sequence[float]) -> float:
        """The best of `scores` (NaNs ignored), `worst` if none."""
        best = self.worst
        for score in scores:
            if self.is_better(score, best):
                best = score
        return best


def _bleu(hypotheses, references, languages) -> dict[str, float]:
    del languages
    return {"bleu": metrics.corpus_bleu(hypotheses, references).score}


def _chrf(hypotheses, references, languages) -> dict[str, float]:
    del languages
    return {"chrf": metrics.corpus_chrf(hypotheses, references).score}


def _error_rates(hypotheses, references, languages) -> dict[str, float]:
    report = _error_rate_report(hypotheses, references, languages)
    return {"wer": report["test_wer"], "per": report["test_per"]}


def _translation_report(hypotheses, references, languages) -> dict:
    del languages
    return {
        "test_bleu": metrics.corpus_bleu(hypotheses, references).score,
        "test_chrf": metrics.corpus_chrf(hypotheses, references).score,
        "bleu_signature": metrics.bleu_signature(),
    }


def _error_rate_report(hypotheses, references, languages) -> dict:
    groups = [None] * len(hypotheses) if languages is None else list(languages)
    by_language = error_rates_by_language(
        hypotheses, references, ["" if language is None else language for language in groups]
    )
    macro = macro_average(by_language)
    return {
        "test_wer": macro.wer,
        "test_per": macro.per,
        "test_by_language": {
            language: dataclasses.asdict(rates) for language, rates in by_language.items()
        },
    }


METRICS = {
    "bleu": SelectionMetric("bleu", "BLEU", 1, True, _bleu, _translation_report),
    "chrf": SelectionMetric("chrf", "chrF", 1, True, _chrf, _translation_report),
    "per": SelectionMetric("per", "PER", 2, False, _error_rates, _error_rate_report),
    "wer": SelectionMetric("wer", "WER", 2, False, _error_rates, _error_rate_report),
}


def selection_metric(name: str) -> SelectionMetric:
    """The metric called `name`.

    Raises:
        ValueError: If there is none, naming the allowed ones.
    """
    if name not in METRICS:
        raise ValueError(f"unknown selection metric {name!r}; allowed: {', '.join(METRICS)}")
    return METRICS[name]
