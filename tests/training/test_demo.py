"""The demo end to end on a tiny slice: what a newcomer sees, and no TensorFlow C++ log lines."""

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tfscones.commands import demo
from tfscones.commands import translate as translate_command
from tfscones.decoding import Search
from tfscones.training.config import ConfigError

REPOSITORY = Path(__file__).resolve().parents[2]

# absl's C++ log prefix ("I0000 00:00:1795461600.509538    2090 port.cc:153] ...") and the
# notice it prints before it is initialised.
NATIVE_LOG_LINE = re.compile(r"^([IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\]|WARNING: All log)")


@pytest.mark.slow  # 40 s: two tiny trainings and an export, end to end
def test_demo_prints_progress_table_and_translations_without_native_logs(tiny_overrides, tmp_path):
    overrides = [o for o in tiny_overrides if not o.startswith("output_dir=")]
    overrides += ["training.steps=4", "training.steps_per_epoch=2"]
    command = [sys.executable, "-m", "training.demo", "--minutes", "5"]
    command += ["--output-dir", str(tmp_path / "runs")]
    for override in overrides:
        command += ["--override", override]

    finished = subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True, timeout=600)

    assert finished.returncode == 0, finished.stderr[-3000:]
    output = finished.stdout + finished.stderr
    native = [line for line in output.splitlines() if NATIVE_LOG_LINE.match(line)]
    assert native == []
    assert "Traceback" not in output and "Warning" not in output, output
    lines = finished.stdout.splitlines()
    for label in ("softmax", "SCONES α=0.5"):
        progress = [line for line in lines if re.match(rf"{label} +step +\d+ · loss \d", line)]
        assert progress, f"no progress line of {label}"
        done = [line for line in lines if re.match(rf"{label} +done: 4 steps, best dev BLEU", line)]
        assert len(done) == 1, lines
    rows = [line for line in lines if line.startswith("| softmax") or line.startswith("| SCONES")]
    assert len(rows) == 2 and all(row.split("|")[2].strip() == "4" for row in rows)
    for label in ("softmax (greedy)", "SCONES α=0.5 (greedy)", "SavedModel (translate)"):
        assert sum(line.startswith(label) for line in lines) == 6, label
    assert (tmp_path / "runs" / "exports" / "demo-scones-a0.5" / "1" / "saved_model.pb").is_file()


def test_a_log_gets_each_progress_line_once(monkeypatch):
    monkeypatch.setattr(demo, "LOG_SECONDS", 0.0)
    log = io.StringIO()
    display = demo.ProgressDisplay(["softmax", "SCONES"], log)
    display.update("softmax", "step 1")
    display.update("softmax", "done: 4 steps", force=True)
    display.update("SCONES", "step 3")
    display.update("SCONES", "step 3")
    display.update("SCONES", "done: 4 steps", force=True)
    assert log.getvalue().splitlines() == [
        "softmax  step 1",
        "SCONES   starting",
        "softmax  done: 4 steps",
        "SCONES   step 3",
        "SCONES   done: 4 steps",
    ]


def test_each_side_by_side_run_gets_its_own_cores():
    assert demo.core_shares([0, 1], 2) == [{0}, {1}]
    assert demo.core_shares([2, 3, 5, 7, 8], 2) == [{2, 3}, {5, 7}]
    assert demo.core_shares([4], 2) == [{4}, {4}]


def test_the_demos_time_rounds_to_whole_seconds_before_splitting_minutes():
    assert demo.minutes_and_seconds(479.6) == "8 min 0 s"
    assert demo.minutes_and_seconds(59.4) == "0 min 59 s"
    assert demo.minutes_and_seconds(125.0) == "2 min 5 s"


def test_the_suggested_translate_command_parses(tmp_path):
    (tmp_path / "model.keras").touch()
    (tmp_path / "spm.model").touch()
    arguments = translate_command.parse_arguments(demo.translate_arguments(tmp_path))
    assert arguments.search == Search("beam", beam_size=4)


def demo_arguments(tmp_path, *overrides):
    argv = ["--output-dir", str(tmp_path / "runs")]
    for override in overrides:
        argv += ["--override", override]
    return demo.parse_demo_arguments(argv)


def test_the_demo_trains_in_folders_it_creates_and_deletes_none(tmp_path, capsys):
    earlier = tmp_path / "runs" / "demo-softmax"
    earlier.mkdir(parents=True)
    (earlier / "model.keras").write_text("an earlier demo's model")
    (tmp_path / "runs" / "demo-scones-a0.5-2").mkdir()  # a numbered set is used whole or not

    configs = demo.demo_configs(demo_arguments(tmp_path))
    demo.claim_run_folders(configs)

    folders = [Path(config.output_dir) for config in configs.values()]
    assert [folder.name for folder in folders] == ["demo-softmax-3", "demo-scones-a0.5-3"]
    assert all(folder.is_dir() and not any(folder.iterdir()) for folder in folders)
    assert (earlier / "model.keras").read_text() == "an earlier demo's model"
    assert "hold earlier runs (the demo deletes nothing)" in capsys.readouterr().out
    again = demo.demo_configs(demo_arguments(tmp_path))
    demo.claim_run_folders(again)
    assert [Path(c.output_dir).name for c in again.values()] == [
        "demo-softmax-4",
        "demo-scones-a0.5-4",
    ]


@pytest.mark.parametrize("override", ["name=my-run", "output_dir=elsewhere", "name=../elsewhere"])
def test_an_override_of_the_runs_names_or_folders_is_refused(tmp_path, override):
    with pytest.raises(ConfigError, match="the demo names its two runs itself; give --output-dir"):
        demo.demo_configs(demo_arguments(tmp_path, override))


def test_an_output_folder_under_a_file_is_refused_before_anything_trains(tmp_path, capsys):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(SystemExit):
        demo.parse_demo_arguments(["--output-dir", str(tmp_path / "file")])
    assert f"--output-dir {tmp_path / 'file'}: {tmp_path / 'file'} is not a folder" in (
        capsys.readouterr().err
    )
