"""A serving process for the load benchmark: one engine, loaded as a server loads it.

    python -m benchmarks.load_server savedmodel EXPORT_DIR --threads 2 --side-by-side 0
    python -m benchmarks.load_server ctranslate2 EXPORT_DIR --threads 1 --side-by-side 2 \
        --limits '{"max_source_tokens": ...}'

`savedmodel`: the exported SavedModel loaded by `tf.saved_model.load` in a process that imports
TensorFlow and tensorflow-text (whose SentencePiece ops the export holds, as TF Serving links
them) and nothing of tfscones, so that its time and peak memory are the SavedModel's: its
`translate` (greedy) and `translate_beam` signatures, with `--threads` intra-op threads (the
threads one op may use: `--tensorflow_intra_op_parallelism`) and `--side-by-side` inter-op
threads (the threads that run ops side by side for all requests in flight:
`--tensorflow_inter_op_parallelism`; 0, TF Serving's default, lets TensorFlow choose, one per
core). `ctranslate2`: tfscones's float32 `CTranslate2Translator` with `--threads` as its
`intra_threads` and `--side-by-side` as its `inter_threads` (workers).

Jobs come on standard input, one JSON object a line (`requests`, `beam_size`, `clients`,
`max_requests`, `max_seconds`); for each, after one untimed warm-up request of each request
size (`--warm-every-request`: every request once, for an XLA export, which compiles once per
shape), `benchmarks.load_generator.drive_load` drives the engine in this process and one line
`RESULT {json}` goes to standard output: the `LoadResult`'s fields and `peak_bytes`, the
process's peak resident memory so far. The process ends when its input does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (registers the SentencePiece ops)

from benchmarks.load_generator import drive_load, peak_memory_bytes  # noqa: E402

RESULT_PREFIX = "RESULT "
SAVEDMODEL = "savedmodel"
CTRANSLATE2 = "ctranslate2"
BEAM_SIGNATURE = "translate_beam"


class SavedModelServer:
    """The SavedModel's greedy and beam signatures, text in, text out.

    Args:
        export_dir: The SavedModel's folder.
        threads: Intra-op threads (0: TensorFlow chooses).
        side_by_side: Inter-op threads (0: TensorFlow chooses).

    TensorFlow's thread pools are set here: make it before TensorFlow runs anything.
    """

    def __init__(self, export_dir: Path, threads: int, side_by_side: int):
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(side_by_side)
        loaded = tf.saved_model.load(str(export_dir))
        self.greedy = loaded.signatures["translate"]
        self.beam = loaded.signatures.get(BEAM_SIGNATURE)

    def translate(self, sentences: list[str], beam_size: int) -> list[str]:
        """The translations of one request."""
        function = self.greedy if beam_size == 1 else self.beam
        outputs = function(source=tf.constant(sentences))
        return [text.decode("utf-8") for text in outputs["translations"].numpy()]


class CTranslate2Server:
    """tfscones's float32 CTranslate2 translator, under the SavedModel's request limits.

    Args:
        export_dir: The CTranslate2 export's folder.
        threads: CTranslate2's `intra_threads`.
        side_by_side: CTranslate2's `inter_threads`.
        limits: The SavedModel's `RequestLimits`, as `RequestLimits.to_dict` writes them.
    """

    def __init__(self, export_dir: Path, threads: int, side_by_side: int, limits: dict):
        from tfscones.serving import RequestLimits
        from tfscones.serving.ctranslate2_translator import CTranslate2Translator

        self.translator = CTranslate2Translator(
            export_dir, RequestLimits.from_dict(limits), "float32", threads, side_by_side
        )

    def translate(self, sentences: list[str], beam_size: int) -> list[str]:
        """The translations of one request."""
        return [output.text for output in self.translator.translate(sentences, beam_size)]


def serve(server, job: dict, warm_every_request: bool = False) -> dict:
    """One job's load on `server`, after warm-up requests: the result's fields.

    The warm-up is one request of each size, or every request once (`warm_every_request`: an
    XLA export compiles once per request shape, which a server does once and for all).
    """
    requests, beam_size = job["requests"], job["beam_size"]
    if warm_every_request:
        warm_ups = requests
    else:
        sizes = sorted({len(request) for request in requests})
        warm_ups = [next(r for r in requests if len(r) == size) for size in sizes]
    for request in warm_ups:
        server.translate(request, beam_size)
    result = drive_load(
        lambda request: server.translate(request, beam_size),
        requests,
        job["clients"],
        job["max_requests"],
        job["max_seconds"],
    )
    return {**result._asdict(), "peak_bytes": peak_memory_bytes()}


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", choices=[SAVEDMODEL, CTRANSLATE2])
    parser.add_argument("export_dir", type=Path)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--side-by-side", type=int, required=True)
    parser.add_argument("--limits", type=json.loads, default=None, help="CTranslate2's limits")
    parser.add_argument(
        "--warm-every-request",
        action="store_true",
        help="send every request of a job once, untimed, first (an XLA export)",
    )
    return parser.parse_args(argv)


def main(argv=None) -> None:
    arguments = parse_arguments(argv)
    if arguments.engine == SAVEDMODEL:
        server = SavedModelServer(arguments.export_dir, arguments.threads, arguments.side_by_side)
    else:
        server = CTranslate2Server(
            arguments.export_dir, arguments.threads, arguments.side_by_side, arguments.limits
        )
    for line in sys.stdin:
        result = serve(server, json.loads(line), arguments.warm_every_request)
        print(RESULT_PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
