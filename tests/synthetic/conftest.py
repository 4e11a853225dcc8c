"""Toy corpora and an estimated IBM-3 model shared by the tfscones.synthetic tests."""

import random

import pytest

from tfscones import synthetic


def ambiguous_pairs(count: int = 1500, seed: int = 0) -> list[tuple[str, str]]:
    """A toy pair with known IBM-3-like structure: 30 source words, each translated to one of
    three words (probabilities 0.7/0.2/0.1) with fertility 0, 1 or 2 (0.05/0.9/0.05), and
    neighbouring target words swapped with probability 0.15."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        source = [f"s{k}" for k in rng.choices(range(30), k=rng.randint(2, 7))]
        target = []
        for word in source:
            draw = rng.random()
            fertility = 0 if draw < 0.05 else 2 if draw < 0.1 else 1
            options = [f"t{word[1:]}{suffix}" for suffix in "abc"]
            target += rng.choices(options, weights=[0.7, 0.2, 0.1], k=fertility)
        for j in range(len(target) - 1):
            if rng.random() < 0.15:
                target[j], target[j + 1] = target[j + 1], target[j]
        pairs.append((" ".join(source), " ".join(target or ["none"])))
    return pairs


def word_for_word(source: str) -> str:
    """The translation of the word-for-word toy pair: source word wK becomes vK."""
    return " ".join("v" + word[1:] for word in source.split())


@pytest.fixture(scope="session")
def pairs():
    return ambiguous_pairs()


@pytest.fixture(scope="session")
def model(pairs):
    return synthetic.estimate_ibm3(
        [s for s, _ in pairs], [t for _, t in pairs], synthetic.EstimationOptions(em_iterations=10)
    )


@pytest.fixture(scope="session")
def word_for_word_pairs() -> list[tuple[str, str]]:
    """400 sentences of 1 to 8 words out of 300, translated word by word (`word_for_word`)."""
    rng = random.Random(0)
    words = [f"w{k}" for k in range(300)]
    sources = [" ".join(rng.choices(words, k=rng.randint(1, 8))) for _ in range(400)]
    return [(source, word_for_word(source)) for source in sources]


@pytest.fixture(name="translate")
def translate_fixture():
    return word_for_word
