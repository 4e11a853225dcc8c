"""Tests of the Shen et al. (2019) §4 metrics against values worked out by hand or with sacrebleu.

Toy sentences are single letters separated by spaces, so the 13a tokeniser leaves them alone
and every n-gram count can be read off the strings. Corpus BLEU (sacrebleu's default
exponential smoothing never triggers when every order has a match) is then
100 * BP * (p1 * p2 * p3 * p4) ** (1/4).
"""

import math

import pytest
import sacrebleu
from sacrebleu.metrics import BLEU

from tfscones.evaluation import diversity

SIX = "a b c d e f"  # 6 tokens
OTHER_SIX = "u v w x y z"  # 6 tokens, no word in common with SIX
EIGHT = "a b c d e f g h"

# Realistic sentences for the checks that need sacrebleu to work out the expected value.
REFERENCES = [
    [
        "The cat is sitting on the mat.",
        "A cat sits on the mat.",
        "There is a cat on the rug.",
    ],
    [
        "He reads a book every evening.",
        "Every evening he reads a book.",
        "Each night he is reading a novel.",
    ],
]
HYPOTHESES = [
    [
        "The cat sat on the mat.",
        "A cat is sitting on a mat.",
        "There is a cat on the carpet.",
    ],
    [
        "He reads a book each evening.",
        "Every evening, he is reading a book.",
        "Each night he reads a book.",
    ],
]


def paper_sentence_bleu(hypothesis, reference):
    """Footnote 4 of the paper: +1 on the n-gram counts for n > 1, here straight from sacrebleu."""
    metric = BLEU(smooth_method="add-k", smooth_value=1, effective_order=True)
    return metric.sentence_score(hypothesis, [reference]).score


# pairwise BLEU


def test_pairwise_bleu_identical_hypotheses_is_100():
    assert diversity.pairwise_bleu([[SIX, SIX, SIX], [EIGHT, EIGHT, EIGHT]]) == pytest.approx(100)


def test_pairwise_bleu_disjoint_hypotheses_is_0():
    assert diversity.pairwise_bleu([[SIX, OTHER_SIX], ["p q r", "k l m"]]) == 0.0


def test_pairwise_bleu_one_differing_word():
    # Either ordered pair matches 5/6, 4/5, 3/4, 2/3 n-grams of orders 1-4, lengths equal.
    expected = 100 * (5 / 6 * 4 / 5 * 3 / 4 * 2 / 3) ** 0.25
    assert diversity.pairwise_bleu([[SIX, "a b c d e g"]]) == pytest.approx(expected)


def test_pairwise_bleu_is_one_corpus_bleu_over_all_ordered_pairs():
    # Six ordered pairs: (SIX, SIX) twice match everything, the four with OTHER_SIX nothing, so
    # every order's precision is 1/3. The mean over k of multi-reference BLEU against the other
    # hypotheses would instead be (100 + 100 + 0) / 3.
    score = diversity.pairwise_bleu([[SIX, SIX, OTHER_SIX]])
    assert score == pytest.approx(100 / 3)
    assert score != pytest.approx(200 / 3)


def test_pairwise_bleu_pools_sentences_rather_than_averaging_them():
    # Sentence 1: two identical 6-token hypotheses; sentence 2: two disjoint 4-token ones.
    # Pooled counts: 12/20, 10/16, 8/12, 6/8; the per-sentence mean would be (100 + 0) / 2.
    score = diversity.pairwise_bleu([[SIX, SIX], ["p q r s", "t u v w"]])
    assert score == pytest.approx(100 * (12 / 20 * 10 / 16 * 8 / 12 * 6 / 8) ** 0.25)
    assert score != pytest.approx(50)


# average oracle BLEU


def test_average_oracle_bleu_identical_is_100_and_disjoint_is_0():
    assert diversity.average_oracle_bleu([[OTHER_SIX, SIX]], [[SIX, OTHER_SIX]]) == pytest.approx(
        100
    )
    assert diversity.average_oracle_bleu([["p q r s t"]], [[SIX, OTHER_SIX]]) == 0.0


def test_average_oracle_bleu_uses_the_papers_add_one_sentence_bleu_for_the_argmax():
    hypothesis, short, long = "c g e", "f a c", "g c g e g g"
    # Add-one (footnote 4): vs short 1/3, 1/3, 1/2, 1/1, BP 1 -> (1/18)^(1/4) = 48.5;
    # vs long every order matches, BP exp(1 - 6/3) = 36.8. Exponential smoothing
    # (sacrebleu's sentence_bleu) would prefer the long one.
    assert paper_sentence_bleu(hypothesis, short) == pytest.approx(100 * (1 / 18) ** 0.25)
    assert paper_sentence_bleu(hypothesis, long) == pytest.approx(100 * math.exp(-1))
    exp_smoothed = [sacrebleu.sentence_bleu(hypothesis, [ref]).score for ref in (short, long)]
    assert exp_smoothed[1] > exp_smoothed[0]
    # A second sentence that matches exactly gives every order a count at corpus level.
    score = diversity.average_oracle_bleu([[hypothesis], [EIGHT]], [[long, short], [EIGHT, EIGHT]])
    # Pairs (short, "c g e") and (EIGHT, EIGHT): 9/11, 7/9, 6/7, 5/5; 11 tokens each side.
    assert score == pytest.approx(100 * (9 / 11 * 7 / 9 * 6 / 7) ** 0.25)
    # With the long reference: every precision 1, BP exp(1 - 14/11).
    assert score != pytest.approx(100 * math.exp(1 - 14 / 11))


def test_average_oracle_bleu_takes_the_first_reference_on_ties():
    # "m n o p q r" matches neither reference: the first (6 tokens) is taken, not the 10-token
    # one, so the brevity penalty is 1. Pooled counts with EIGHT: 8/14, 7/12, 6/10, 5/8.
    score = diversity.average_oracle_bleu(
        [["m n o p q r"], [EIGHT]], [[OTHER_SIX, "u v w x y z t i j k"], [EIGHT, EIGHT]]
    )
    assert score == pytest.approx(100 * (8 / 14 * 7 / 12 * 6 / 10 * 5 / 8) ** 0.25)


def test_average_oracle_bleu_matches_sacrebleu_worked_out_here():
    pairs_hypotheses, pairs_references = [], []
    for hyps, refs in zip(HYPOTHESES, REFERENCES, strict=True):
        for hypothesis in hyps:
            scores = [paper_sentence_bleu(hypothesis, reference) for reference in refs]
            pairs_hypotheses.append(hypothesis)
            pairs_references.append(refs[scores.index(max(scores))])
    expected = sacrebleu.corpus_bleu(pairs_hypotheses, [pairs_references]).score
    assert diversity.average_oracle_bleu(HYPOTHESES, REFERENCES) == pytest.approx(expected)
    # The oracle is not the multi-reference BLEU of the same hypotheses.
    flat = [hypothesis for hyps in HYPOTHESES for hypothesis in hyps]
    streams = [[refs[j] for refs in REFERENCES for _ in range(3)] for j in range(3)]
    assert expected != pytest.approx(sacrebleu.corpus_bleu(flat, streams).score)


# #refs covered


def test_references_covered_counts_distinct_best_references_per_sentence():
    # Sentence 1: two hypotheses pick reference 0, one picks reference 2 -> 2 covered.
    # Sentence 2: each hypothesis picks its own reference -> 3 covered. Mean 2.5.
    hypotheses = [[SIX, SIX, "p q r s"], [OTHER_SIX, EIGHT, "k l m"]]
    references = [[SIX, OTHER_SIX, "p q r s"], [EIGHT, "k l m", OTHER_SIX]]
    assert diversity.references_covered(hypotheses, references) == pytest.approx(2.5)


def test_references_covered_breaks_ties_at_random_and_reproducibly():
    # Both references tie for both hypotheses: 1 covered if both draw the same one, else 2.
    hypotheses, references = [[SIX, SIX]], [[SIX, SIX]]
    values = {diversity.references_covered(hypotheses, references, seed=s) for s in range(20)}
    assert values == {1.0, 2.0}
    first = diversity.references_covered(hypotheses, references, seed=7)
    assert diversity.references_covered(hypotheses, references, seed=7) == first


def test_references_covered_matches_sacrebleu_worked_out_here():
    counts = []
    for hyps, refs in zip(HYPOTHESES, REFERENCES, strict=True):
        best = set()
        for hypothesis in hyps:
            scores = [paper_sentence_bleu(hypothesis, reference) for reference in refs]
            assert scores.count(max(scores)) == 1  # no ties, so no randomness
            best.add(scores.index(max(scores)))
        counts.append(len(best))
    expected = sum(counts) / len(counts)
    assert diversity.references_covered(HYPOTHESES, REFERENCES) == pytest.approx(expected)


# human (reference-side) versions


def test_human_pairwise_bleu_is_pairwise_bleu_of_the_references():
    assert diversity.human_pairwise_bleu([[SIX, SIX, OTHER_SIX]]) == pytest.approx(100 / 3)
    assert diversity.human_pairwise_bleu(REFERENCES) == pytest.approx(
        diversity.pairwise_bleu(REFERENCES)
    )


def test_human_oracle_bleu_pairs_each_reference_with_the_best_of_the_rest():
    # y1 = SIX -> best of {OTHER_SIX, SIX} is y3 (match); y2 = OTHER_SIX -> tie at 0, first of
    # the rest (SIX, no match); y3 = SIX -> y1 (match). Counts 12/18, 10/15, 8/12, 6/9, all 2/3.
    # Including y^n itself would give 100; always taking the first of the rest, 100/3.
    score = diversity.human_oracle_bleu([[SIX, OTHER_SIX, SIX]])
    assert score == pytest.approx(200 / 3)


def test_human_oracle_bleu_matches_sacrebleu_worked_out_here():
    held_out, best_of_rest = [], []
    for refs in REFERENCES:
        for n, reference in enumerate(refs):
            rest = [other for j, other in enumerate(refs) if j != n]
            scores = [paper_sentence_bleu(reference, other) for other in rest]
            held_out.append(reference)
            best_of_rest.append(rest[scores.index(max(scores))])
    expected = sacrebleu.corpus_bleu(held_out, [best_of_rest]).score
    assert diversity.human_oracle_bleu(REFERENCES) == pytest.approx(expected)


# the report


def test_diversity_report_equals_the_separate_metrics():
    report = diversity.diversity_report(HYPOTHESES, REFERENCES)
    assert report == diversity.DiversityReport(
        pairwise_bleu=diversity.pairwise_bleu(HYPOTHESES),
        average_oracle_bleu=diversity.average_oracle_bleu(HYPOTHESES, REFERENCES),
        references_covered=diversity.references_covered(HYPOTHESES, REFERENCES),
        human_pairwise_bleu=diversity.human_pairwise_bleu(REFERENCES),
        human_oracle_bleu=diversity.human_oracle_bleu(REFERENCES),
        num_hypotheses=3,
        num_references=3,
    )
    line = report.format()
    assert f"pairwise BLEU {report.pairwise_bleu:.1f} (human " in line
    assert "of 3 (K=3)" in line


def test_diversity_report_with_one_reference_has_no_human_numbers():
    report = diversity.diversity_report([[SIX, OTHER_SIX]], [[SIX]])
    assert report.human_pairwise_bleu is None and report.human_oracle_bleu is None
    assert report.pairwise_bleu == 0.0
    assert report.references_covered == 1.0
    assert "human" not in report.format()


# errors


@pytest.mark.parametrize(
    ("hypotheses", "error", "message"),
    [
        ([], ValueError, "hypotheses is empty"),
        ([[SIX]], ValueError, "pairwise BLEU needs at least 2"),
        ([[SIX, SIX], [SIX]], ValueError, r"hypotheses\[1\] holds 1 translations"),
        ([SIX, SIX], TypeError, r"hypotheses\[0\] is a string"),
        (SIX, TypeError, "not a string"),
        ([[SIX, 3]], TypeError, r"hypotheses\[0\] holds something other than str"),
    ],
)
def test_pairwise_bleu_errors(hypotheses, error, message):
    with pytest.raises(error, match=message):
        diversity.pairwise_bleu(hypotheses)


@pytest.mark.parametrize(
    "metric",
    [diversity.average_oracle_bleu, diversity.references_covered, diversity.diversity_report],
)
@pytest.mark.parametrize(
    ("hypotheses", "references", "message"),
    [
        ([[SIX, SIX]], [], "references is empty"),
        ([[SIX, SIX], [SIX, SIX]], [[SIX]], "hypotheses covers 2 source sentences"),
        ([[SIX, SIX]], [[]], "references holds 0 translation"),
        ([[SIX, SIX], [SIX, SIX]], [[SIX], [SIX, SIX]], r"references\[1\] holds 2"),
        ([[SIX, SIX], [SIX]], [[SIX], [SIX]], r"hypotheses\[1\] holds 1"),
    ],
)
def test_hypotheses_and_references_errors(metric, hypotheses, references, message):
    with pytest.raises(ValueError, match=message):
        metric(hypotheses, references)


def test_diversity_report_needs_two_hypotheses():
    with pytest.raises(ValueError, match="pairwise BLEU needs at least 2"):
        diversity.diversity_report([[SIX], [SIX]], [[SIX], [SIX]])


@pytest.mark.parametrize("metric", [diversity.human_pairwise_bleu, diversity.human_oracle_bleu])
def test_human_metrics_need_two_references(metric):
    with pytest.raises(ValueError, match="references holds 1 translation"):
        metric([[SIX], [OTHER_SIX]])
    with pytest.raises(ValueError, match="references is empty"):
        metric([])
