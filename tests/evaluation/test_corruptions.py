"""Corrupted references: each corruption changes what it says, and the multi-reference count."""

import numpy as np
import pytest

from tfscones.evaluation.corruptions import (
    corruptions,
    two_words_swapped,
    wins_over_corruptions,
    without_a_content_word,
)

REFERENCES = ["A man rides a horse.", "Two dogs play.", "Hello", "a a a", "the cat sat on the mat"]


def test_each_reference_gets_three_seeded_corruptions_or_none():
    corrupted = corruptions(REFERENCES, seed=3)
    others = corrupted["other_reference"]
    assert sorted(others) == sorted(REFERENCES)
    assert all(other != mine for other, mine in zip(others, REFERENCES, strict=True))
    for original, dropped in zip(REFERENCES, corrupted["without_a_content_word"], strict=True):
        if dropped is not None:
            kept = dropped.split()
            assert len(kept) == len(original.split()) - 1
            (gone,) = set(original.split()) - set(kept) or {None}
            assert gone is None or len(gone) >= 4
    assert corrupted["without_a_content_word"][2] is None  # one word
    assert corrupted["without_a_content_word"][3] is None  # no content word
    assert corrupted["two_words_swapped"][3] is None  # no two different words
    swapped = corrupted["two_words_swapped"][1].split()
    assert sorted(swapped) == sorted(REFERENCES[1].split()) and swapped != REFERENCES[1].split()
    assert corruptions(REFERENCES, seed=3) == corrupted
    with pytest.raises(ValueError, match="2 references"):
        corruptions(["one"])


def test_the_content_word_and_the_swap_by_hand():
    rng = np.random.default_rng(0)
    assert without_a_content_word("on the mat", rng) is None  # no word of 4 characters
    assert without_a_content_word("the horse", rng) == "the"
    assert two_words_swapped("dog bites man", rng) in {
        "bites dog man",
        "man bites dog",
        "dog man bites",
    }


def test_a_source_wins_only_if_its_worst_reference_beats_every_corruption():
    references = [[-1.0, -2.0], [-1.0, -2.0], [-0.5]]
    corrupted = [
        [[-3.0, None, -2.5], [-4.0, -3.0, -2.1]],  # -2.0 beats all
        [[-3.0, -1.5, -4.0], [-4.0, -3.0, -5.0]],  # -1.5 beats the second reference
        [[None, None, None]],  # nothing to beat
    ]
    assert wins_over_corruptions(references, corrupted) == pytest.approx(2 / 3)
