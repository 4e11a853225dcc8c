"""The training program's bad-input cases: bad corpus lines are caught before SentencePiece."""

from pathlib import Path

import pytest

from tfscones.data import ParallelTextError
from training import train
from training.config import load_config

DEMO_CONFIG = Path(train.__file__).parent / "configs" / "demo_scones_a0.5.yaml"


def corrupt_line(path, number, replacement=b"kaputt \xff\xfe"):
    lines = path.read_bytes().split(b"\n")
    lines[number - 1] = replacement
    path.write_bytes(b"\n".join(lines))


def test_skip_trains_sentencepiece_on_the_usable_pairs_only(tiny_overrides, tmp_path):
    corrupt_line(tmp_path / "corpus" / "train.de", 5)
    config = load_config(DEMO_CONFIG, tiny_overrides + ["data.on_bad_line=skip"])
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    tokenizer = train.prepare_tokenizer(config, run_dir)

    assert tokenizer.vocab_size == 400
    written = (run_dir / "spm_source.txt").read_text(encoding="utf-8").split("\n")
    assert len(written) == 600  # 599 pairs and the final newline's empty tail
    assert not any("kaputt" in line for line in written)


def test_error_names_file_and_line_before_sentencepiece(tiny_overrides, tmp_path):
    corrupt_line(tmp_path / "corpus" / "train.en", 7)
    config = load_config(DEMO_CONFIG, tiny_overrides)
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    with pytest.raises(ParallelTextError, match=r"train\.en:7: invalid UTF-8 bytes"):
        train.prepare_tokenizer(config, run_dir)
    assert not (run_dir / "spm.model").exists()


def test_the_program_reports_a_bad_line_in_one_line(tiny_overrides, tmp_path, capsys):
    corrupt_line(tmp_path / "corpus" / "train.de", 3)
    with pytest.raises(SystemExit) as ended:
        train.main(["--config", str(DEMO_CONFIG), *tiny_overrides])
    message = str(ended.value.code)
    assert message.startswith("data error: ") and "train.de:3: invalid UTF-8" in message
    assert "\n" not in message
