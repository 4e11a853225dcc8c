"""WER and PER as the SIGMORPHON 2020 G2P scorer computes them, on hand-counted cases."""

import pytest

from tfscones.evaluation.phone_errors import (
    ErrorRates,
    error_rates,
    error_rates_by_language,
    macro_average,
)


@pytest.mark.parametrize(
    ("hypothesis", "reference", "edits"),
    [
        ("a b ɑ̃ d ɔ n e", "a b ɑ̃ d ɔ n e", 0),
        ("a b ɑ̃ d o n e", "a b ɑ̃ d ɔ n e", 1),  # one substitution
        ("a b", "a b c", 1),  # one deletion
        ("a b c d", "a b c", 1),  # one insertion
        ("b a", "a b", 2),  # Levenshtein, not Damerau: a swap is two edits
        ("", "a b c", 3),  # an empty prediction misses every label
        ("d z", "d͡z", 2),  # a phone of several code points is one label
        ("a̠  m", "a̠ m", 0),  # labels split at whitespace runs, as the scorer splits them
    ],
)
def test_the_edits_of_one_word_are_its_label_levenshtein_distance(hypothesis, reference, edits):
    rates = error_rates([hypothesis], [reference])
    assert rates.per == pytest.approx(100.0 * edits / len(reference.split()))
    assert rates.wer == (100.0 if edits else 0.0)


def test_per_divides_the_summed_edits_by_the_summed_gold_labels():
    hypotheses = ["a b ɑ̃ d o n e", "k a̠ m", "x"]
    references = ["a b ɑ̃ d ɔ n e", "k a̠ m", "y z"]
    rates = error_rates(hypotheses, references)
    # 1 + 0 + 2 edits over 7 + 3 + 2 gold labels; a mean of per-word rates would be 38.1.
    assert rates == ErrorRates(words=3, wer=pytest.approx(200 / 3), per=pytest.approx(25.0))


def test_the_task_figure_is_the_mean_over_languages_not_over_words():
    by_language = error_rates_by_language(
        ["a", "b c", "d", "e"], ["x", "b c", "d", "e"], ["fre", "kor", "kor", "kor"]
    )
    assert list(by_language) == ["fre", "kor"]
    assert by_language["fre"] == ErrorRates(1, 100.0, 100.0)
    assert by_language["kor"] == ErrorRates(3, 0.0, 0.0)
    assert macro_average(by_language) == ErrorRates(4, 50.0, 50.0)  # over words: 25 and 20


@pytest.mark.parametrize(
    ("hypotheses", "references", "message"),
    [
        (["a"], ["a", "b"], "1 hypotheses for 2 references"),
        ([], [], "no words"),
        ([""], [" "], "no labels"),
    ],
)
def test_inputs_that_cannot_be_scored_are_refused(hypotheses, references, message):
    with pytest.raises(ValueError, match=message):
        error_rates(hypotheses, references)


def test_a_language_list_of_another_length_and_an_empty_average_are_refused():
    with pytest.raises(ValueError, match="2 hypotheses, 2 references and 1 languages"):
        error_rates_by_language(["a", "b"], ["a", "b"], ["fre"])
    with pytest.raises(ValueError, match="no language"):
        macro_average({})
