"""analyze, diversity, synthetic and the demo end a user's mistake with one line, no traceback."""

import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]


def program(module, *arguments):
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, arguments)],
        cwd=REPOSITORY,
        capture_output=True,
        timeout=120,
    )


def one_line_error(finished) -> str:
    assert finished.returncode != 0
    assert b"Traceback" not in finished.stderr
    lines = [line for line in finished.stderr.decode().splitlines() if line.strip()]
    return lines[-1]


@pytest.fixture
def texts(tmp_path):
    (tmp_path / "src").write_text("eins\nzwei\n", encoding="utf-8")
    (tmp_path / "ref").write_text("one\ntwo\n", encoding="utf-8")
    return tmp_path / "src", tmp_path / "ref"


def test_analyze_names_a_run_folder_without_a_model(texts, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "spm.model").write_bytes(b"x")
    source, reference = texts
    finished = program(
        "training.analyze", "--runs", tmp_path / "run", "--source", source, "--reference", reference
    )
    message = one_line_error(finished)
    assert message.startswith("analyze: error: ") and "has no model.keras" in message


def test_analyze_refuses_an_out_that_is_a_file_before_reading_any_run(texts, tmp_path):
    (tmp_path / "report").write_text("an earlier report")
    source, reference = texts
    finished = program(
        "training.analyze",
        "--runs",
        tmp_path / "no-model",
        "--source",
        source,
        "--reference",
        reference,
        "--out",
        tmp_path / "report" / "deeper",
    )
    message = one_line_error(finished)
    assert message == (
        f"analyze: error: --out {tmp_path / 'report' / 'deeper'}: "
        f"{tmp_path / 'report'} is not a folder"
    )


def test_analyze_refuses_one_run_folder_given_twice(texts, tmp_path):
    (tmp_path / "runs" / "base").mkdir(parents=True)
    source, reference = texts
    twice = (tmp_path / "runs" / "base", tmp_path / "runs" / ".." / "runs" / "base")
    finished = program(
        "training.analyze", "--runs", *twice, "--source", source, "--reference", reference
    )
    message = one_line_error(finished)
    assert message == (f"analyze: error: one folder is given twice: {twice[0]} and {twice[1]}")


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--beams", "0"], "--beams: must be a whole number in [1, inf)"),
        (["--limit", "-3"], "--limit: must be"),
    ],
)
def test_analyze_refuses_out_of_range_flags(texts, tmp_path, flags, message):
    source, reference = texts
    finished = program(
        "training.analyze", "--runs", tmp_path, "--source", source, "--reference", reference, *flags
    )
    assert finished.returncode == 2 and message in one_line_error(finished)


def test_diversity_names_a_missing_run_folder(texts, tmp_path):
    source, reference = texts
    finished = program(
        "training.diversity",
        "--baseline-run",
        tmp_path / "absent",
        "--source",
        source,
        "--references",
        reference,
        "--out",
        tmp_path / "out",
    )
    message = one_line_error(finished)
    assert message.startswith("diversity: error: ") and "absent is not a folder" in message


def test_synthetic_names_a_bad_line(tmp_path):
    (tmp_path / "src").write_bytes(b"eins\n\xff\n")
    (tmp_path / "tgt").write_text("one\ntwo\n", encoding="utf-8")
    finished = program(
        "training.synthetic",
        "--source",
        tmp_path / "src",
        "--target",
        tmp_path / "tgt",
        "--temperatures",
        "1",
        "--out",
        tmp_path / "out",
    )
    message = one_line_error(finished)
    assert message.startswith("synthetic: error: ") and "src:2" in message


def test_the_demo_refuses_a_negative_budget_before_training(tmp_path):
    finished = program("training.demo", "--minutes", "-1", "--output-dir", tmp_path)
    message = one_line_error(finished)
    assert message.startswith("config error: command line: training.max_minutes: -1.0")
    assert not any(tmp_path.iterdir())
