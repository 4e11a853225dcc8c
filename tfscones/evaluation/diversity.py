"""Quality and diversity of a set of translations: the metrics of Shen et al. (2019), §4.

"Mixture Models for Diverse Machine Translation: Tricks of the Trade" (Shen et al. 2019) scores K
hypotheses {ŷ^1, ..., ŷ^K} of every source sentence x against its N references
{y^1, ..., y^N} with three numbers (its Table 1), each built on BLEU(u, v) of "an ordered
sentence pair (u, v), where u is the reference and v is the hypothesis":

- average oracle BLEU (quality: higher is better), `average_oracle_bleu`;
- reference coverage, "#refs covered" (higher is more diverse), `references_covered`;
- pairwise BLEU (similarity: lower is more diverse), `pairwise_bleu`;

and the same numbers for the references themselves, "human" pairwise BLEU and a leave-one-out
"human" oracle BLEU (`human_pairwise_bleu`, `human_oracle_bleu`). `diversity_report` computes
them all for one evaluation table row.

Every BLEU here is sacrebleu's, never reimplemented. Corpus-level numbers are
`metrics.corpus_bleu` (13a tokenisation, one reference per segment), so they carry the
signature `metrics.bleu_signature(1)`. Sentence-level BLEU, which only chooses the
best-matching reference, follows the paper's footnote 4, "smoothed n-gram counts (+1) for
n > 1": sacrebleu's `smooth_method="add-k"` with `smooth_value=1` (Chen & Cherry 2014, method
2), not the exponential smoothing of `metrics.sentence_bleu`.

Inputs are nested lists: `hypotheses[i]` holds the K hypotheses of source sentence i and
`references[i]` its N references; K (and N) must be the same for every sentence.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU

from tfscones.evaluation.metrics import BLEU_TOKENIZER, corpus_bleu

_ORACLE_SENTENCE_BLEU = BLEU(
    tokenize=BLEU_TOKENIZER, smooth_method="add-k", smooth_value=1.0, effective_order=True
)


def _translation_sets(
    sets: Sequence[Sequence[str]], name: str, minimum: int, purpose: str
) -> list[list[str]]:
    """`sets` as lists of strings, one list per source sentence, all of the same size.

    Raises:
        TypeError: If `sets`, one of its lists, or an element of one is not what it should be.
        ValueError: If `sets` is empty, its lists differ in size, or they hold fewer than
            `minimum` translations.
    """
    if isinstance(sets, str):
        raise TypeError(f"{name} must be a list of lists of strings, not a string.")
    sets = list(sets)
    if not sets:
        raise ValueError(f"{name} is empty: there are no source sentences to score.")
    for i, translations in enumerate(sets):
        if isinstance(translations, str):
            raise TypeError(
                f"{name}[{i}] is a string; it must be the list of translations of sentence {i}."
            )
        if not all(isinstance(translation, str) for translation in translations):
            raise TypeError(f"{name}[{i}] holds something other than str.")
    sets = [list(translations) for translations in sets]
    size = len(sets[0])
    for i, translations in enumerate(sets):
        if len(translations) != size:
            raise ValueError(
                f"{name}[{i}] holds {len(translations)} translations but {name}[0] holds "
                f"{size}; every source sentence needs the same number."
            )
    if size < minimum:
        raise ValueError(
            f"{name} holds {size} translation(s) per sentence; {purpose} needs at least {minimum}."
        )
    return sets


def _hypotheses_and_references(
    hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]], purpose: str
) -> tuple[list[list[str]], list[list[str]]]:
    """Both nested lists, checked, for the metrics that compare hypotheses with references.

    Raises:
        TypeError: As `_translation_sets`.
        ValueError: As `_translation_sets`, or if they cover different numbers of sentences.
    """
    hypotheses = _translation_sets(hypotheses, "hypotheses", 1, purpose)
    references = _translation_sets(references, "references", 1, purpose)
    if len(hypotheses) != len(references):
        raise ValueError(
            f"hypotheses covers {len(hypotheses)} source sentences but references covers "
            f"{len(references)}."
        )
    return hypotheses, references


def _oracle_sentence_bleu(hypothesis: str, reference: str) -> float:
    """BLEU(u, v) of footnote 4: sentence BLEU with +1 on the counts of n-grams, n > 1."""
    return _ORACLE_SENTENCE_BLEU.sentence_score(hypothesis, [reference]).score


def _first_argmax(scores: Sequence[float]) -> int:
    """The index of the highest score; the first such index on ties (as `numpy.argmax`)."""
    return max(range(len(scores)), key=scores.__getitem__)


def _score_table(
    hypotheses: list[list[str]], references: list[list[str]]
) -> list[list[list[float]]]:
    """`table[i][k][j]` = BLEU(y^j, ŷ^k) of sentence i, at sentence level."""
    return [
        [[_oracle_sentence_bleu(hypothesis, ref) for ref in refs] for hypothesis in hyps]
        for hyps, refs in zip(hypotheses, references, strict=True)
    ]


def _pairwise(sets: list[list[str]]) -> float:
    """Corpus BLEU of every ordered pair (ŷ^j as reference, ŷ^k as hypothesis), j ≠ k."""
    pair_hypotheses, pair_references = [], []
    for translations in sets:
        for j, reference in enumerate(translations):
            for k, hypothesis in enumerate(translations):
                if k != j:
                    pair_hypotheses.append(hypothesis)
                    pair_references.append(reference)
    return corpus_bleu(pair_hypotheses, pair_references).score


def _oracle_from_table(
    hypotheses: list[list[str]], references: list[list[str]], table: list[list[list[float]]]
) -> float:
    """Corpus BLEU of every hypothesis paired with its best reference, a_k = argmax_j."""
    oracle_references = [
        refs[_first_argmax(row)]
        for refs, rows in zip(references, table, strict=True)
        for row in rows
    ]
    flat_hypotheses = [hypothesis for hyps in hypotheses for hypothesis in hyps]
    return corpus_bleu(flat_hypotheses, oracle_references).score


def _coverage_from_table(table: list[list[list[float]]], rng: random.Random) -> float:
    """Mean over sentences of the number of distinct best-matching references (random ties)."""
    covered = 0
    for rows in table:
        matched = set()
        for row in rows:
            best = max(row)
            matched.add(rng.choice([j for j, score in enumerate(row) if score == best]))
        covered += len(matched)
    return covered / len(table)


def pairwise_bleu(hypotheses: Sequence[Sequence[str]]) -> float:
    r"""Pairwise BLEU of Shen et al. (2019), §4: how alike the K hypotheses of a sentence are.

    The paper: "We compare all hypotheses against each other, and compute the corpus-level
    BLEU of {(ŷ^j, ŷ^k)}_{x ∈ data, j ∈ [K], k ∈ [K] \ j}". So this is one corpus BLEU over
    K(K-1) segments per source sentence, each an ordered pair with ŷ^j as the single reference
    and ŷ^k as the hypothesis (as fairseq's examples/translation_moe/score.py `pairwise`
    does); it is not the mean over k of a multi-reference BLEU of ŷ^k against the other K-1
    hypotheses. "The more diverse the hypothesis set, the lower the pairwise BLEU."

    Example:
    >>> round(pairwise_bleu([["a b c d e", "a b c d e"]]), 1)
    100.0

    Args:
        hypotheses: `hypotheses[i]` is the list of K detokenised translations of source
            sentence i; K is the same for every sentence.

    Returns:
        Pairwise BLEU, 0-100: lower is more diverse.

    Raises:
        ValueError: If `hypotheses` is empty, its sentences hold different numbers of
            hypotheses, or fewer than 2.
        TypeError: If it is not a list of lists of strings.
    """
    return _pairwise(_translation_sets(hypotheses, "hypotheses", 2, "pairwise BLEU"))


def average_oracle_bleu(
    hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]]
) -> float:
    """Average oracle BLEU of Shen et al. (2019), §4: the quality of a set of hypotheses.

    The paper: "We pair each hypothesis ŷ^k with its best matching human reference that gives
    the highest sentence-level BLEU: a_k = argmax_j BLEU(y^j, ŷ^k). Then we compute the
    corpus-level BLEU of {(y^{a_k}, ŷ^k)}_{x ∈ data, k ∈ [K]}." One corpus BLEU over all
    sentences and all K hypotheses (nothing is averaged over k: "average" is the paper's
    name). Sentence-level BLEU is smoothed as footnote 4 says, "+1 for n > 1" (sacrebleu's
    add-k with k = 1); on ties the first best reference is taken (fairseq's `np.argmax`).

    Args:
        hypotheses: `hypotheses[i]` is the list of K detokenised translations of source
            sentence i.
        references: `references[i]` is the list of N references of source sentence i.

    Returns:
        Average oracle BLEU, 0-100: higher is better.

    Raises:
        ValueError: If either is empty, they cover different numbers of sentences, or the
            sentences of one hold different numbers of translations.
        TypeError: If either is not a list of lists of strings.
    """
    hypotheses, references = _hypotheses_and_references(
        hypotheses, references, "average oracle BLEU"
    )
    return _oracle_from_table(hypotheses, references, _score_table(hypotheses, references))


def references_covered(
    hypotheses: Sequence[Sequence[str]],
    references: Sequence[Sequence[str]],
    seed: int | None = 0,
) -> float:
    """Reference coverage ("#refs covered") of Shen et al. (2019), §4.

    The paper: "We pair each hypothesis to its best matching reference (breaking ties
    randomly), count how many distinct references are matched to at least one hypothesis, and
    average this count over all sentences in the test set." Best matching is by the sentence
    BLEU of `average_oracle_bleu`. The result is a count between 1 and min(K, N), not a
    fraction.

    Args:
        hypotheses: `hypotheses[i]` is the list of K detokenised translations of source
            sentence i.
        references: `references[i]` is the list of N references of source sentence i.
        seed: Seed of the random tie-breaking; `None` draws a fresh one on each call.

    Returns:
        The mean number of references covered per sentence: higher is more diverse.

    Raises:
        ValueError: If either is empty, they cover different numbers of sentences, or the
            sentences of one hold different numbers of translations.
        TypeError: If either is not a list of lists of strings.
    """
    hypotheses, references = _hypotheses_and_references(hypotheses, references, "#refs covered")
    return _coverage_from_table(_score_table(hypotheses, references), random.Random(seed))


def human_pairwise_bleu(references: Sequence[Sequence[str]]) -> float:
    """Pairwise BLEU of the references themselves, Shen et al. (2019), §4 ("Human" row).

    `pairwise_bleu` with the N references of each sentence as its hypothesis set: "we compute
    the average oracle BLEU and pairwise BLEU of human translations for comparison". "Ideally,
    we would like a model with pairwise BLEU matching human pairwise BLEU."

    Args:
        references: `references[i]` is the list of N references of source sentence i.

    Returns:
        Human pairwise BLEU, 0-100.

    Raises:
        ValueError: If `references` is empty, its sentences hold different numbers of
            references, or fewer than 2.
        TypeError: If it is not a list of lists of strings.
    """
    return _pairwise(_translation_sets(references, "references", 2, "human pairwise BLEU"))


def human_oracle_bleu(references: Sequence[Sequence[str]]) -> float:
    """Leave-one-out average oracle BLEU of the references, Shen et al. (2019), §4.

    The paper: "The average oracle BLEU is computed in a leave-one-out manner. Namely, each
    y^n is paired with the best of the rest: b_n = argmax_{j≠n} BLEU(y^j, y^n), and we compute
    the corpus-level BLEU of {(y^{b_n}, y^n)}_{x ∈ data, n ∈ [N]}." Sentence BLEU and ties as
    in `average_oracle_bleu`. Its footnote 5: the human score "is slightly underestimated in
    this manner, as each reference is evaluated against other N - 1 references".

    Args:
        references: `references[i]` is the list of N references of source sentence i.

    Returns:
        Human average oracle BLEU, 0-100.

    Raises:
        ValueError: If `references` is empty, its sentences hold different numbers of
            references, or fewer than 2.
        TypeError: If it is not a list of lists of strings.
    """
    references = _translation_sets(references, "references", 2, "human oracle BLEU")
    held_out, best_of_rest = [], []
    for refs in references:
        for n, reference in enumerate(refs):
            rest = refs[:n] + refs[n + 1 :]
            scores = [_oracle_sentence_bleu(reference, other) for other in rest]
            held_out.append(reference)
            best_of_rest.append(rest[_first_argmax(scores)])
    return corpus_bleu(held_out, best_of_rest).score


@dataclass(frozen=True)
class DiversityReport:
    """The quality and diversity numbers of Shen et al. (2019), Table 1, for one system.

    Attributes:
        pairwise_bleu: `pairwise_bleu` of the hypotheses (lower is more diverse).
        average_oracle_bleu: `average_oracle_bleu` (higher is better).
        references_covered: `references_covered`, "#refs covered" (out of `num_references`).
        human_pairwise_bleu: `human_pairwise_bleu`; `None` with one reference per sentence.
        human_oracle_bleu: `human_oracle_bleu`; `None` with one reference per sentence.
        num_hypotheses: K, hypotheses per source sentence.
        num_references: N, references per source sentence.
    """

    pairwise_bleu: float
    average_oracle_bleu: float
    references_covered: float
    human_pairwise_bleu: float | None
    human_oracle_bleu: float | None
    num_hypotheses: int
    num_references: int

    def format(self) -> str:
        """One line for a results table, human numbers in parentheses where there are any."""

        def human(value: float | None) -> str:
            return "" if value is None else f" (human {value:.1f})"

        return (
            f"pairwise BLEU {self.pairwise_bleu:.1f}{human(self.human_pairwise_bleu)} | "
            f"avg oracle BLEU {self.average_oracle_bleu:.1f}{human(self.human_oracle_bleu)} | "
            f"#refs covered {self.references_covered:.1f} of {self.num_references} "
            f"(K={self.num_hypotheses})"
        )


def diversity_report(
    hypotheses: Sequence[Sequence[str]],
    references: Sequence[Sequence[str]],
    seed: int | None = 0,
) -> DiversityReport:
    """All the §4 metrics of Shen et al. (2019) for one system, sentence BLEU computed once.

    Args:
        hypotheses: `hypotheses[i]` is the list of K ≥ 2 detokenised translations of source
            sentence i.
        references: `references[i]` is the list of N references of source sentence i; with
            N = 1 the human numbers are `None`.
        seed: Seed of the tie-breaking of `references_covered`.

    Returns:
        A `DiversityReport`.

    Raises:
        ValueError: As `pairwise_bleu` and `average_oracle_bleu`.
        TypeError: If either is not a list of lists of strings.
    """
    hypotheses, references = _hypotheses_and_references(hypotheses, references, "diversity_report")
    table = _score_table(hypotheses, references)
    with_humans = len(references[0]) >= 2
    return DiversityReport(
        pairwise_bleu=pairwise_bleu(hypotheses),
        average_oracle_bleu=_oracle_from_table(hypotheses, references, table),
        references_covered=_coverage_from_table(table, random.Random(seed)),
        human_pairwise_bleu=human_pairwise_bleu(references) if with_humans else None,
        human_oracle_bleu=human_oracle_bleu(references) if with_humans else None,
        num_hypotheses=len(hypotheses[0]),
        num_references=len(references[0]),
    )


__all__ = [
    "DiversityReport",
    "average_oracle_bleu",
    "diversity_report",
    "human_oracle_bleu",
    "human_pairwise_bleu",
    "pairwise_bleu",
    "references_covered",
]
