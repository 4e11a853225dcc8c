"""Two SavedModels of the same model, timed request by request in alternation.

    tfscones export --run RUN --beam-size 4 --nbest 1 --out BEFORE/1   # with the old code
    tfscones export --run RUN --beam-size 4 --nbest 1 --out AFTER/1    # with the new code
    python -m benchmarks.savedmodel_ab BEFORE/1 AFTER/1 \
        --sentences ../shared/data/multi30k-en-de/test_2016_flickr.en --batch-sizes 1 4 32

Whole passes over a file drift by more than a few per cent from one pass to the next on a shared
machine, more than the change an A/B is after. Here every request goes to both SavedModels, one
right after the other, the first of the two alternating from request to request, so a slow
stretch of the machine slows both alike. Each signature (`translate`, `translate_beam`) and
batch size gets one warm-up request per SavedModel, then the whole file; the table gives each
SavedModel's summed time and their ratio, and how many requests were translated differently.
TensorFlow runs on `--threads` threads (intra-op; inter-op 1), as `benchmarks.ctranslate2_speed`.
An XLA export (`tfscones export --xla`) compiles once per request shape: `--warm-pass` sends
every request to both SavedModels once, untimed, before the timed pass, so that the table
compares compiled searches, not compilations.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tfscones.native_logs import import_tensorflow_quietly

import_tensorflow_quietly()

import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (registers the SentencePiece ops)

from benchmarks.engine_threads import run_tensorflow_on_threads  # noqa: E402
from tfscones.data.text_lines import read_lines  # noqa: E402

SIGNATURES = ("translate", "translate_beam")


def timed_call(signature, request: tf.Tensor) -> tuple[float, list[bytes]]:
    """Seconds of one call and its translations."""
    start = time.perf_counter()
    translations = signature(source=request)["translations"].numpy()
    return time.perf_counter() - start, translations.tolist()


def alternate(
    signatures: tuple, requests: list[tf.Tensor], warm_pass: bool = False
) -> tuple[list[float], int]:
    """Each signature's summed seconds, and how many requests the two translate differently.

    The first request (every request, with `warm_pass`) of each signature is a warm-up, not
    timed; the signature called first alternates from one request to the next.
    """
    for signature in signatures:
        for request in requests if warm_pass else requests[:1]:
            signature(source=request)
    seconds, differing = [0.0, 0.0], 0
    for index, request in enumerate(requests):
        order = (0, 1) if index % 2 == 0 else (1, 0)
        translations = [None, None]
        for which in order:
            elapsed, translations[which] = timed_call(signatures[which], request)
            seconds[which] += elapsed
        differing += translations[0] != translations[1]
    return seconds, differing


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path, help="a SavedModel version folder (A)")
    parser.add_argument("second", type=Path, help="another one of the same model (B)")
    parser.add_argument("--sentences", type=Path, required=True, help="source sentences")
    parser.add_argument("--count", type=int, default=None, help="sentences (default all)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4, 32])
    parser.add_argument("--threads", type=int, default=1, help="TensorFlow's intra-op threads")
    parser.add_argument(
        "--warm-pass",
        action="store_true",
        help="send every request once, untimed, first (an XLA export compiles per shape)",
    )
    arguments = parser.parse_args(argv)
    for folder in (arguments.first, arguments.second):
        if not (folder / "saved_model.pb").is_file():
            parser.error(f"{folder} holds no saved_model.pb")
    if not arguments.sentences.is_file():
        parser.error(f"{arguments.sentences} does not exist")
    if arguments.threads < 1 or min(arguments.batch_sizes) < 1:
        parser.error("--threads and every --batch-sizes value must be at least 1")
    return arguments


def main(argv=None) -> None:
    arguments = parse_arguments(argv)
    run_tensorflow_on_threads(arguments.threads)
    sentences = read_lines(arguments.sentences)[: arguments.count]
    loaded = [tf.saved_model.load(str(arguments.first)), tf.saved_model.load(str(arguments.second))]
    print(f"A: {arguments.first}\nB: {arguments.second}")
    warm = "every request once" if arguments.warm_pass else "one request"
    print(f"{len(sentences)} sentences, {arguments.threads} thread(s), warm-up: {warm}\n")
    print("| signature | batch | A s | B s | A / B (B's speed over A's) | requests differing |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in SIGNATURES:
        signatures = tuple(model.signatures[name] for model in loaded)
        for size in arguments.batch_sizes:
            requests = [
                tf.constant(sentences[i : i + size]) for i in range(0, len(sentences), size)
            ]
            (first, second), differing = alternate(signatures, requests, arguments.warm_pass)
            print(
                f"| {name} | {size} | {first:.2f} | {second:.2f} | {first / second:.3f} "
                f"| {differing} of {len(requests)} |"
            )


if __name__ == "__main__":
    main()
