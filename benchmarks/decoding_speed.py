"""Decoding speed of the exported SavedModel, and of our decoders against keras-hub's samplers.

    python -m benchmarks.decoding_speed --run runs/multi30k-softmax \
        --sentences ../shared/data/multi30k-en-de/test_2016_flickr.en

Table 1 exports the run's model (`tfscones.serving.TranslationModule`, one SavedModel per beam
size, as `export.savedmodel` writes it), loads it back with `tf.saved_model.load` and times its
signatures, text in and text out, SentencePiece included: `translate` (greedy) and
`translate_beam` with 2, 4 and 8 beams, at 1, 4 and 32 sentences per request.

Table 2 times token ids in, token ids out, in this process with the same weights: our greedy
search and beam search (`tfscones.decoding`, in `tf.function`) against keras-hub's
`GreedySampler` and `BeamSampler` (`benchmarks.keras_hub_samplers`). Every decoder gets the same
sources and the same output width, and stops when every sentence has produced EOS.

Each figure is the median over `--repeats` passes over the sentences, after one warm-up pass;
within a repeat every configuration runs once, so machine noise hits them alike. Targets
(issue 4): greedy at least 3.5x beam-4 (the SCONES paper measured 3.9x), our beam-4 at least
1.5x keras-hub's `BeamSampler`.

`--baseline DIR` times another SavedModel of the same run beside this one (for example one
exported by an older version: `tfscones export --run RUN --beam-size 4 --nbest 1 --out DIR`), in the
same process and the same repeats, and checks that both translate every sentence alike.
`--threads 1` runs TensorFlow on one thread (intra- and inter-op), as a CTranslate2 comparison
with `intra_threads=1` needs; `--savedmodel-only` skips Table 2. Issue 14's figures:

    python -m benchmarks.decoding_speed --run runs/demo-softmax \
        --sentences tfscones/data/demo/test.de --count 1000 --threads 1 --beam-sizes 4 \
        --savedmodel-only --baseline exports/demo-softmax-before/1
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from benchmarks.keras_hub_samplers import keras_hub_decode  # noqa: E402
from tfscones.commands.argument_types import decodable_run  # noqa: E402
from tfscones.data.text_lines import read_lines  # noqa: E402
from tfscones.data.vocab_ids import PAD_ID  # noqa: E402
from tfscones.decoding import beam_search, greedy_decode, source_ids_for_model  # noqa: E402
from tfscones.models import load_run  # noqa: E402
from tfscones.serving import (  # noqa: E402
    TranslationModule,
    standard_searches,
    write_savedmodel,
)

BATCH_SIZES = (1, 4, 32)
BEAM_SIZES = (2, 4, 8)
BASELINE = "baseline "


def batches(items, batch_size: int) -> list:
    return [items[i : i + batch_size] for i in range(0, len(items), batch_size)]


def seconds_per_pass(calls: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Median seconds of each call (one pass over the sentences), interleaved, after a warm-up."""
    for call in calls.values():
        call()
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in seconds.items()}


def sentences_per_second(
    calls: dict[str, Callable[[], None]], count: int, repeats: int
) -> dict[str, float]:
    """Median sentences/s of each call (one pass over `count` sentences), interleaved."""
    return {name: count / seconds for name, seconds in seconds_per_pass(calls, repeats).items()}


def export_modules(model, tokenizer, folder: Path, beam_sizes) -> dict[int, object]:
    """One loaded SavedModel per beam size."""
    loaded = {}
    for beam_size in beam_sizes:
        searches = standard_searches(beam_size=beam_size, nbest=1)
        module = TranslationModule(model, tokenizer, searches, freeze_step_weights=True)
        out = folder / f"beam{beam_size}" / "1"
        write_savedmodel(module, out)
        loaded[beam_size] = tf.saved_model.load(str(out))
    return loaded


def load_baseline(folder: Path) -> dict[int, object]:
    """A SavedModel exported elsewhere, under its beam size (from its export record).

    The baseline is usually older code's export: records before the decoder registry hold the
    beam size at the top, later ones under their `translate_beam` search.
    """
    info = json.loads((folder / "assets.extra" / "tfscones_export.json").read_text())
    searches = info.get("searches")
    beam_size = searches["translate_beam"]["beam_size"] if searches else info["beam_size"]
    return {int(beam_size): tf.saved_model.load(str(folder))}


def savedmodel_calls(
    loaded, sentences: list[str], batch_sizes, prefix: str = ""
) -> dict[str, Callable[[], None]]:
    calls = {}
    for batch_size in batch_sizes:
        requests = [tf.constant(batch) for batch in batches(sentences, batch_size)]
        greedy = next(iter(loaded.values())).signatures["translate"]
        calls[f"{prefix}greedy@{batch_size}"] = lambda g=greedy, r=requests: [
            g(source=x) for x in r
        ]
        for beam_size, module in loaded.items():
            function = module.signatures["translate_beam"]
            calls[f"{prefix}beam{beam_size}@{batch_size}"] = lambda f=function, r=requests: [
                f(source=x) for x in r
            ]
    return calls


def differences(loaded, baseline, sentences: list[str], batch_size: int = 32) -> list[str]:
    """Sentences that the two SavedModels translate differently (greedy or beam), as lines."""
    found = []
    requests = [tf.constant(batch) for batch in batches(sentences, batch_size)]
    for beam_size, reference in baseline.items():
        pairs = {"translate": next(iter(loaded.values())), "translate_beam": loaded.get(beam_size)}
        for signature, module in pairs.items():
            if module is None:
                continue
            for request in requests:
                ours = module.signatures[signature](source=request)
                theirs = reference.signatures[signature](source=request)
                for i, (a, b) in enumerate(
                    zip(ours["translations"].numpy(), theirs["translations"].numpy(), strict=True)
                ):
                    score_a, score_b = float(ours["scores"][i]), float(theirs["scores"][i])
                    if a != b or not math.isclose(score_a, score_b, rel_tol=1e-4, abs_tol=1e-4):
                        found.append(f"{signature}: {a!r} ({score_a:.5f}) vs {b!r} ({score_b:.5f})")
    return found


def ids_calls(model, source_batches, width: int) -> dict[str, Callable[[], None]]:
    """Our decoders and keras-hub's, ids in and ids out, one `tf.function` each."""
    lengths = {"max_length": width, "max_length_a": 0.0, "max_length_b": float(width)}
    spec = [tf.TensorSpec([None, None], tf.int32)]
    decoders = {
        "ours greedy": lambda s: greedy_decode(model, s, **lengths).ids,
        "keras-hub greedy": lambda s: keras_hub_decode(model, s, width, 1),
        "ours beam4": lambda s: beam_search(model, s, beam_size=4, **lengths).ids,
        "keras-hub beam4": lambda s: keras_hub_decode(model, s, width, 4),
    }
    calls = {}
    for name, decode in decoders.items():
        function = tf.function(decode, input_signature=spec)
        for batch_size, sources in source_batches.items():
            calls[f"{name}@{batch_size}"] = lambda f=function, s=sources: [f(x) for x in s]
    return calls


def padded_source_batches(
    tokenizer, sentences, max_length, batch_sizes
) -> dict[int, list[tf.Tensor]]:
    ids = source_ids_for_model(tokenizer, tf.constant(sentences), max_length)
    result = {}
    for batch_size in batch_sizes:
        result[batch_size] = []
        for start in range(0, len(sentences), batch_size):
            batch = ids[start : start + batch_size]
            width = 8 * math.ceil(int(tf.reduce_max(batch.row_lengths())) / 8)
            result[batch_size].append(batch.to_tensor(default_value=PAD_ID, shape=[None, width]))
    return result


def print_table(
    title: str, rows: list[str], figures: dict[str, float], batch_sizes, unit: str = "sentences/s"
) -> None:
    print(f"\n{title} ({unit})")
    print(f"| {'decoder':<18} | " + " | ".join(f"batch {b:>2}" for b in batch_sizes) + " |")
    print(f"|{'-' * 20}|" + "|".join("-" * 10 for _ in batch_sizes) + "|")
    for row in rows:
        cells = " | ".join(f"{figures[f'{row}@{b}']:>8.2f}" for b in batch_sizes)
        print(f"| {row:<18} | {cells} |")


def print_ratios(
    title: str, ratios: dict[str, tuple[str, str, float | None]], figures, batch_sizes
) -> None:
    """Prints each ratio per batch size and, where there is a target, whether it is met."""
    print(f"\n{title}")
    for label, (numerator, denominator, target) in ratios.items():
        values = [figures[f"{numerator}@{b}"] / figures[f"{denominator}@{b}"] for b in batch_sizes]
        cells = ", ".join(f"batch {b}: {v:.2f}x" for b, v in zip(batch_sizes, values, strict=True))
        if target is None:
            print(f"- {label}: {cells}")
        else:
            verdict = "meets" if min(values) >= target else "MISSES"
            print(f"- {label}: {cells} (target >= {target}x: {verdict})")


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=decodable_run, required=True, help="training run folder")
    parser.add_argument("--sentences", type=Path, required=True, help="source sentences")
    parser.add_argument("--count", type=int, default=64, help="sentences decoded per pass")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, help="TensorFlow intra- and inter-op threads")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES))
    parser.add_argument("--beam-sizes", type=int, nargs="+", default=list(BEAM_SIZES))
    parser.add_argument("--baseline", type=Path, help="another SavedModel to time beside ours")
    parser.add_argument("--savedmodel-only", action="store_true", help="skip Table 2")
    arguments = parser.parse_args(argv)
    if not arguments.sentences.is_file():
        parser.error(f"{arguments.sentences} does not exist")
    if arguments.baseline and not (arguments.baseline / "saved_model.pb").is_file():
        parser.error(f"{arguments.baseline} holds no saved_model.pb")
    return arguments


def time_savedmodels(arguments, model, tokenizer, sentences) -> None:
    """Table 1, with the baseline's rows and its differences from ours if there is one."""
    batch_sizes = arguments.batch_sizes
    with tempfile.TemporaryDirectory() as folder:
        loaded = export_modules(model, tokenizer, Path(folder), arguments.beam_sizes)
        calls = savedmodel_calls(loaded, sentences, batch_sizes)
        rows = ["greedy"] + [f"beam{b}" for b in arguments.beam_sizes]
        if arguments.baseline:
            baseline = load_baseline(arguments.baseline)
            calls.update(savedmodel_calls(baseline, sentences, batch_sizes, BASELINE))
            rows += [BASELINE + "greedy"] + [f"{BASELINE}beam{b}" for b in baseline]
            different = differences(loaded, baseline, sentences)
            print(f"\nsentences translated differently from the baseline: {len(different)}")
            for line in different[:20]:
                print(f"- {line}")
        seconds = seconds_per_pass(calls, arguments.repeats)
    figures = {name: len(sentences) / value for name, value in seconds.items()}
    title = "Table 1: exported SavedModel, text in, text out"
    print_table(title, rows, figures, batch_sizes)
    print_table(title, rows, seconds, batch_sizes, unit=f"seconds for {len(sentences)} sentences")
    if 4 in arguments.beam_sizes:
        ratios = {"SavedModel": ("greedy", "beam4", 3.5)}
        print_ratios("greedy speed over beam-4", ratios, figures, batch_sizes)
    if arguments.baseline:
        ratios = {
            f"{row}": (row, BASELINE + row, None)
            for row in rows
            if not row.startswith(BASELINE) and BASELINE + row in rows
        }
        print_ratios("ours over the baseline (speed)", ratios, figures, batch_sizes)


def time_decoders(arguments, model, tokenizer, sentences) -> None:
    """Table 2: our decoders and keras-hub's samplers, ids in and ids out."""
    batch_sizes = arguments.batch_sizes
    sources = padded_source_batches(tokenizer, sentences, model.max_sequence_length, batch_sizes)
    width = model.max_sequence_length
    figures = sentences_per_second(
        ids_calls(model, sources, width), len(sentences), arguments.repeats
    )
    print_table(
        f"Table 2: ids in, ids out, output width {width}",
        ["ours greedy", "keras-hub greedy", "ours beam4", "keras-hub beam4"],
        figures,
        batch_sizes,
    )
    print_ratios(
        "ours over keras-hub",
        {
            "beam-4": ("ours beam4", "keras-hub beam4", 1.5),
            "greedy": ("ours greedy", "keras-hub greedy", None),
        },
        figures,
        batch_sizes,
    )


def main(argv=None) -> None:
    arguments = parse_arguments(argv)
    if arguments.threads:
        tf.config.threading.set_intra_op_parallelism_threads(arguments.threads)
        tf.config.threading.set_inter_op_parallelism_threads(arguments.threads)
    model, tokenizer = load_run(arguments.run)
    sentences = read_lines(arguments.sentences)[: arguments.count]
    print(f"{arguments.run}: {model.count_params():,} parameters, head {model.head}")
    print(f"{len(sentences)} sentences from {arguments.sentences}, median of {arguments.repeats}")
    print(f"threads: {arguments.threads or 'TensorFlow default'}")
    time_savedmodels(arguments, model, tokenizer, sentences)
    if not arguments.savedmodel_only:
        time_decoders(arguments, model, tokenizer, sentences)


if __name__ == "__main__":
    main()
