"""The training program end to end on a slice of the demo corpus; kill-and-resume; multi-worker."""

import csv
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest

from tfscones.commands import demo, translate
from tfscones.data import Tokenizer, default_bucket_lengths
from tfscones.decoding import translate as translate_sentences
from tfscones.models import load_model
from tfscones.run_folder import RunFolder
from tfscones.training import runner
from tfscones.training.config import load_config

REPOSITORY = Path(__file__).resolve().parents[2]
DEMO_CONFIG = "demo_scones_a0.5"  # a shipped config, by name


def read_history(run_dir: Path) -> list[dict]:
    with (run_dir / "history.csv").open() as f:
        return list(csv.DictReader(f))


@pytest.mark.slow  # 32 s: a whole training run, its checkpoints, results and translations
def test_training_writes_checkpoints_logs_results_and_translates(tiny_overrides, tmp_path):
    overrides = tiny_overrides + [
        "training.steps=3",  # not a multiple of the epoch: the last epoch is cut short
        "training.steps_per_epoch=2",
        "training.average_checkpoints=2",
        "training.ema_momentum=0.9",
    ]
    config = load_config(DEMO_CONFIG, overrides)

    results = runner.train(config)

    run_dir = tmp_path / "run"
    assert results["steps"] == 3
    assert json.loads((run_dir / "results.json").read_text())["steps"] == 3
    assert "averaged_dev_bleu" in results
    assert "resumed_after_minutes" not in results  # it ran in one call
    assert [p.name for p in (run_dir / "checkpoints").glob("epoch-*")] != []
    assert 0.0 <= results["test_bleu"] <= 100.0 and results["best_dev_bleu"] >= 0.0
    run = RunFolder(run_dir)  # the layout every reader of a run folder relies on
    files = (run.config, run.tokenizer, run.model, run.last_checkpoint, run.history, run.results)
    for path in (*files, run.test_hypotheses, run.tokenizer_prefix.with_suffix(".vocab")):
        assert path.is_file(), path
    assert run.backup.is_dir() and run.logs.is_dir()
    assert list((run_dir / "logs" / "train").glob("events.out.tfevents.*"))
    history = read_history(run_dir)
    assert [row["epoch"] for row in history] == ["0", "1"]
    assert {"loss", "val_bleu", "scones_positive", "scones_negative"} <= set(history[0])
    assert len((run_dir / "test.hyp").read_text(encoding="utf-8").splitlines()) == 12

    output = tmp_path / "out.en"
    source = tmp_path / "corpus" / "test.de"
    # A fresh process: the command must register the model classes itself.
    subprocess.run(
        [sys.executable, "-m", "training.translate", "--run", str(run_dir), "--input", str(source)]
        + ["--output", str(output)],
        check=True,
    )
    assert len(output.read_text(encoding="utf-8").splitlines()) == 12
    command = ["--run", str(run_dir), "--input", str(source), "--output", str(output)]
    translate.main(command + ["--search", "beam", "--beam", "3", "--nbest", "2"])
    rows = [line.split("\t") for line in output.read_text(encoding="utf-8").splitlines()]
    assert [int(row[0]) for row in rows] == [i for i in range(12) for _ in range(2)]
    assert all(float(rows[i][1]) >= float(rows[i + 1][1]) for i in range(0, 24, 2))
    with pytest.raises(SystemExit):
        translate.main(command + ["--search", "sample", "--beam", "2"])
    with pytest.raises(SystemExit, match="the experts search needs a model with latent experts"):
        translate.main(command + ["--search", "experts"])
    # Unicode line separators, NEL, form feeds and CRs are not line ends: 4 lines in, 4 out.
    odd = tmp_path / "odd.de"
    odd.write_bytes("Hallo\u2028Welt\nEins\u0085zwei\r\nDrei\x0cvier\nEnde".encode())
    translate.main(["--run", str(run_dir), "--input", str(odd), "--output", str(output)])
    assert len(output.read_bytes().split(b"\n")) == 5 and output.read_bytes().endswith(b"\n")

    # The demo's last part: export as the next version, translate through the SavedModel.
    sources = source.read_text(encoding="utf-8").splitlines()[:3]
    through_savedmodel = demo.translate_with_savedmodel(run_dir, sources)
    assert (tmp_path / "exports" / "run" / "1" / "saved_model.pb").is_file()
    assert through_savedmodel["SavedModel (translate)"] == translate_text(run_dir, sources)
    assert len(through_savedmodel["SavedModel (translate_beam)"]) == 3


def translate_text(run_dir: Path, sources: list[str]) -> list[str]:
    model = load_model(run_dir / "model.keras")
    return translate_sentences(model, Tokenizer.from_file(run_dir / "spm.model"), sources)


def training_command(overrides: list[str]) -> list[str]:
    return [sys.executable, "-m", "training.train", "--config", DEMO_CONFIG, *overrides]


def wait_for_backup(backup_dir: Path, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if list(backup_dir.rglob("*.index")) or list(backup_dir.rglob("*.weights.h5")):
            return
        time.sleep(0.2)
    raise AssertionError(f"no backup in {backup_dir} (training exited with {process.poll()})")


def run_to_the_end(command: list[str], environment: dict) -> None:
    """Runs a training command to its end; fails the test with its stderr if it fails."""
    finished = subprocess.run(
        command, cwd=REPOSITORY, env=environment, capture_output=True, text=True, timeout=600
    )
    assert finished.returncode == 0, finished.stderr[-3000:]


def two_cpu_training_command(overrides: list[str]) -> list[str]:
    """`tfscones train` under MirroredStrategy on two logical CPUs."""
    script = Path(__file__).with_name("two_cpus_train.py")
    return [sys.executable, str(script), "--config", DEMO_CONFIG, *overrides]


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_killed_run_resumes_from_its_backup_and_ends_as_the_uninterrupted_run(
    tiny_overrides, tmp_path, strategy
):
    overrides = tiny_overrides + [
        "training.steps=60",
        "training.steps_per_epoch=20",
        "training.backup_every_steps=5",
        f"training.strategy={strategy}",
        "model.dropout=0.1",  # its masks must resume where they were too
    ]
    command = training_command if strategy == "default" else two_cpu_training_command
    run_dir = tmp_path / "run"
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    first = subprocess.Popen(
        command(overrides), cwd=REPOSITORY, env=environment, stderr=subprocess.DEVNULL
    )
    (run_dir / "backup").mkdir(parents=True, exist_ok=True)
    wait_for_backup(run_dir / "backup", first, timeout=300)
    time.sleep(3)
    first.send_signal(signal.SIGKILL)
    first.wait()
    epochs_before_kill = len(read_history(run_dir)) if (run_dir / "history.csv").exists() else 0
    assert epochs_before_kill < 3, "the first run finished before it was killed"

    run_to_the_end(command(overrides), environment)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["steps"] == 60
    # The time of the killed run counts: training time is the whole run's, not the last call's.
    assert 0 < results["resumed_after_minutes"] < results["train_minutes"]
    # The CSV log is appended to: a resumed run adds only the epochs the first one did not finish.
    assert [row["epoch"] for row in read_history(run_dir)] == ["0", "1", "2"]

    # Resumed mid-epoch on the batches the killed run had not drawn: the uninterrupted run's
    # weights, bit for bit on one device, and its log: the interrupted epoch's loss and metrics
    # are means over all its steps (bit for bit in one process; across two devices the restored
    # sums are spread over both, so only up to rounding), and its dev BLEU the same.
    uninterrupted = tmp_path / "uninterrupted"
    run_to_the_end(command([*overrides, f"output_dir={uninterrupted}"]), environment)
    resumed_weights = keras.models.load_model(run_dir / "checkpoints" / "last.keras").get_weights()
    expected = keras.models.load_model(uninterrupted / "checkpoints" / "last.keras").get_weights()
    for resumed, weights in zip(resumed_weights, expected, strict=True):
        np.testing.assert_array_equal(resumed, weights)
    resumed_log, expected_log = read_history(run_dir), read_history(uninterrupted)
    if strategy == "default":
        assert resumed_log == expected_log
    for resumed, expected in zip(resumed_log, expected_log, strict=True):
        assert resumed.keys() == expected.keys() and resumed["val_bleu"] == expected["val_bleu"]
        for name, value in resumed.items():
            np.testing.assert_allclose(float(value), float(expected[name]), rtol=1e-6)


@pytest.mark.slow
def test_ctrl_c_ends_with_where_the_last_backup_is(tiny_overrides, tmp_path):
    # A budget it cannot reach before the signal: the test must interrupt a running run.
    overrides = tiny_overrides + ["training.steps=100000", "training.backup_every_steps=5"]
    run_dir = tmp_path / "run"
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    process = subprocess.Popen(
        training_command(overrides),
        cwd=REPOSITORY,
        env=environment,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as in a terminal, even when the tests run in the background (`make test &`),
        # where the shell starts them with SIGINT ignored and the run would never see it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    (run_dir / "backup").mkdir(parents=True, exist_ok=True)
    wait_for_backup(run_dir / "backup", process, timeout=300)
    time.sleep(1)
    process.send_signal(signal.SIGINT)
    try:
        _, errors = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        process.kill()
        _, errors = process.communicate()
        pytest.fail(
            f"the run did not end within 300 s of Ctrl-C; its stderr ends:\n{errors[-3000:]}"
        )

    assert process.returncode == 130 and "Traceback" not in errors
    last_line = errors.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"interrupted: the last backup is at step [\d,]+ in {re.escape(str(run_dir))}/backup; "
        "the same command resumes from it.",
        last_line,
    ), last_line


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
def test_two_local_workers_train_under_multi_worker_mirrored_strategy(tiny_overrides, tmp_path):
    overrides = tiny_overrides + [
        "training.strategy=multi_worker",
        "training.steps=6",
        "training.steps_per_epoch=3",
    ]
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    workers = []
    for index in range(2):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        workers.append(
            subprocess.Popen(
                training_command(overrides),
                cwd=REPOSITORY,
                env={**os.environ, "TF_CONFIG": tf_config, "TF_CPP_MIN_LOG_LEVEL": "2"},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [worker.communicate(timeout=600) for worker in workers]

    for worker, (_, stderr) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, stderr[-3000:]
    run_dir = tmp_path / "run"
    assert json.loads((run_dir / "results.json").read_text())["steps"] == 6
    assert json.loads((run_dir / "worker-1" / "results.json").read_text())["steps"] == 6
    assert (run_dir / "model.keras").is_file()


def test_a_resumed_run_forgets_the_logged_epochs_it_trains_again(tmp_path):
    history = tmp_path / "history.csv"
    history.write_text("epoch,loss\n0,4.0\n1,3.0\n", encoding="utf-8")
    runner.keep_logged_epochs(history, 1)
    assert history.read_text(encoding="utf-8").splitlines() == ["epoch,loss", "0,4.0"]
    runner.keep_logged_epochs(history, 5)
    assert history.read_text(encoding="utf-8").splitlines() == ["epoch,loss", "0,4.0"]


def test_an_xla_compiled_run_gets_batches_padded_to_their_bucket(tiny_overrides, tmp_path):
    config = load_config(DEMO_CONFIG, tiny_overrides)
    tokenizer = runner.prepare_tokenizer(config, tmp_path)
    buckets = set(default_bucket_lengths(config.data.max_length + 1))

    def lengths(static_shapes: bool) -> set[int]:
        batches = runner.training_batches(config, tokenizer, static_shapes=static_shapes)
        return {
            int(length)
            for inputs, targets in batches.take(40)
            for length in (inputs["source_ids"].shape[1], targets.shape[1])
        }

    assert lengths(static_shapes=True) <= buckets
    assert not lengths(static_shapes=False) <= buckets
