"""SCONES greedy against softmax beam search on CTranslate2: BLEU and sentences/s.

    pip install ".[ctranslate2]"
    python -m benchmarks.ctranslate2_heads --softmax RUN --scones RUN \
        --source test.en --reference test.de --threads 1

The claim (Stahlberg & Kumar 2022, Figure 2): SCONES greedy search reaches softmax beam search's
BLEU, so on the fastest engine it gives beam-quality translations at greedy speed. Both runs are
exported as SavedModels (4 beams) and for CTranslate2 (`tfscones.serving.ctranslate2_export`,
float32; int8 weights are quantised from it when the model loads). Rows: SCONES greedy, softmax
greedy and softmax beam 4 on CTranslate2 float32, CTranslate2 int8 and the SavedModel (greedy is
exact on CTranslate2 for every head, beam search for softmax only). Columns: BLEU (sacrebleu) of
the whole file translated in requests of the largest batch size, and sentences/s at each
`--batch-sizes` (text in, text out, SentencePiece included), the median of `--repeats` passes
after one warm-up request; within a pass every row runs once, so machine noise hits them alike.
Each decoder (an engine's model) runs in a fresh process of its own, as a server would run it,
idle while the others run (`benchmarks.decoder_process` says why). The last lines give SCONES
greedy's sentences/s over softmax beam 4's on CTranslate2 and both BLEU scores to three decimals
(target: at least 2x, BLEU no lower). CTranslate2 takes one output-length limit
per call and our limit is per sentence (`CTranslate2Translator`): greedy search decodes a batch in
one call (plus one for the few sentences that ran past their limit), beam search in one call per
distinct limit, so at batch sizes above 1 beam search's CTranslate2 rows are slower than
CTranslate2 could be with one limit for all; the ratio at batch 1 does not depend on this.
`--output-limit N` gives every sentence the same limit, N tokens, on both engines (the
SavedModel's `max_length_a = 0`, `max_length_b = N`): every CTranslate2 batch is then one call.

Every engine gets `--threads` threads: TensorFlow's intra-op pool (its inter-op pool 1), fixed
before TensorFlow runs anything, and CTranslate2's `intra_threads`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import tempfile
from pathlib import Path

from tfscones.native_logs import import_tensorflow_quietly

import_tensorflow_quietly()

from benchmarks.ctranslate2_speed import (  # noqa: E402
    BEAM_SIZE,
    CTRANSLATE2,
    CTRANSLATE2_INT8,
    SAVEDMODEL,
    Exports,
    batches,
    build_timed_decoder,
    export_both,
)
from benchmarks.decoder_process import DecoderProcess, time_passes  # noqa: E402
from tfscones.commands.argument_types import decodable_run, positive_int  # noqa: E402
from tfscones.data.text_lines import read_lines  # noqa: E402
from tfscones.decoding import OutputLimits  # noqa: E402
from tfscones.evaluation.metrics import corpus_bleu  # noqa: E402
from tfscones.reproduction.records import code_version_label, read_json  # noqa: E402
from tfscones.run_folder import RunFolder  # noqa: E402
from tfscones.serving import RequestLimits  # noqa: E402

ROWS = (("SCONES", 1), ("softmax", 1), ("softmax", BEAM_SIZE))
ENGINES = (CTRANSLATE2, CTRANSLATE2_INT8, SAVEDMODEL)


def export_models(
    runs: dict[str, Path], folder: Path, output_limit: int | None
) -> dict[str, Exports]:
    """Per model name: its run exported as a SavedModel and for CTranslate2 under `folder`."""
    output = OutputLimits(max_length_a=0.0, max_length_b=float(output_limit or 0))
    limits = RequestLimits(output=output) if output_limit else RequestLimits()
    return {name: export_both(run, folder / name, limits) for name, run in runs.items()}


def measure(
    timers: dict, sentences: list[str], batch_sizes: tuple[int, ...], repeats: int
) -> tuple[dict, dict]:
    """Translations (at the largest batch size) and median seconds per pass of every row.

    Args:
        timers: Per (engine, model name), `(requests, beam_size) -> (texts, seconds)`:
            `benchmarks.decoder_process.time_requests` with the decoder given.
        sentences: The sentences every row translates, in requests of each batch size.
        batch_sizes: The request sizes timed.
        repeats: Timed passes; each row runs once per pass, after one warm-up request.

    Returns:
        `(translations, seconds)`: per (engine, model, beam size) the translated texts, and per
        (engine, model, beam size, batch size) the median seconds of one pass.
    """
    rows = {
        (engine, name, beam_size): (timer, beam_size)
        for (engine, name), timer in timers.items()
        for row_name, beam_size in ROWS
        if row_name == name
    }
    return time_passes(rows, functools.partial(batches, sentences), batch_sizes, repeats)


def print_table(
    translations: dict, seconds: dict, references: list[str], batch_sizes: tuple[int, ...]
) -> None:
    """The table of rows, then SCONES greedy against softmax beam 4 on CTranslate2."""
    count = len(references)
    bleu = {key: corpus_bleu(texts, references).score for key, texts in translations.items()}
    speed_columns = " | ".join(f"sent/s, batch {size}" for size in batch_sizes)
    print(f"\n| engine | model | search | BLEU | {speed_columns} |")
    print("|---|---|---|---:|" + "---:|" * len(batch_sizes))
    for engine in ENGINES:
        for name, beam_size in ROWS:
            search = "greedy" if beam_size == 1 else f"beam {beam_size}"
            speeds = " | ".join(
                f"{count / seconds[engine, name, beam_size, size]:.1f}" for size in batch_sizes
            )
            print(
                f"| {engine} | {name} | {search} | {bleu[engine, name, beam_size]:.1f} | {speeds} |"
            )
    print()
    for engine in (CTRANSLATE2, CTRANSLATE2_INT8):
        scones, beam = bleu[engine, "SCONES", 1], bleu[engine, "softmax", BEAM_SIZE]
        ratios = ", ".join(
            f"{speed_ratio(seconds, engine, size):.2f}x at batch {size}" for size in batch_sizes
        )
        print(
            f"{engine}: SCONES greedy / softmax beam {BEAM_SIZE} sentences/s {ratios}; "
            f"BLEU {scones:.3f} against {beam:.3f} ({scones - beam:+.3f})"
        )


def speed_ratio(seconds: dict, engine: str, batch_size: int) -> float:
    """SCONES greedy's sentences/s over softmax beam search's, on one engine and batch size."""
    beam = seconds[engine, "softmax", BEAM_SIZE, batch_size]
    return beam / seconds[engine, "SCONES", 1, batch_size]


def describe_run(name: str, run: Path) -> str:
    """One line naming the model a row measures: where, on what and from which code it trained.

    Read from the run's `results.json`, so a record says which training run its figures belong
    to; a run without one is described by its path alone.
    """
    results = read_json(RunFolder(run).results)
    if results is None:
        return f"{name}: {run} (no results.json: training record unknown)"
    return (
        f"{name}: {run}, {results['steps']:,} steps on {results['machine']['description']}, "
        f"code {code_version_label(results.get('code'))}, "
        f"best dev BLEU {results['best_dev_bleu']:.1f}"
    )


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--softmax", type=decodable_run, required=True, help="softmax run")
    parser.add_argument("--scones", type=decodable_run, required=True, help="SCONES run")
    parser.add_argument("--source", type=Path, required=True, help="source sentences")
    parser.add_argument("--reference", type=Path, required=True, help="their references")
    parser.add_argument("--count", type=positive_int, help="first N sentences (default all)")
    parser.add_argument("--threads", type=positive_int, default=1, help="threads of each engine")
    parser.add_argument("--repeats", type=positive_int, default=1, help="timed passes (median)")
    parser.add_argument(
        "--output-limit", type=positive_int, help="one output limit, in tokens, for every sentence"
    )
    parser.add_argument(
        "--batch-sizes", type=positive_int, nargs="+", default=[1, 32], help="default 1 32"
    )
    arguments = parser.parse_args(argv)
    for path in (arguments.source, arguments.reference):
        if not path.is_file():
            parser.error(f"{path} does not exist")
    return arguments


def main(argv=None) -> None:
    arguments = parse_arguments(argv)
    sentences = read_lines(arguments.source)[: arguments.count]
    references = read_lines(arguments.reference)[: len(sentences)]
    print(describe_run("softmax", arguments.softmax))
    print(describe_run("SCONES", arguments.scones))
    print(f"{len(sentences)} sentences from {arguments.source}")
    print(f"{arguments.threads} thread(s) per engine, median of {arguments.repeats} pass(es)")
    if arguments.output_limit:
        print(f"every sentence may produce {arguments.output_limit} tokens, EOS included")
    runs = {"SCONES": arguments.scones, "softmax": arguments.softmax}
    batch_sizes = tuple(sorted(set(arguments.batch_sizes)))
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as processes:
        models = export_models(runs, Path(folder), arguments.output_limit)
        timers = {
            (engine, name): processes.enter_context(
                DecoderProcess(build_timed_decoder, engine, model, arguments.threads)
            ).time_requests
            for engine in ENGINES
            for name, model in models.items()
        }
        translations, seconds = measure(timers, sentences, batch_sizes, arguments.repeats)
    print_table(translations, seconds, references, batch_sizes)


if __name__ == "__main__":
    main()
