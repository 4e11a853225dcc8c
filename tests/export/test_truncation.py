"""Sources and targets longer than a model reads: translated in part and said so, or refused."""

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tfscones.decoding import translate
from tfscones.decoding.translate import cut_sources

REPOSITORY = Path(__file__).parents[2]
LONG = "Haus " * 400


def translate_command(*arguments):
    return subprocess.run(
        [sys.executable, "-m", "training.translate", *map(str, arguments)],
        cwd=REPOSITORY,
        capture_output=True,
        timeout=240,
    )


def test_the_command_translates_a_long_line_in_part_and_says_so(run_dir, tmp_path):
    source = tmp_path / "in.de"
    source.write_text(f"Hallo.\n{LONG}\nDanke.\n", encoding="utf-8")

    finished = translate_command("--run", run_dir, "--input", source)
    errors = finished.stderr.decode()
    assert finished.returncode == 0 and len(finished.stdout.decode().splitlines()) == 3
    assert re.search(r"translate: line 2: [\d,]+ pieces, the model reads \d+: translating", errors)
    assert "translate: 1 of 3 lines were longer than the model reads" in errors
    assert "line 1:" not in errors and "line 3:" not in errors

    refused = translate_command("--run", run_dir, "--input", source, "--long-lines", "error")
    assert refused.returncode == 1 and not refused.stdout
    assert re.search(
        r"error: line 2: [\d,]+ pieces, the model reads at most", refused.stderr.decode()
    )


def test_the_library_warns_or_refuses_and_names_the_sentences(model, tokenizer, caplog):
    sentences = ["Hallo.", LONG, "Danke.", LONG]
    assert list(cut_sources(tokenizer, sentences, model.max_sequence_length)) == [1, 3]

    with caplog.at_level(logging.WARNING, logger="tfscones.decoding.translate"):
        translations = translate(model, tokenizer, sentences)
    assert len(translations) == 4
    assert "2 of 4 sentences are longer than the model reads" in caplog.text
    assert "sentences 1, 3" in caplog.text

    with pytest.raises(ValueError, match=r"sentence 1 has [\d,]+ pieces; the model reads at most"):
        translate(model, tokenizer, sentences, long_sources="error")
