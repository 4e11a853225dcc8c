"""Corrupted references: translations known to be worse, to test what a confidence tells apart.

Each reference gets three corruptions, all seeded:

- `other_reference`: another sentence's reference (fluent, but of another source);
- `without_a_content_word`: the reference with one content word removed (a word of 4 or more
  characters with a letter, so articles, short particles and punctuation stay);
- `two_words_swapped`: the reference with two different words swapped.

A reference too short for a corruption (one word; no content word among several) gets None for
it, never an unchanged copy. `wins_over_corruptions` counts how often every reference of a
source outscores every corruption of each: the SCONES paper's claim that a multi-label head
need not split its belief between correct translations (Stahlberg & Kumar 2022, §1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CORRUPTIONS = ("other_reference", "without_a_content_word", "two_words_swapped")
CONTENT_WORD_LENGTH = 4


def corruptions(references: Sequence[str], seed: int = 1) -> dict[str, list[str | None]]:
    """The three corruptions of every reference, by name (`CORRUPTIONS`), in order.

    Raises:
        ValueError: If there are fewer than 2 references (no other reference to take).
    """
    if len(references) < 2:
        raise ValueError("corruptions need 2 references at least (one is another's).")
    rng = np.random.default_rng(seed)
    shift = rng.integers(1, len(references))
    return {
        "other_reference": [
            references[(i + shift) % len(references)] for i in range(len(references))
        ],
        "without_a_content_word": [without_a_content_word(r, rng) for r in references],
        "two_words_swapped": [two_words_swapped(r, rng) for r in references],
    }


def is_content_word(word: str) -> bool:
    """Whether a whitespace word counts as a content word here (4+ characters, a letter)."""
    return len(word) >= CONTENT_WORD_LENGTH and any(character.isalpha() for character in word)


def without_a_content_word(reference: str, rng: np.random.Generator) -> str | None:
    """The reference with one of its content words removed; None if it has none or one word."""
    words = reference.split()
    candidates = [i for i, word in enumerate(words) if is_content_word(word)]
    if len(words) < 2 or not candidates:
        return None
    drop = candidates[rng.integers(len(candidates))]
    return " ".join(word for i, word in enumerate(words) if i != drop)


def two_words_swapped(reference: str, rng: np.random.Generator) -> str | None:
    """The reference with two different words swapped; None if it has no two different words."""
    words = reference.split()
    if len(set(words)) < 2:
        return None
    while True:
        first, second = rng.choice(len(words), size=2, replace=False)
        if words[first] != words[second]:
            break
    words[first], words[second] = words[second], words[first]
    return " ".join(words)


def wins_over_corruptions(
    reference_scores: Sequence[Sequence[float]],
    corruption_scores: Sequence[Sequence[Sequence[float | None]]],
) -> float:
    """The fraction of sources whose every reference outscores every corruption of each.

    Args:
        reference_scores: Per source, the score of each of its references.
        corruption_scores: Per source, per reference, the score of each of its corruptions
            (None for one it has not).

    Raises:
        ValueError: If there are no sources, or the two differ in sources or references.
    """
    if not reference_scores or len(reference_scores) != len(corruption_scores):
        raise ValueError("one row of corruption scores a source, and some sources, are needed.")
    wins = 0
    for references, corrupted in zip(reference_scores, corruption_scores, strict=True):
        if len(references) != len(corrupted):
            raise ValueError("one list of corruption scores a reference is needed.")
        worst_reference = min(references)
        rivals = [score for scores in corrupted for score in scores if score is not None]
        wins += all(worst_reference > rival for rival in rivals)
    return wins / len(reference_scores)
