"""How the exported SavedModel holds a server's load: concurrent clients, sentences/s, latency.

    pip install ".[ctranslate2]"
    python -m benchmarks.serving_load --run runs/multi30k-softmax-seed1 \
        --sentences ../shared/data/multi30k-en-de/test_2016_flickr.en

The run's model is exported as our SavedModel (4 beams) and for CTranslate2, as
`benchmarks.ctranslate2_speed` exports it; with `--xla`, also as a SavedModel whose searches
XLA compiles (`tfscones export --xla`), served at the same thread settings and warmed with every
request once, as it compiles once per request shape. Each engine setting gets a fresh process
of its own, as a server would (`benchmarks.load_server`): the SavedModel loaded by
`tf.saved_model.load` in a process that imports TensorFlow and tensorflow-text and nothing of
tfscones, with
`--threads` intra-op threads and `--inter-op` inter-op threads (0, TF Serving's default:
TensorFlow chooses, one per core); CTranslate2 with each `--ctranslate2 THREADSxWORKERS`
(`intra_threads` x `inter_threads`). In that process `--clients` concurrent clients
(`benchmarks.load_generator`, threads of the serving process, closed loop: each sends its
next request once its last is answered) send the sentences in file order, in requests of each
`--batch-sizes` size, after one warm-up request of each size, until `--requests` requests or
`--seconds` seconds, whichever comes first.

Per row: sentences/s, the 50th and 99th percentile of the requests' latency, their ratio, and
the process's peak resident memory so far (its largest load yet, as servers are sized).
Then the targets' ratios: the SavedModel's throughput at 2 threads over 1 thread, per client
count, the SavedModel's over CTranslate2 float32's at the same threads per request, and the XLA
export's over the default export's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

from benchmarks import load_server
from benchmarks.ctranslate2_speed import BEAM_SIZE, Exports, batches, export_both, search_name
from benchmarks.load_generator import LoadResult
from tfscones.commands.argument_types import decodable_run, non_negative_int, positive_int
from tfscones.data.text_lines import read_lines

REPOSITORY = Path(__file__).resolve().parents[1]
SAVEDMODEL = "SavedModel"
SAVEDMODEL_XLA = "SavedModel XLA"
CTRANSLATE2 = "CTranslate2"
MEBIBYTE = 2**20


class EngineSetting(NamedTuple):
    """One engine's thread settings.

    Attributes:
        engine: `SAVEDMODEL`, `SAVEDMODEL_XLA` (its searches compiled by XLA) or
            `CTRANSLATE2`.
        threads: Threads one request's ops run on (intra-op; CTranslate2's `intra_threads`).
        side_by_side: Inter-op threads (0: TensorFlow chooses), or CTranslate2's workers.
    """

    engine: str
    threads: int
    side_by_side: int

    def label(self) -> str:
        """`SavedModel 2 x inter-op 0`, `CTranslate2 1 x 2 workers`."""
        if self.engine != CTRANSLATE2:
            return f"{self.engine} {self.threads} x inter-op {self.side_by_side}"
        return f"{self.engine} {self.threads} x {self.side_by_side} workers"


class LoadServer:
    """`benchmarks.load_server` for one setting, in a process of its own.

    Args:
        setting: The engine and its threads.
        exports: The run's exports.
    """

    def __init__(self, setting: EngineSetting, exports: Exports):
        engine, folder = {
            SAVEDMODEL: (load_server.SAVEDMODEL, exports.savedmodel),
            SAVEDMODEL_XLA: (load_server.SAVEDMODEL, exports.savedmodel_xla),
            CTRANSLATE2: (load_server.CTRANSLATE2, exports.ctranslate2),
        }[setting.engine]
        command = [sys.executable, "-m", "benchmarks.load_server", engine, str(folder)]
        command += ["--threads", str(setting.threads), "--side-by-side", str(setting.side_by_side)]
        command += ["--limits", json.dumps(exports.limits)]
        if setting.engine == SAVEDMODEL_XLA:
            command.append("--warm-every-request")
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            cwd=REPOSITORY,
        )

    def drive_load(
        self,
        requests: list[list[str]],
        beam_size: int,
        clients: int,
        max_requests: int,
        max_seconds: float,
    ) -> tuple[LoadResult, int]:
        """The load's `LoadResult` in the server's process, and its peak memory so far (bytes).

        Raises:
            RuntimeError: If the server ended without answering.
        """
        job = dict(requests=requests, beam_size=beam_size, clients=clients)
        job.update(max_requests=max_requests, max_seconds=max_seconds)
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith(load_server.RESULT_PREFIX):
                fields = json.loads(line[len(load_server.RESULT_PREFIX) :])
                peak = fields.pop("peak_bytes")
                fields["latencies"] = tuple(fields["latencies"])
                return LoadResult(**fields), peak
        raise RuntimeError(f"the load server ended ({self.process.wait()}) without answering")

    def __enter__(self) -> LoadServer:
        return self

    def __exit__(self, *exception) -> None:
        self.process.stdin.close()
        self.process.wait()


def measure(
    servers: dict[EngineSetting, LoadServer], sentences: list[str], arguments
) -> dict[tuple, tuple[LoadResult, int]]:
    """Per `(setting, beam size, batch size, clients)`, the load's result and the peak memory."""
    results = {}
    for setting, server in servers.items():
        for beam_size in arguments.beam_sizes:
            for batch_size in arguments.batch_sizes:
                requests = batches(sentences, batch_size)
                for clients in arguments.clients:
                    results[setting, beam_size, batch_size, clients] = server.drive_load(
                        requests, beam_size, clients, arguments.requests, arguments.seconds
                    )
    return results


def print_table(results: dict[tuple, tuple[LoadResult, int]]) -> None:
    """The measured rows, as markdown."""
    print(
        "\n| engine, threads | search | batch | clients | requests | sent/s | p50 ms | p99 ms "
        "| p99 / p50 | peak MiB |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (setting, beam_size, batch_size, clients), (result, peak) in results.items():
        p50, p99 = result.latency(50), result.latency(99)
        print(
            f"| {setting.label()} | {search_name(beam_size)} | {batch_size} | {clients} "
            f"| {result.requests} | {result.sentences_per_second:.1f} | {p50 * 1e3:.1f} "
            f"| {p99 * 1e3:.1f} | {p99 / p50:.2f} | {peak / MEBIBYTE:.0f} |"
        )


def print_ratios(results: dict[tuple, tuple[LoadResult, int]]) -> None:
    """Each SavedModel at 2 threads over 1, and over CTranslate2 float32 at the same threads.

    An XLA export's is also set beside the default export's at the same settings.
    """
    throughput = {key: result.sentences_per_second for key, (result, _) in results.items()}
    print()
    for (setting, *cell), value in throughput.items():
        if setting.engine == CTRANSLATE2:
            continue
        where = f"{search_name(cell[0])}, batch {cell[1]}, {cell[2]} client(s)"
        one_thread = throughput.get((setting._replace(threads=1), *cell))
        if setting.threads == 2 and one_thread:
            print(f"{setting.label()} / 1 thread, {where}: {value / one_thread:.2f}x")
        uncompiled = throughput.get((setting._replace(engine=SAVEDMODEL), *cell))
        if setting.engine == SAVEDMODEL_XLA and uncompiled:
            print(f"{setting.label()} / without XLA, {where}: {value / uncompiled:.2f}x")
        for (peer, *peer_cell), peer_value in throughput.items():
            if peer.engine == CTRANSLATE2 and peer.threads == setting.threads and peer_cell == cell:
                print(f"{setting.label()} / {peer.label()}, {where}: {value / peer_value:.2f}x")


def engine_settings(arguments) -> list[EngineSetting]:
    """The SavedModel's settings (then its XLA export's, with `--xla`), then CTranslate2's."""
    engines = (SAVEDMODEL, SAVEDMODEL_XLA) if arguments.xla else (SAVEDMODEL,)
    return [
        *(
            EngineSetting(engine, threads, inter_op)
            for engine in engines
            for threads in arguments.threads
            for inter_op in arguments.inter_op
        ),
        *(EngineSetting(CTRANSLATE2, *pair) for pair in arguments.ctranslate2),
    ]


def threads_by_workers(text: str) -> tuple[int, int]:
    """An argparse type: `THREADSxWORKERS`, each a whole number of at least 1."""
    match = re.fullmatch(r"(\d+)x(\d+)", text)
    if not match or min(int(match.group(1)), int(match.group(2))) < 1:
        raise argparse.ArgumentTypeError(
            f"must be THREADSxWORKERS, two whole numbers of at least 1 (got {text!r})"
        )
    return int(match.group(1)), int(match.group(2))


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=decodable_run, required=True, help="training run folder")
    parser.add_argument("--sentences", type=Path, required=True, help="source sentences")
    parser.add_argument("--count", type=positive_int, default=None, help="sentences (default all)")
    parser.add_argument(
        "--clients", type=positive_int, nargs="+", default=[1, 2, 4, 8], help="concurrent clients"
    )
    parser.add_argument(
        "--batch-sizes", type=positive_int, nargs="+", default=[1, 32], help="sentences a request"
    )
    parser.add_argument(
        "--beam-sizes",
        type=positive_int,
        nargs="+",
        default=[1],
        choices=[1, BEAM_SIZE],
        help=f"searches: 1 (greedy), {BEAM_SIZE} (beam)",
    )
    parser.add_argument(
        "--threads", type=positive_int, nargs="+", default=[1, 2], help="SavedModel intra-op"
    )
    parser.add_argument(
        "--inter-op",
        type=non_negative_int,
        nargs="+",
        default=[0],
        help="SavedModel inter-op threads (0: TensorFlow chooses, as TF Serving's default)",
    )
    parser.add_argument(
        "--ctranslate2",
        type=threads_by_workers,
        nargs="*",
        default=[(1, 1), (2, 1), (1, 2)],
        help="CTranslate2 settings, THREADSxWORKERS (none: SavedModel only)",
    )
    parser.add_argument(
        "--xla",
        action="store_true",
        help="also the SavedModel exported with --xla, at the same threads (warmed on every "
        "request: it compiles once per shape)",
    )
    parser.add_argument("--requests", type=positive_int, default=2000, help="most requests a row")
    parser.add_argument("--seconds", type=positive_int, default=20, help="most seconds a row")
    arguments = parser.parse_args(argv)
    if not arguments.sentences.is_file():
        parser.error(f"--sentences: {arguments.sentences} does not exist")
    return arguments


def main(argv=None) -> None:
    arguments = parse_arguments(argv)
    sentences = read_lines(arguments.sentences)[: arguments.count]
    print(f"{arguments.run}, {len(sentences)} sentences from {arguments.sentences}")
    print(
        f"each row: at most {arguments.requests} requests or {arguments.seconds} s, "
        "after one warm-up request of each size"
    )
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        exports = export_both(arguments.run, Path(folder), xla=arguments.xla)
        servers = {
            setting: stack.enter_context(LoadServer(setting, exports))
            for setting in engine_settings(arguments)
        }
        results = measure(servers, sentences, arguments)
    print_table(results)
    print_ratios(results)


if __name__ == "__main__":
    main()
