"""A small slice of the bundled demo corpus and the overrides that train a tiny model on it."""

import itertools
from pathlib import Path

import pytest

from tfscones.data.demo import demo_file

LINES = {"train": 600, "dev": 12, "test": 12}


def write_slice(split: str, language: str, folder: Path) -> Path:
    path = folder / f"{split}.{language}"
    with demo_file(split, language).open(encoding="utf-8") as lines:
        path.write_text("".join(itertools.islice(lines, LINES[split])), encoding="utf-8")
    return path


@pytest.fixture
def tiny_overrides(tmp_path):
    """Overrides of the demo SCONES config: a 600-line corpus, the tiny preset, a few steps."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    overrides = [f"output_dir={tmp_path / 'run'}"]
    for split in LINES:
        overrides.append(f"data.{split}_source={write_slice(split, 'de', corpus)}")
        overrides.append(f"data.{split}_target={write_slice(split, 'en', corpus)}")
    overrides += [
        "data.vocabulary_size=400",
        "data.max_length=32",
        "data.tokens_per_batch=512",
        "data.shuffle_buffer_size=100",
        "model.preset=tiny",
        "model.arguments={num_encoder_layers: 1, num_decoder_layers: 1}",
        "training.warmup_steps=2",
        "training.jit_compile=false",
    ]
    return overrides
