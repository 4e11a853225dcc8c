"""The metrics that choose a run's kept model: which way is better, every figure of a family."""

import math

import pytest

from tfscones.evaluation.selection import METRICS, selection_metric


def test_bleu_is_better_higher_and_per_lower_and_nan_never_better():
    bleu, per = selection_metric("bleu"), selection_metric("per")
    assert bleu.is_better(30.0, 29.0) and not bleu.is_better(29.0, 30.0)
    assert per.is_better(2.0, 3.0) and not per.is_better(3.0, 2.0)
    assert not per.is_better(math.nan, per.worst) and not bleu.is_better(math.nan, bleu.worst)
    assert per.best_of([3.1, math.nan, 2.9, 3.0]) == 2.9
    assert bleu.best_of([]) == -math.inf and per.best_of([]) == math.inf


def test_error_rates_are_macro_averaged_over_the_given_languages():
    hypotheses, references = ["a", "b c", "d"], ["x", "b c", "d"]
    figures = selection_metric("per").score(hypotheses, references, ["fre", "kor", "kor"])
    assert figures == {"wer": 50.0, "per": 50.0}  # fre 100 / 100, kor 0 / 0
    pooled = selection_metric("wer").score(hypotheses, references)
    assert pooled == {"wer": pytest.approx(100 / 3), "per": pytest.approx(25.0)}


def test_the_test_report_of_g2p_holds_each_language_and_translation_its_signature():
    report = METRICS["per"].test_report(["a", "b"], ["a", "c"], ["fre", "kor"])
    assert report["test_wer"] == 50.0 and report["test_per"] == 50.0
    assert report["test_by_language"] == {
        "fre": {"words": 1, "wer": 0.0, "per": 0.0},
        "kor": {"words": 1, "wer": 100.0, "per": 100.0},
    }
    translation = METRICS["bleu"].test_report(["a b c d"], ["a b c d"])
    assert translation["test_bleu"] == pytest.approx(100.0)
    assert set(translation) == {"test_bleu", "test_chrf", "bleu_signature"}


def test_an_unknown_metric_names_the_allowed_ones():
    with pytest.raises(ValueError, match="unknown selection metric 'ter'; allowed: bleu, chrf"):
        selection_metric("ter")
