"""Word and phone error rates, as the SIGMORPHON 2020 grapheme-to-phoneme task scores them.

The shared task (Gorman et al. 2020, its `evaluation/evaluate.py`) splits the gold and the
predicted pronunciation of each word into labels at whitespace, and per language reports

- WER: 100 × the share of words whose labels are not exactly the gold labels;
- PER (the scorer's "LER"): 100 × the summed Levenshtein distances between predicted and gold
  labels (unit cost insertions, deletions and substitutions) / the summed gold label counts;

and the task's figure is the mean of each over the languages (a macro average), as in Peters &
Martins 2021, Table 1. The edit distance is rapidfuzz's, over label sequences (a phone such as
`d͡z` or `aː` is one label, whatever its code points).

Example:
```python
rates = error_rates(["a b c", "x y"], ["a b c", "x z"])
rates.wer, rates.per  # 50.0, 20.0: one word of two wrong; one edit over 5 gold labels
```
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from rapidfuzz.distance import Levenshtein


@dataclasses.dataclass(frozen=True)
class ErrorRates:
    """The error rates of a set of words, in percent.

    Attributes:
        words: How many words were scored (for a macro average: all languages' words).
        wer: Word error rate: the share of words not exactly right.
        per: Phone error rate: label edits over gold labels (for a macro average: the mean of
            the languages' rates).
    """

    words: int
    wer: float
    per: float

    def is_finite(self) -> bool:
        """Whether both rates are numbers (not NaN or infinite)."""
        return math.isfinite(self.wer) and math.isfinite(self.per)


def labels(pronunciation: str) -> list[str]:
    """A pronunciation's labels: its whitespace-separated symbols."""
    return pronunciation.split()


def error_rates(hypotheses: Sequence[str], references: Sequence[str]) -> ErrorRates:
    """WER and PER of predicted pronunciations against gold ones (one language's words).

    Args:
        hypotheses: Predicted pronunciations, labels separated by spaces.
        references: The gold pronunciations, aligned with `hypotheses`.

    Raises:
        ValueError: If the two differ in length, there are no words, or the gold
            pronunciations hold no label at all (PER would divide by zero).
    """
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses for {len(references)} references: they must align"
        )
    if not references:
        raise ValueError("no words to score")
    wrong = edits = gold_labels = 0
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        gold = labels(reference)
        distance = Levenshtein.distance(labels(hypothesis), gold)
        wrong += distance > 0
        edits += distance
        gold_labels += len(gold)
    if not gold_labels:
        raise ValueError("the references hold no labels: PER is undefined")
    return ErrorRates(len(references), 100.0 * wrong / len(references), 100.0 * edits / gold_labels)


def error_rates_by_language(
    hypotheses: Sequence[str], references: Sequence[str], languages: Sequence[str]
) -> dict[str, ErrorRates]:
    """`error_rates` of each language's words, languages in sorted order.

    Args:
        hypotheses: Predicted pronunciations.
        references: Gold pronunciations, aligned.
        languages: Each word's language, aligned.

    Raises:
        ValueError: If the three differ in length, or as `error_rates` for a language.
    """
    if not len(hypotheses) == len(references) == len(languages):
        raise ValueError(
            f"{len(hypotheses)} hypotheses, {len(references)} references and "
            f"{len(languages)} languages: they must align"
        )
    words: dict[str, tuple[list[str], list[str]]] = {}
    for hypothesis, reference, language in zip(hypotheses, references, languages, strict=True):
        pair = words.setdefault(language, ([], []))
        pair[0].append(hypothesis)
        pair[1].append(reference)
    return {language: error_rates(*words[language]) for language in sorted(words)}


def macro_average(by_language: Mapping[str, ErrorRates]) -> ErrorRates:
    """The mean of the languages' WER and PER (the shared task's figure), all words counted.

    Raises:
        ValueError: If there is no language.
    """
    if not by_language:
        raise ValueError("no language to average")
    rates = list(by_language.values())
    return ErrorRates(
        words=sum(rate.words for rate in rates),
        wer=sum(rate.wer for rate in rates) / len(rates),
        per=sum(rate.per for rate in rates) / len(rates),
    )
