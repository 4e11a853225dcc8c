"""Tiny run folders the benchmark tests decode."""

import shutil

import pytest

from tests.export.conftest import demo_sentences, save_tiny_model
from tfscones.data import train_sentencepiece


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """An untrained SCONES run and softmax run sharing one SentencePiece model."""
    folder = tmp_path_factory.mktemp("runs")
    for language in ("de", "en"):
        text = "".join(line + "\n" for line in demo_sentences("train", 1500, language))
        (folder / f"train.{language}").write_text(text, encoding="utf-8")
    train_sentencepiece([folder / "train.de", folder / "train.en"], folder / "spm", vocab_size=400)
    runs = {}
    for name, head, seed in (("SCONES", "sigmoid", 7), ("softmax", "softmax", 3)):
        runs[name] = folder / name
        runs[name].mkdir()
        shutil.copy(folder / "spm.model", runs[name] / "spm.model")
        save_tiny_model(runs[name] / "model.keras", seed=seed, head=head)
    return runs
