"""The decoding tests' SentencePiece vocabulary, trained once on random sentences of few words."""

import random

import pytest

from tfscones.data import Tokenizer, train_sentencepiece

WORDS = (
    "the a cat dog bird fish sat ran flew swam on under over near mat tree house river garden "
    "road big small old young red green blue yellow black white happy quiet loud fast slow "
    "sees finds likes eats drinks water bread milk apple morning evening night today tomorrow "
    "and but with without because when where who what why how Anna Tom Berlin London"
).split()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    rng = random.Random(0)
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(1, 8))) for _ in range(300)]
    folder = tmp_path_factory.mktemp("spm")
    text = folder / "train.txt"
    text.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return Tokenizer.from_file(
        train_sentencepiece([text], folder / "spm", vocab_size=90).model_file
    )
