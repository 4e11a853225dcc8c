"""`python -m training.translate` ends a user's mistake with one line, before loading a model."""

import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_dir(tmp_path):
    """A run folder whose model files exist but would fail to load: checks must come first."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "model.keras").write_bytes(b"not a model")
    (run / "spm.model").write_bytes(b"not a vocabulary")
    return run


def translate(*arguments, stdin=b""):
    return subprocess.run(
        [sys.executable, "-m", "training.translate", *map(str, arguments)],
        cwd=REPOSITORY,
        input=stdin,
        capture_output=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--batch-size", "0", "--batch-size: must be a whole number in [1, inf) (got 0)"),
        ("--nbest", "-1", "--nbest: must be a whole number in [0, inf) (got -1)"),
        ("--max-batch-gib", "0", "--max-batch-gib: must be a finite number in (0, inf) (got 0.0)"),
        (
            "--max-batch-gib",
            "inf",
            "--max-batch-gib: must be a finite number in (0, inf) (got inf)",
        ),
    ],
)
def test_out_of_range_flags(run_dir, flag, value, message):
    finished = translate("--run", run_dir, flag, value)
    assert finished.returncode == 2
    assert message in finished.stderr.decode()
    assert b"Traceback" not in finished.stderr


def test_non_utf8_input_names_file_and_line(run_dir, tmp_path):
    source = tmp_path / "in.de"
    source.write_bytes(b"Hallo.\n\xc3\x28 kaputt\n")
    finished = translate("--run", run_dir, "--input", source)
    assert finished.returncode == 1
    lines = finished.stderr.decode().strip().splitlines()
    assert lines == [f"translate: error: {source}:2: not UTF-8: bytes b'\\xc3' at byte offset 0"]


def test_non_utf8_standard_input_is_named(run_dir):
    finished = translate("--run", run_dir, stdin=b"ok\nok\n\xff\n")
    assert finished.stderr.decode().strip() == (
        "translate: error: <stdin>:3: not UTF-8: bytes b'\\xff' at byte offset 0"
    )


def test_missing_input_file(run_dir, tmp_path):
    finished = translate("--run", run_dir, "--input", tmp_path / "absent.de")
    assert finished.returncode == 1
    assert "absent.de" in finished.stderr.decode() and b"Traceback" not in finished.stderr


def test_files_that_are_no_model_or_vocabulary_are_named(run_dir, tmp_path):
    source = tmp_path / "in.de"
    source.write_text("Hallo.\n", encoding="utf-8")
    finished = translate("--run", run_dir, "--input", source)
    assert finished.returncode == 1
    lines = finished.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("translate: error: ")
    assert "spm.model is not a SentencePiece model" in lines[0]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--search", "beam", "--beam", "-2"],
            "--beam: must be a whole number in [1, 2147483647] (got -2)",
        ),
        (["--search", "sample", "--temperature", "0"], "--temperature: must be a finite number"),
        (["--search", "sample", "--top-p", "1.5"], "--top-p: must be a finite number in (0, 1]"),
        (["--search", "sample", "--top-k", "-1"], "--top-k: must be a whole number in [0, "),
        (
            ["--search", "beam", "--length-penalty", "-1"],
            "--length-penalty: must be a finite number in [0, 5] (got -1.0)",
        ),
        (["--search", "diverse_beam", "--groups", "3"], "must be a multiple of --groups (3)"),
        (
            ["--search", "beam", "--beam", "2", "--nbest", "3"],
            "--nbest must be a whole number in [1, 2] (got 3)",
        ),
        (["--beam", "4"], "--beam is a setting of beam and diverse_beam search, not of greedy"),
        (["--search", "sample", "--groups", "2"], "--groups is a setting of diverse_beam"),
        (["--nbest", "2"], "--nbest above 1 needs a search of several hypotheses, not greedy"),
    ],
)
def test_search_settings_out_of_range_end_in_one_line(run_dir, flags, message):
    finished = translate("--run", run_dir, *flags)
    assert finished.returncode == 2
    assert message in finished.stderr.decode()
    assert b"Traceback" not in finished.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--search", "diverse_beam", "--groups", "0"],
            "--groups: must be a whole number in [1, 2147483647] (got 0)",
        ),
        (
            ["--search", "sample", "--seed", "99999999999999999999"],
            "--seed: must be a whole number in [0, 9223372036854775807] (got 99999999999999999999)",
        ),
        (
            ["--search", "sample", "--temperature", "1e-300"],
            "--temperature: must be a finite number in [1e-30, 1e+30] (got 1e-300). "
            "Below 1e-30 sampling is greedy search: use greedy search.",
        ),
        (
            ["--search", "beam", "--length-penalty", "1e308"],
            "--length-penalty: must be a finite number in [0, 5] (got 1e+308)",
        ),
        (
            ["--search", "diverse_beam", "--diversity-strength", "1e308"],
            "--diversity-strength: must be a finite number in [0, 1000] (got 1e+308)",
        ),
        (
            ["--search", "sample", "--top-k", "99999999999"],
            "--top-k: must be a whole number in [0, 2147483647] (got 99999999999)",
        ),
        (["--search", "beam", "--beam", "2.5"], "--beam: must be a whole number in [1, "),
    ],
)
def test_every_search_flag_is_checked_against_its_setting_range(run_dir, flags, message):
    finished = translate("--run", run_dir, *flags, stdin=b"Hallo.\n")
    assert finished.returncode == 2
    assert f": error: argument {message}" in finished.stderr.decode().strip().splitlines()[-1]
    assert finished.stdout == b""


@pytest.mark.parametrize("output", ["missing/out.en", "."])
def test_an_output_that_cannot_be_written_is_named_before_translating(run_dir, tmp_path, output):
    target = tmp_path / output
    finished = translate("--run", run_dir, "--output", target, stdin=b"Hallo.\n")
    assert finished.returncode == 1
    message = finished.stderr.decode().strip()
    assert message.startswith(f"translate: error: cannot write {target}: ")
    assert "\n" not in message  # one line, and before the (unloadable) model is read


@pytest.mark.parametrize("output_name", ["in.de", "link.de", "run/model.keras"])
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(run_dir, tmp_path, output_name):
    source = tmp_path / "in.de"
    source.write_text("Hallo.\n", encoding="utf-8")
    (tmp_path / "link.de").symlink_to(source)
    output = tmp_path / output_name
    kept = output.read_bytes()
    finished = translate("--run", run_dir, "--input", source, "--output", output)
    assert finished.returncode == 1
    message = finished.stderr.decode().strip()
    assert message.startswith(f"translate: error: cannot write {output}: it is the input ")
    assert "\n" not in message
    assert output.read_bytes() == kept


def test_runs_of_different_vocabularies_are_refused_naming_both(run_dir, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "model.keras").write_bytes(b"not a model")
    (other / "spm.model").write_bytes(b"another vocabulary")
    finished = translate("--run", run_dir, "--run", other, stdin=b"Hallo.\n")
    assert finished.returncode == 2
    message = finished.stderr.decode()
    assert f"--run {run_dir} and --run {other} have different vocabularies" in message
    assert b"Traceback" not in finished.stderr


def test_runs_of_one_vocabulary_go_on_to_load_their_models(run_dir, tmp_path):
    twin = tmp_path / "twin"
    twin.mkdir()
    for name in ("model.keras", "spm.model"):
        (twin / name).write_bytes((run_dir / name).read_bytes())
    finished = translate("--run", run_dir, "--run", twin, stdin=b"Hallo.\n")
    assert finished.returncode == 1
    lines = finished.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "spm.model is not a SentencePiece model" in lines[0]
