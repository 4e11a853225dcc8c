"""Shared corpora and SentencePiece models for the tfscones.data tests.

`synthetic_pairs` is a toy language pair whose translation is known word by word, so tests can
check that every target stays with its source. Real text comes from the shared Tatoeba corpus
(`../shared/data/tatoeba-de-en`, next to the repository); tests needing it skip without it.
"""

import itertools
import random
from pathlib import Path

import pytest

from tfscones.data import Tokenizer, train_sentencepiece

SHARED_DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
TATOEBA = SHARED_DATA / "tatoeba-de-en"
TATOEBA_LINES = 2000


def _make_dictionary(size: int, seed: int = 0) -> dict[str, str]:
    """Pseudo-words of a toy source language mapped to pseudo-words of a toy target language."""
    rng = random.Random(seed)
    source_syllables = [c + v for c in "bdgklmnprst" for v in "aeiou"]
    target_syllables = [c + v for c in "fhjqvwxyz" for v in "aeiouy"]
    dictionary: dict[str, str] = {}
    targets: set[str] = set()
    while len(dictionary) < size:
        source = "".join(rng.choices(source_syllables, k=rng.randint(1, 3)))
        target = "".join(rng.choices(target_syllables, k=rng.randint(1, 3)))
        if source not in dictionary and target not in targets:
            dictionary[source] = target
            targets.add(target)
    return dictionary


DICTIONARY = _make_dictionary(300)


def translate(source: str) -> str:
    """The toy pair's translation: word by word through DICTIONARY."""
    return " ".join(DICTIONARY[word] for word in source.split())


def make_synthetic_pairs(count: int, seed: int = 0, max_words: int = 8) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    words = sorted(DICTIONARY)
    sources = [" ".join(rng.choices(words, k=rng.randint(1, max_words))) for _ in range(count)]
    return [(source, translate(source)) for source in sources]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def read_head(path: Path, count: int) -> list[str]:
    with path.open(encoding="utf-8") as f:
        return [line.rstrip("\n") for line in itertools.islice(f, count)]


@pytest.fixture(scope="session")
def synthetic_pairs() -> list[tuple[str, str]]:
    return make_synthetic_pairs(400)


@pytest.fixture(scope="session")
def synthetic_model(tmp_path_factory, synthetic_pairs) -> Path:
    folder = tmp_path_factory.mktemp("synthetic_spm")
    source = write_lines(folder / "train.src", [s for s, _ in synthetic_pairs])
    target = write_lines(folder / "train.tgt", [t for _, t in synthetic_pairs])
    return train_sentencepiece([source, target], folder / "spm", vocab_size=200).model_file


@pytest.fixture(scope="session")
def synthetic_tokenizer(synthetic_model) -> Tokenizer:
    return Tokenizer.from_file(synthetic_model)


@pytest.fixture(scope="session")
def tatoeba_dir() -> Path:
    if not (TATOEBA / "train.de").is_file():
        pytest.skip(f"shared data folder is missing: no Tatoeba corpus at {TATOEBA.resolve()}")
    return TATOEBA


@pytest.fixture(scope="session")
def tatoeba_head(tatoeba_dir, tmp_path_factory) -> tuple[Path, Path]:
    """The first TATOEBA_LINES lines of train.de and train.en, copied to files."""
    folder = tmp_path_factory.mktemp("tatoeba_head")
    return tuple(
        write_lines(
            folder / f"train.{lang}", read_head(tatoeba_dir / f"train.{lang}", TATOEBA_LINES)
        )
        for lang in ("de", "en")
    )


@pytest.fixture(scope="session")
def tatoeba_model(tatoeba_head, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tatoeba_spm")
    return train_sentencepiece(list(tatoeba_head), folder / "spm", vocab_size=500).model_file


@pytest.fixture(scope="session")
def tatoeba_tokenizer(tatoeba_model) -> Tokenizer:
    return Tokenizer.from_file(tatoeba_model)


@pytest.fixture(name="translate")
def translate_fixture():
    return translate


@pytest.fixture(name="write_lines")
def write_lines_fixture():
    return write_lines


@pytest.fixture(name="make_synthetic_pairs")
def make_synthetic_pairs_fixture():
    return make_synthetic_pairs
