r"""BLEU against decoding speed as the beam grows, per trained model (SCONES paper, Figure 2).

    python -m benchmarks.bleu_vs_speed --runs runs/multi30k-softmax runs/multi30k-scones-a0.5 \
        --source ../shared/data/multi30k-en-de/test_2016_flickr.en \
        --reference ../shared/data/multi30k-en-de/test_2016_flickr.de --out bleu_vs_speed.png

Each run folder holds a trained `model.keras` and its `spm.model` (as `training.train` writes
them). For every model and beam size (1 is greedy search, the argmax of the raw logits; above 1,
beam search scored by the model's head), the whole source file is translated with `translate`
in batches of `--batch-size`, timed after one warm-up batch that traces the function, and scored
with sacrebleu. Models are interleaved per beam size, so machine noise hits all of them alike.
Prints a table (sentences/s, BLEU, mean output length) and draws BLEU against sentences/s, one
line per model, each point labelled with its beam size.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tfscones.data.text_lines import read_lines  # noqa: E402
from tfscones.decoding import Search, translate  # noqa: E402
from tfscones.evaluation import metrics  # noqa: E402
from tfscones.models import load_run  # noqa: E402


def search_for(beam_size: int) -> Search:
    """Greedy search for a beam of one, beam search otherwise."""
    return Search() if beam_size == 1 else Search("beam", beam_size=beam_size)


def measure(model, tokenizer, sources, references, beam_size, batch_size) -> dict:
    """Translates `sources` with one beam size; returns speed, BLEU and output length."""
    search = search_for(beam_size)
    translate(model, tokenizer, sources[:batch_size], batch_size, search)
    start = time.perf_counter()
    hypotheses = translate(model, tokenizer, sources, batch_size, search)
    seconds = time.perf_counter() - start
    return {
        "sentences_per_second": len(sources) / seconds,
        "bleu": metrics.corpus_bleu(hypotheses, references).score,
        "mean_words": sum(len(h.split()) for h in hypotheses) / len(hypotheses),
    }


def plot(results: dict[str, list[tuple[int, dict]]], out: Path) -> None:
    """BLEU against sentences/s, one line per model, points labelled with the beam size."""
    figure, axes = plt.subplots(figsize=(6, 4))
    for name, points in results.items():
        speeds = [point["sentences_per_second"] for _, point in points]
        scores = [point["bleu"] for _, point in points]
        axes.plot(speeds, scores, marker="o", label=name)
        for (beam_size, _), x, y in zip(points, speeds, scores, strict=True):
            axes.annotate(str(beam_size), (x, y), textcoords="offset points", xytext=(4, 4))
    axes.set_xscale("log")
    axes.set_xlabel("decoding speed (sentences/s, log scale)")
    axes.set_ylabel("BLEU")
    axes.set_title("BLEU vs decoding speed (labels: beam size)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, nargs="+", required=True, help="run folders")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--limit", type=int, default=0, help="first N sentences only (0: all)")
    parser.add_argument("--out", type=Path, default=Path("bleu_vs_speed.png"))
    arguments = parser.parse_args(argv)
    for path in [*arguments.runs, arguments.source, arguments.reference]:
        if not path.exists():
            parser.error(f"{path} does not exist")
    return arguments


def main(argv=None) -> None:
    arguments = parse_arguments(argv)
    sources = read_lines(arguments.source)
    references = read_lines(arguments.reference)
    if arguments.limit:
        sources, references = sources[: arguments.limit], references[: arguments.limit]
    models = {run.name: load_run(run) for run in arguments.runs}
    results: dict[str, list[tuple[int, dict]]] = {name: [] for name in models}
    for beam_size in arguments.beams:
        for name, (model, tokenizer) in models.items():
            point = measure(model, tokenizer, sources, references, beam_size, arguments.batch_size)
            results[name].append((beam_size, point))
    print(f"{len(sources)} sentences, batch {arguments.batch_size}, {metrics.bleu_signature()}")
    print(f"| {'model':<28} | beam | sentences/s | BLEU  | words/sentence |")
    print(f"|{'-' * 30}|------|-------------|-------|----------------|")
    for name, points in results.items():
        for beam_size, point in points:
            print(
                f"| {name:<28} | {beam_size:>4} | {point['sentences_per_second']:>11.1f} "
                f"| {point['bleu']:>5.2f} | {point['mean_words']:>14.2f} |"
            )
    plot(results, arguments.out)
    print(f"plot: {arguments.out}")


if __name__ == "__main__":
    main()
