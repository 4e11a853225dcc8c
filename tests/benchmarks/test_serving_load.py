"""The serving-load benchmark: its load generator's bounds and figures, its servers, its table.

The load generator is tested on fake decoders (a barrier shows the clients in flight at once,
a clock that only requests advance shows the deadline); the serving process on a tiny export,
in a fresh interpreter that must not import tfscones; the whole benchmark on a tiny softmax run.
"""

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks import serving_load
from benchmarks.load_generator import LoadResult, drive_load
from benchmarks.serving_load import CTRANSLATE2, SAVEDMODEL, SAVEDMODEL_XLA, EngineSetting
from tests.export.conftest import demo_sentences
from tfscones.serving import RequestLimits, export_run, standard_searches
from tfscones.serving.export import ExportSettings

REPOSITORY = Path(__file__).resolve().parents[2]


def test_the_load_stops_after_its_request_count_with_every_client_in_flight():
    clients = 3
    all_in_flight = threading.Barrier(clients, timeout=30)
    sent = []

    def translate(request):
        sent.append(request)
        if len(sent) <= clients:  # the first round: each client waits for the others
            all_in_flight.wait()

    result = drive_load(translate, [["a"], ["b", "c"]], clients, max_requests=10, max_seconds=60)
    assert len(sent) == result.requests == len(result.latencies) == 10
    assert sorted(map(tuple, sent)) == [("a",)] * 5 + [("b", "c")] * 5  # sent again from the first
    assert result.sentences == 15


def test_no_request_is_sent_once_the_seconds_have_passed():
    now = [0.0]

    def translate(request):  # each request takes one second of the fake clock
        now[0] += 1.0

    result = drive_load(
        translate,
        [["a", "b"]],
        clients=1,
        max_requests=10**6,
        max_seconds=3.5,
        clock=lambda: now[0],
    )
    assert result.requests == 4  # sent at 0, 1, 2 and 3 seconds
    assert result.latencies == (1.0,) * 4 and result.seconds == 4.0
    assert result.sentences_per_second == 2.0


def test_the_generator_calls_its_decoder_and_opens_no_socket(monkeypatch):
    def no_socket(*arguments, **settings):
        raise AssertionError("the load generator opened a socket")

    monkeypatch.setattr(socket, "socket", no_socket)
    monkeypatch.setattr(socket, "create_connection", no_socket)
    answered = []
    result = drive_load(answered.append, [["x"]], clients=2, max_requests=6, max_seconds=60)
    assert result.requests == len(answered) == 6


def test_latency_percentiles_interpolate_between_requests():
    result = LoadResult(100, 100, 10.0, tuple(np.arange(1, 101) / 100))
    # numpy's linear rule: the 99th percentile of 100 values sits at 0.99 * 99 = 98.01.
    assert result.latency(50) == pytest.approx(0.505)
    assert result.latency(99) == pytest.approx(0.9901)
    assert result.sentences_per_second == 10.0
    with pytest.raises(ValueError, match="no request was answered"):
        LoadResult(0, 0, 1.0, ()).latency(50)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (([], 1, 1, 1.0), "no requests"),
        (([["a"]], 0, 1, 1.0), r"got 0, 1, 1.0"),
        (([["a"]], 1, 1, 0.0), r"got 1, 1, 0.0"),
    ],
)
def test_a_load_without_requests_or_bounds_is_refused(arguments, message):
    with pytest.raises(ValueError, match=message):
        drive_load(lambda request: None, *arguments)


@pytest.mark.parametrize("text", ["2", "0x1", "1x0", "axb", "1x2x3"])
def test_ctranslate2_settings_are_two_whole_numbers_of_at_least_one(tmp_path, capsys, text):
    for name in ("model.keras", "spm.model"):
        (tmp_path / name).write_text("")
    flags = ["--run", str(tmp_path), "--sentences", str(tmp_path / "spm.model")]
    assert serving_load.parse_arguments([*flags, "--ctranslate2", "2x1"]).ctranslate2 == [(2, 1)]
    with pytest.raises(SystemExit):
        serving_load.parse_arguments([*flags, "--ctranslate2", text])
    assert f"must be THREADSxWORKERS, two whole numbers of at least 1 (got '{text}')" in (
        capsys.readouterr().err
    )


def test_ratios_set_two_threads_beside_one_and_beside_ctranslate2_at_the_same_threads(capsys):
    def result(sentences_per_second):
        return LoadResult(10, int(10 * sentences_per_second), 10.0, (0.1,) * 10), 2**20

    one, two = EngineSetting(SAVEDMODEL, 1, 0), EngineSetting(SAVEDMODEL, 2, 0)
    peer_one, peer_two = EngineSetting(CTRANSLATE2, 1, 2), EngineSetting(CTRANSLATE2, 2, 1)
    results = {
        (one, 1, 1, 2): result(10),
        (two, 1, 1, 2): result(16),
        (peer_one, 1, 1, 2): result(20),
        (peer_two, 1, 1, 2): result(32),
        (peer_two, 1, 1, 4): result(99),  # another client count: compared with nothing
    }
    serving_load.print_ratios(results)
    assert capsys.readouterr().out.splitlines()[1:] == [
        "SavedModel 1 x inter-op 0 / CTranslate2 1 x 2 workers, greedy, batch 1, 2 client(s): "
        "0.50x",
        "SavedModel 2 x inter-op 0 / 1 thread, greedy, batch 1, 2 client(s): 1.60x",
        "SavedModel 2 x inter-op 0 / CTranslate2 2 x 1 workers, greedy, batch 1, 2 client(s): "
        "0.50x",
    ]


def test_an_xla_export_is_set_beside_the_default_export_and_ctranslate2(capsys):
    def result(sentences_per_second):
        return LoadResult(10, int(10 * sentences_per_second), 10.0, (0.1,) * 10), 2**20

    default, compiled = EngineSetting(SAVEDMODEL, 1, 2), EngineSetting(SAVEDMODEL_XLA, 1, 2)
    results = {
        (default, 1, 1, 2): result(10),
        (compiled, 1, 1, 2): result(25),
        (EngineSetting(CTRANSLATE2, 1, 2), 1, 1, 2): result(20),
    }
    serving_load.print_ratios(results)
    assert capsys.readouterr().out.splitlines()[1:] == [
        "SavedModel 1 x inter-op 2 / CTranslate2 1 x 2 workers, greedy, batch 1, 2 client(s): "
        "0.50x",
        "SavedModel XLA 1 x inter-op 2 / without XLA, greedy, batch 1, 2 client(s): 2.50x",
        "SavedModel XLA 1 x inter-op 2 / CTranslate2 1 x 2 workers, greedy, batch 1, "
        "2 client(s): 1.25x",
    ]


def test_the_xla_settings_repeat_the_savedmodels_thread_settings():
    arguments = SimpleNamespace(xla=True, threads=[1, 2], inter_op=[2], ctranslate2=[(1, 2)])
    settings = serving_load.engine_settings(arguments)
    assert [(s.engine, s.threads, s.side_by_side) for s in settings] == [
        (SAVEDMODEL, 1, 2),
        (SAVEDMODEL, 2, 2),
        (SAVEDMODEL_XLA, 1, 2),
        (SAVEDMODEL_XLA, 2, 2),
        (CTRANSLATE2, 1, 2),
    ]


@pytest.fixture(scope="module")
def softmax_run(tiny_runs) -> Path:
    """An untrained tiny softmax run folder."""
    return tiny_runs["softmax"]


@pytest.fixture(scope="module")
def savedmodel(softmax_run, tmp_path_factory) -> Path:
    """The tiny run exported as the benchmark exports it (greedy and 4 beams)."""
    settings = ExportSettings(standard_searches(beam_size=4, nbest=1), RequestLimits())
    folder = tmp_path_factory.mktemp("savedmodel") / "1"
    return Path(export_run(folder, run=softmax_run, settings=settings)["path"])


def test_the_savedmodel_server_answers_in_a_process_without_tfscones(savedmodel):
    job = {"requests": [["Ein Hund."], ["Zwei Kinder spielen.", "Hallo."]], "beam_size": 1}
    job.update(clients=2, max_requests=4, max_seconds=60)
    probe = (
        "import sys, benchmarks.load_server as server\n"
        "sys.stdin = [sys.argv[2]]\n"
        "server.main(['savedmodel', sys.argv[1], '--threads', '1', '--side-by-side', '0'])\n"
        "print('TFSCONES', any(name.split('.')[0] == 'tfscones' for name in sys.modules))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe, str(savedmodel), json.dumps(job)],
        capture_output=True,
        text=True,
        cwd=REPOSITORY,
        check=True,
    )
    lines = completed.stdout.splitlines()
    result = json.loads(next(line for line in lines if line.startswith("RESULT "))[7:])
    assert result["requests"] == 4 and result["sentences"] == 6
    assert result["peak_bytes"] > 2**20
    assert "TFSCONES False" in lines


@pytest.mark.slow
def test_the_benchmark_prints_a_row_per_setting_search_batch_and_clients(softmax_run, capsys):
    pytest.importorskip("ctranslate2", reason='ctranslate2 is not installed (".[ctranslate2]")')
    sentences = softmax_run / "sentences.txt"
    sentences.write_text("".join(s + "\n" for s in demo_sentences("test", 8)), encoding="utf-8")
    serving_load.main(
        ["--run", str(softmax_run), "--sentences", str(sentences), "--clients", "1", "2"]
        + ["--batch-sizes", "1", "4", "--beam-sizes", "1", "4", "--threads", "1", "2"]
        + ["--ctranslate2", "1x2", "--requests", "6", "--seconds", "30", "--xla"]
    )
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    # The header, then settings (2 SavedModel, 2 of its XLA export, 1 CTranslate2) x searches x
    # batches x clients.
    assert len(rows) == 1 + 5 * 2 * 2 * 2
    assert sum(row.startswith("| SavedModel XLA ") for row in rows) == 2 * 2 * 2 * 2
    assert all(row.split(" | ")[4] == "6" for row in rows[1:])  # each row's requests: the bound
