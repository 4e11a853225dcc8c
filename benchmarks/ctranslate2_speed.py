"""Decoding speed of the exported SavedModel against CTranslate2, on the same softmax weights.

    pip install ".[ctranslate2]"
    python -m benchmarks.ctranslate2_speed --run runs/demo-softmax \
        --sentences tfscones/data/demo/test.de --threads 1

The run's model is exported as our SavedModel (`tfscones.serving.export_run`, 4 beams, loaded
back with `tf.saved_model.load`) and exported for CTranslate2
(`tfscones.serving.ctranslate2_export`), which decodes under the SavedModel's source and output
limits and scores without length penalty (`tfscones.serving.ctranslate2_translator`). The run
must be a softmax model: beam search on CTranslate2 is exact for softmax only.

First the check: the first `--check` sentences (200), one per request, greedy and with 4 beams;
CTranslate2's translations must equal the SavedModel's and their scores (sums of log-softmax,
EOS included) differ by at most `--tolerance` (5e-5). The tolerance is CTranslate2's: its
log-softmax (vectorised exp and log) puts a demo sentence's score up to 2.6e-5 (on average
1.1e-5) above the float64 log-softmax of its own logits, while those logits are within 1e-5 of
ours. How many of CTranslate2's int8 translations equal the SavedModel's is shown, not required.

Then the time to translate all the sentences, text in, text out, SentencePiece included on both
sides, in requests of 1, 4 and 32 sentences (`--batch-sizes`) taken in file order: the SavedModel's
`translate` and `translate_beam` signatures, and CTranslate2 with float32 weights and, in brackets,
with int8 weights (quantised when the model loads). Both get `--threads` threads: TensorFlow's
intra-op pool (its inter-op pool 1), set before TensorFlow runs anything, and CTranslate2's
`intra_threads` (`inter_threads` 1). Each time is the median of `--repeats` passes over the
sentences, after one warm-up request per configuration; within a pass every configuration runs
once, so machine noise hits them alike; each decoder is timed in a fresh process of its own
(`benchmarks.decoder_process` says why). The last column is SavedModel time over CTranslate2 time.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import tempfile
from pathlib import Path
from typing import NamedTuple

from tfscones.commands.argument_types import decodable_run, positive_int  # noqa: E402
from tfscones.native_logs import import_tensorflow_quietly

import_tensorflow_quietly()

import tensorflow as tf  # noqa: E402

from benchmarks.decoder_process import DecoderProcess, time_passes  # noqa: E402
from benchmarks.engine_threads import run_tensorflow_on_threads  # noqa: E402
from tfscones.data.text_lines import read_lines  # noqa: E402
from tfscones.serving import RequestLimits, export_run, standard_searches  # noqa: E402
from tfscones.serving.ctranslate2_export import export_ctranslate2  # noqa: E402
from tfscones.serving.ctranslate2_translator import CTranslate2Translator  # noqa: E402
from tfscones.serving.export import ExportSettings  # noqa: E402

BATCH_SIZES = (1, 4, 32)
BEAM_SIZE = 4
BEAM_SIZES = (1, BEAM_SIZE)
SAVEDMODEL = "SavedModel"
CTRANSLATE2 = "CTranslate2"
CTRANSLATE2_INT8 = "CTranslate2 int8"
DECODERS = (SAVEDMODEL, CTRANSLATE2, CTRANSLATE2_INT8)


class SavedModelDecoder:
    """The exported SavedModel's `translate` (greedy) and `translate_beam` signatures.

    Args:
        export_dir: The SavedModel, exported with `beam_size` beams.
        beam_size: Its beams.
    """

    def __init__(self, export_dir: Path, beam_size: int):
        loaded = tf.saved_model.load(str(export_dir))
        self.functions = {
            1: (loaded.signatures["translate"], "scores"),
            beam_size: (loaded.signatures["translate_beam"], "log_scores"),
        }

    def translate(self, sentences: list[str], beam_size: int) -> list[tuple[str, float]]:
        """`(translation, sum of log-probabilities)` of each sentence of one request."""
        function, score_key = self.functions[beam_size]
        outputs = function(source=tf.constant(sentences))
        texts = [text.decode("utf-8") for text in outputs["translations"].numpy()]
        return list(zip(texts, outputs[score_key].numpy().tolist(), strict=True))


def batches(items: list, batch_size: int) -> list[list]:
    return [items[i : i + batch_size] for i in range(0, len(items), batch_size)]


def search_name(beam_size: int) -> str:
    return "greedy" if beam_size == 1 else f"beam {beam_size}"


def one_at_a_time(decoder, sentences: list[str], beam_size: int) -> list[tuple[str, float]]:
    return [output for sentence in sentences for output in decoder.translate([sentence], beam_size)]


class Agreement(NamedTuple):
    """How two decoders' outputs on the same sentences compare.

    Attributes:
        differing: Indices of the sentences whose translations differ.
        largest_difference: The largest score difference among identical translations.
    """

    differing: list[int]
    largest_difference: float


def agreement(expected: list[tuple[str, float]], outputs: list[tuple[str, float]]) -> Agreement:
    pairs = list(zip(expected, outputs, strict=True))
    differing = [i for i, (ours, theirs) in enumerate(pairs) if ours[0] != theirs[0]]
    differences = [abs(ours[1] - theirs[1]) for ours, theirs in pairs if ours[0] == theirs[0]]
    return Agreement(differing, max(differences, default=0.0))


def check(decoders: dict, sentences: list[str], tolerance: float) -> bool:
    """Compares CTranslate2's translations and scores with the SavedModel's; prints the result.

    Returns:
        Whether every float32 translation is identical and every score within `tolerance`.
    """
    count = len(sentences)
    print(f"\nCheck: the first {count} sentences, one per request")
    passed = True
    for beam_size in BEAM_SIZES:
        expected = one_at_a_time(decoders[SAVEDMODEL], sentences, beam_size)
        outputs = one_at_a_time(decoders[CTRANSLATE2], sentences, beam_size)
        fp32 = agreement(expected, outputs)
        int8 = agreement(expected, one_at_a_time(decoders[CTRANSLATE2_INT8], sentences, beam_size))
        ok = not fp32.differing and fp32.largest_difference <= tolerance
        passed &= ok
        print(
            f"- {search_name(beam_size)}: {count - len(fp32.differing)} of {count} translations "
            f"identical, largest score difference {fp32.largest_difference:.1e} "
            f"(tolerance {tolerance:.0e}): {'pass' if ok else 'FAIL'}\n"
            f"  int8: {count - len(int8.differing)} of {count} translations identical "
            "(not required)"
        )
        for index in fp32.differing[:3]:
            print(f"    {sentences[index]!r}: {expected[index]} vs {outputs[index]}")
    return passed


def seconds_per_pass(
    timers: dict, sentences: list[str], repeats: int, batch_sizes: tuple[int, ...] = BATCH_SIZES
) -> dict:
    """Median seconds of one pass over the sentences, per (decoder, beam size, batch size).

    Args:
        timers: Per decoder name, `(requests, beam_size) -> (texts, seconds)`:
            `benchmarks.decoder_process.time_requests` with the decoder given.
        sentences: The sentences, in requests of each batch size, in file order.
        repeats: Timed passes; each configuration runs once per pass, after one warm-up request.
        batch_sizes: The request sizes timed.
    """
    rows = {
        (name, beam_size): (timer, beam_size)
        for name, timer in timers.items()
        for beam_size in BEAM_SIZES
    }
    return time_passes(rows, functools.partial(batches, sentences), batch_sizes, repeats)[1]


def print_table(seconds: dict, count: int, batch_sizes: tuple[int, ...] = BATCH_SIZES) -> None:
    print(f"\nTime for all {count} sentences; CTranslate2 float32 (int8)")
    print(
        "| search | batch | SavedModel s | CTranslate2 s | SavedModel sent/s "
        "| CTranslate2 sent/s | SavedModel / CTranslate2 |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for beam_size in BEAM_SIZES:
        for batch_size in batch_sizes:
            ours, fp32, int8 = (seconds[name, beam_size, batch_size] for name in DECODERS)
            print(
                f"| {search_name(beam_size)} | {batch_size} | {ours:.1f} "
                f"| {fp32:.1f} ({int8:.1f}) | {count / ours:.0f} "
                f"| {count / fp32:.0f} ({count / int8:.0f}) "
                f"| {ours / fp32:.1f}x ({ours / int8:.1f}x) |"
            )


class Exports(NamedTuple):
    """The run's model exported for both engines.

    Attributes:
        savedmodel: The SavedModel's folder (`BEAM_SIZE` beams).
        ctranslate2: The CTranslate2 export's folder (float32).
        limits: The SavedModel's request limits, as `RequestLimits.to_dict` writes them.
        savedmodel_xla: The SavedModel exported with its searches compiled by XLA, if asked for.
    """

    savedmodel: Path
    ctranslate2: Path
    limits: dict
    savedmodel_xla: Path | None = None


def export_both(
    run: Path, folder: Path, limits: RequestLimits | None = None, xla: bool = False
) -> Exports:
    """The run exported under `folder` as a SavedModel (with `limits`) and for CTranslate2.

    With `xla`, also as a SavedModel whose searches XLA compiles (`tfscones export --xla`).
    """
    settings = ExportSettings(
        standard_searches(beam_size=BEAM_SIZE, nbest=1), limits or RequestLimits()
    )
    info = export_run(folder / "savedmodel" / "1", run=run, settings=settings)
    model_dir = export_ctranslate2(folder / "ctranslate2", run=run)["path"]
    compiled = None
    if xla:
        compiled_settings = dataclasses.replace(settings, xla=True)
        compiled = export_run(folder / "savedmodel-xla" / "1", run=run, settings=compiled_settings)
    return Exports(
        Path(info["path"]),
        Path(model_dir),
        info["limits"],
        Path(compiled["path"]) if compiled else None,
    )


def build_decoder(name: str, exports: Exports, threads: int):
    """One of `DECODERS`, with `translate(sentences, beam_size)`."""
    if name == SAVEDMODEL:
        return SavedModelDecoder(exports.savedmodel, BEAM_SIZE)
    compute_type = "int8" if name == CTRANSLATE2_INT8 else "float32"
    limits = RequestLimits.from_dict(exports.limits)
    return CTranslate2Translator(exports.ctranslate2, limits, compute_type, threads)


def build_timed_decoder(name: str, exports: Exports, threads: int):
    """`build_decoder` for a fresh process (`DecoderProcess`): TensorFlow on `threads` threads."""
    run_tensorflow_on_threads(threads)
    return build_decoder(name, exports, threads)


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=decodable_run, required=True, help="training run folder")
    parser.add_argument("--sentences", type=Path, required=True, help="source sentences")
    parser.add_argument("--count", type=int, default=None, help="sentences timed (default all)")
    parser.add_argument("--check", type=int, default=200, help="sentences checked (0: none)")
    parser.add_argument("--tolerance", type=float, default=5e-5, help="largest score difference")
    parser.add_argument("--threads", type=positive_int, default=1, help="threads of each engine")
    parser.add_argument("--repeats", type=positive_int, default=1, help="timed passes (median)")
    parser.add_argument(
        "--batch-sizes",
        type=positive_int,
        nargs="+",
        default=list(BATCH_SIZES),
        help="sentences per request (default 1 4 32)",
    )
    arguments = parser.parse_args(argv)
    if not arguments.sentences.is_file():
        parser.error(f"{arguments.sentences} does not exist")
    return arguments


def main(argv=None) -> None:
    arguments = parse_arguments(argv)
    run_tensorflow_on_threads(arguments.threads)
    sentences = read_lines(arguments.sentences)[: arguments.count]
    print(f"{arguments.run}, {len(sentences)} sentences from {arguments.sentences}")
    print(f"{arguments.threads} thread(s) per engine, median of {arguments.repeats} pass(es)")
    batch_sizes = tuple(arguments.batch_sizes)
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as processes:
        exports = export_both(arguments.run, Path(folder))
        passed = not arguments.check or check(
            {name: build_decoder(name, exports, arguments.threads) for name in DECODERS},
            sentences[: arguments.check],
            arguments.tolerance,
        )
        timers = {
            name: processes.enter_context(
                DecoderProcess(build_timed_decoder, name, exports, arguments.threads)
            ).time_requests
            for name in DECODERS
        }
        seconds = seconds_per_pass(timers, sentences, arguments.repeats, batch_sizes)
        print_table(seconds, len(sentences), batch_sizes)
    if not passed:
        raise SystemExit("CTranslate2's outputs differ from the SavedModel's (see the check)")


if __name__ == "__main__":
    main()
