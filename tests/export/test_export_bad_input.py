"""`tfscones export` refuses flags of another format, and a destination it cannot take, early.

A flag that does not apply to the chosen `--format` is refused by name, and so is an `--out`
under a file or already being written by another export, all before the model loads; Ctrl-C
ends an export with one line; an export that another process beat to its folder fails in one
line naming the folder and replaces nothing.
"""

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import keras
import pytest
import tensorflow as tf

from tfscones.commands import export as export_command
from tfscones.serving import export as savedmodel

REPOSITORY = Path(__file__).resolve().parents[2]
SAVEDMODEL_FLAGS = {
    "--beam-size": "8",
    "--nbest": "2",
    "--length-penalty": "0.5",
    "--max-batch-size": "2",
    "--max-source-tokens": "10",
    "--max-output-tokens": "20",
    "--max-length-a": "1",
    "--max-length-b": "5",
    "--max-request-gib": "1",
    "--xla": None,
}


@pytest.fixture
def no_model_loads(monkeypatch):
    """Fails a test whose export reaches loading the model."""

    def loading(*arguments, **keywords):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(savedmodel, "build_module", loading)
    monkeypatch.setattr(savedmodel, "load_model", loading)
    ctranslate2_export = pytest.importorskip("tfscones.serving.ctranslate2_export")
    monkeypatch.setattr(ctranslate2_export, "load_model", loading)


def export_error(arguments: list[str]) -> str:
    with pytest.raises(SystemExit) as ended:
        export_command.main(arguments)
    return str(ended.value.code)


@pytest.mark.parametrize("flag", SAVEDMODEL_FLAGS)
def test_a_savedmodel_flag_is_refused_for_ctranslate2_before_any_model_loads(
    run_dir, tmp_path, no_model_loads, flag
):
    out = tmp_path / "ct2"
    arguments = ["--run", str(run_dir), "--format", "ctranslate2", "--out", str(out)]
    value = [] if SAVEDMODEL_FLAGS[flag] is None else [SAVEDMODEL_FLAGS[flag]]
    message = export_error([*arguments, flag, *value])
    assert message == f"export error: {flag} is a setting of --format savedmodel, not ctranslate2"
    assert not any(tmp_path.iterdir())


def test_every_flag_of_another_format_is_named(run_dir, tmp_path, no_model_loads):
    arguments = ["--run", str(run_dir), "--format", "ctranslate2", "--out", str(tmp_path / "o")]
    flags = ["--beam-size", "8", "--max-output-tokens", "20", "--max-batch-size", "2"]
    assert export_error([*arguments, *flags]) == (
        "export error: --beam-size, --max-output-tokens and --max-batch-size are settings of "
        "--format savedmodel, not ctranslate2"
    )
    to_savedmodel = [
        "--run",
        str(run_dir),
        "--out",
        str(tmp_path / "m" / "1"),
        "--quantization",
        "int8",
    ]
    assert export_error(to_savedmodel) == (
        "export error: --quantization is a setting of --format ctranslate2, not savedmodel"
    )


@pytest.mark.parametrize("format_", ["savedmodel", "ctranslate2"])
def test_an_out_under_a_file_is_refused_before_any_model_loads(
    run_dir, tmp_path, no_model_loads, format_
):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "file").write_text("not a folder")
    out = tmp_path / "a" / "file" / "deeper" / "1"
    message = export_error(["--run", str(run_dir), "--format", format_, "--out", str(out)])
    file = tmp_path / "a" / "file"
    assert message == f"export error: --out {out}: {file} is not a folder"


def test_an_out_another_export_is_writing_is_refused_before_any_model_loads(
    run_dir, tmp_path, no_model_loads
):
    out = tmp_path / "m" / "1"
    with savedmodel.staged_folder(out) as first_export:
        first_export.mkdir()
        (first_export / "saved_model.pb").write_text("the first export")
        message = export_error(["--run", str(run_dir), "--out", str(out)])
    assert message.startswith(f"export error: another export (pid {os.getpid()}) is writing {out}")
    assert [path.name for path in out.iterdir()] == ["saved_model.pb"]
    assert (out / "saved_model.pb").read_text() == "the first export"


def test_an_export_beaten_to_its_folder_replaces_nothing(module, tmp_path, monkeypatch):
    out = tmp_path / "m" / "1"

    def another_export_finishes_first(archive, folder, **keywords):
        Path(folder, "saved_model.pb").write_text("this export")
        out.mkdir()
        (out / "saved_model.pb").write_text("the other export")

    archive_class = type(keras.export.ExportArchive())  # the backend's subclass
    monkeypatch.setattr(archive_class, "write_out", another_export_finishes_first)
    with pytest.raises(savedmodel.ExportError, match=f"{out} was written by another process"):
        savedmodel.write_savedmodel(module, out)
    assert (out / "saved_model.pb").read_text() == "the other export"
    assert [path.name for path in out.parent.iterdir()] == ["1"]


WRITING_FOREVER = """
import sys, time
from pathlib import Path
from tfscones.commands import export
from tfscones.serving import export as savedmodel

def writing_forever(module, folder):
    folder.mkdir()
    (folder / "saved_model.pb").write_text("half written")
    Path(sys.argv[1]).write_text("writing")
    time.sleep(300)

savedmodel.save_module = writing_forever
export.main(sys.argv[2:], prog="tfscones export")
"""


def test_ctrl_c_ends_an_export_with_one_line_and_leaves_nothing(run_dir, tmp_path):
    base, writing = tmp_path / "m", tmp_path / "writing"
    arguments = [str(writing), "--run", str(run_dir), "--out", f"{base}/1"]
    exporting = subprocess.Popen(
        [sys.executable, "-c", WRITING_FOREVER, *arguments],
        cwd=REPOSITORY,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # Ctrl-C as in a terminal, even when the tests run in the background (`make test &`),
        # where the shell starts them with SIGINT ignored and the export would never see it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while not writing.exists():  # the export is writing its SavedModel
        assert time.monotonic() < deadline and exporting.poll() is None, "it never wrote"
        time.sleep(0.05)
    exporting.send_signal(signal.SIGINT)
    _, stderr = exporting.communicate(timeout=120)

    assert exporting.returncode == 130
    assert "Traceback" not in stderr.decode() and "KeyboardInterrupt" not in stderr.decode()
    assert stderr.decode().splitlines()[-1] == (
        f"export interrupted: nothing was written to {base / '1'}"
    )
    assert not base.exists()  # the export made it, and removed it


def test_the_hidden_folder_of_a_killed_export_is_taken_over(tmp_path):
    out = tmp_path / "m" / "1"
    left = tmp_path / "m" / ".1.partial"  # as `staged_folder` names it; its holder is gone
    (left / "export").mkdir(parents=True)
    (left / "export" / "saved_model.pb").write_text("half written")
    with savedmodel.staged_folder(out) as staging:
        staging.mkdir()
        (staging / "saved_model.pb").write_text("whole")
    assert [path.name for path in out.parent.iterdir()] == ["1"]
    assert (out / "saved_model.pb").read_text() == "whole"


@pytest.mark.parametrize(
    "full_disk",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        tf.errors.ResourceExhaustedError(None, None, "variables.data: No space left on device"),
    ],
    ids=["OSError", "TensorFlow"],
)
def test_a_full_disk_during_an_export_is_named_and_leaves_nothing(
    module, tmp_path, monkeypatch, full_disk
):
    out = tmp_path / "m" / "1"

    def half_then_full_disk(archive, folder, **keywords):
        Path(folder, "saved_model.pb").write_text("half")
        raise full_disk

    archive_class = type(keras.export.ExportArchive())  # the backend's subclass
    monkeypatch.setattr(archive_class, "write_out", half_then_full_disk)
    with pytest.raises(savedmodel.ExportError, match=rf"no space left on the disk of {out.parent}"):
        savedmodel.write_savedmodel(module, out)
    assert not (tmp_path / "m").exists()


def test_a_full_disk_during_a_ctranslate2_export_is_named_and_leaves_nothing(
    run_dir, tmp_path, monkeypatch
):
    ctranslate2_export = pytest.importorskip("tfscones.serving.ctranslate2_export")
    out = tmp_path / "ct2" / "model"

    def half_then_full_disk(converter, folder, **keywords):
        Path(folder).mkdir()
        Path(folder, "model.bin").write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ctranslate2_export._SpecWriter, "convert", half_then_full_disk)
    with pytest.raises(savedmodel.ExportError, match=rf"no space left on the disk of {out.parent}"):
        ctranslate2_export.export_ctranslate2(out, run=run_dir)
    assert not (tmp_path / "ct2").exists()
