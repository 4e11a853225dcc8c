"""Model errors and search errors of trained models on a test set, as one report.

    tfscones analyze --runs runs/multi30k-softmax runs/multi30k-scones-a0.2 \
        --source ../shared/data/multi30k-en-de/test_2016_flickr.en \
        --reference ../shared/data/multi30k-en-de/test_2016_flickr.de \
        --limit 200 --exact-sentences 100 --state-budget 20000 --out reports/multi30k

For every run, `tfscones.evaluation.analyze_model`: BLEU, length ratio and speed against the beam
size (SCONES Figs. 3-4), beam-search errors against exact search (Fig. 7), exact search's BLEU,
length ratio, budget hits and states (Fig. 5, Tables 6-7), exact-search vs empty-translation log
scores (Fig. 6), how often the empty translation beats beam-4 (entmax paper Table 4), expected
calibration error (Table 6) and mean support size (Table 5). Writes `OUT/report.md`,
`OUT/report.json` and the PNG plots beside them, and prints the report.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tfscones.commands.argument_types import non_negative_int, positive_int  # noqa: E402
from tfscones.data import read_sentence_pairs  # noqa: E402
from tfscones.decoding import DEFAULT_STATE_BUDGET  # noqa: E402
from tfscones.evaluation.analysis import DEFAULT_BEAM_SIZES, ModelAnalysis  # noqa: E402
from tfscones.evaluation.model_errors import score_summary  # noqa: E402
from tfscones.training import runner  # noqa: E402


def parse_arguments(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, nargs="+", required=True, help="run folders")
    parser.add_argument("--source", type=Path, required=True, help="test sources, one a line")
    parser.add_argument("--reference", type=Path, required=True, help="their references")
    parser.add_argument("--limit", type=positive_int, help="analyse only the first N sentences")
    parser.add_argument(
        "--exact-sentences",
        type=non_negative_int,
        default=100,
        help="exact search on the first N (0: none)",
    )
    parser.add_argument("--state-budget", type=positive_int, default=DEFAULT_STATE_BUDGET)
    parser.add_argument("--beams", type=positive_int, nargs="+", default=list(DEFAULT_BEAM_SIZES))
    parser.add_argument("--out", type=Path, default=Path("reports/analysis"))
    arguments = parser.parse_args(argv)
    for name in ("limit", "exact_sentences", "state_budget"):
        value = getattr(arguments, name)
        if value is not None and value < (0 if name == "exact_sentences" else 1):
            parser.error(f"--{name.replace('_', '-')} must be positive, got {value}")
    return arguments


def _number(value: float, digits: int = 1) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def summary_table(analyses: dict[str, ModelAnalysis]) -> list[str]:
    """One row per model: the headline numbers of every analysis."""
    lines = [
        "| model | greedy BLEU | beam-4 BLEU | exact BLEU | beam-4 BLEU (same) | exact len "
        "ratio | beam-4 len ratio | empty > beam-4 | exact = empty | budget hit | ECE | "
        "accuracy | support |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, analysis in analyses.items():
        exact, greedy = analysis.exact, analysis.beam(1)
        cells = [
            name,
            _number(greedy.bleu) if greedy else "-",
            _number(analysis.beam(4).bleu),
            _number(exact.bleu) if exact else "-",
            _number(exact.beam_bleu) if exact else "-",
            _number(exact.length_ratio, 3) if exact else "-",
            _number(exact.beam_length_ratio, 3) if exact else "-",
            _percent(analysis.empty_string_rate),
            _percent(exact.empty_fraction) if exact else "-",
            _percent(exact.incomplete_fraction) if exact else "-",
            _number(analysis.forced.expected_calibration_error, 4),
            _number(100 * analysis.forced.accuracy) + "%",
            _number(analysis.forced.mean_support_size),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def beam_table(analyses: dict[str, ModelAnalysis], field: str, render) -> list[str]:
    """One row per model, one column per beam size, of one `BeamPoint` field."""
    sizes = [point.beam_size for point in next(iter(analyses.values())).beam_curve]
    lines = [
        "| model | " + " | ".join(f"beam {size}" for size in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for name, analysis in analyses.items():
        cells = [render(getattr(point, field)) for point in analysis.beam_curve]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def exact_table(analyses: dict[str, ModelAnalysis]) -> list[str]:
    """Exact search: budget hits, states explored, speed and the log scores of Fig. 6."""
    lines = [
        "| model | sentences | budget | budget hit | better than beam-4 | states/s | states "
        "median / p90 / p99 / max | seconds | exact log score | empty log score |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, analysis in analyses.items():
        exact = analysis.exact
        if exact is None:
            continue
        states = exact.states_percentiles()
        lines.append(
            f"| {name} | {exact.sentences} | {exact.state_budget:,} "
            f"| {_percent(exact.incomplete_fraction)} | {_percent(exact.improved_fraction)} "
            f"| {exact.states_per_second:.0f} | {states['median']:.0f} / {states['p90']:.0f} / "
            f"{states['p99']:.0f} / {states['max']:.0f} | {exact.seconds:.0f} "
            f"| {_mean_std(exact.exact_scores)} | {_mean_std(exact.empty_scores)} |"
        )
    return lines


def _mean_std(scores: list[float]) -> str:
    summary = score_summary(scores)
    if not summary.num_finite:
        return f"-inf ({summary.num_neg_inf})"
    excluded = f" ({summary.num_neg_inf} -inf)" if summary.num_neg_inf else ""
    return f"{summary.mean:.2f} ± {summary.std:.2f}{excluded}"


def report_lines(analyses: dict[str, ModelAnalysis], source: Path, seconds: float) -> list[str]:
    """The whole markdown report."""
    first = next(iter(analyses.values()))
    exact = first.exact
    lines = [
        f"# Analysis of `{source}`",
        "",
        f"{first.sentences} sentences"
        + (f"; exact search on the first {exact.sentences}" if exact else "")
        + f". Total time {seconds:.0f} s; per model: "
        + ", ".join(f"{name} {a.seconds:.0f} s" for name, a in analyses.items())
        + ".",
        "",
        "## Summary",
        "",
        *summary_table(analyses),
        "",
        "Exact-search columns are on the exact-search sentences, beside beam-4 on the same "
        "ones; `empty > beam-4` is the fraction of all sentences whose empty translation "
        "outscores beam-4's (entmax paper Table 4); ECE has 10 bins (Table 6); support is the "
        "mean number of tokens with nonzero probability (Table 5).",
        "",
        "## BLEU against beam size (SCONES Fig. 3)",
        "",
        *beam_table(analyses, "bleu", _number),
        "",
        "## Length ratio against beam size (Fig. 4)",
        "",
        *beam_table(analyses, "length_ratio", lambda value: _number(value, 3)),
        "",
        "## Decoding speed, sentences per second",
        "",
        *beam_table(analyses, "sentences_per_second", _number),
    ]
    if exact:
        lines += [
            "",
            "## Beam-search errors against beam size (Fig. 7)",
            "",
            "Sentences whose beam translation scores below the best known translation (exact "
            "search's, or a wider beam's where exact search hit its budget).",
            "",
            *beam_table(analyses, "search_error_rate", _percent),
            "",
            "## Exact search (Table 7, Fig. 6)",
            "",
            *exact_table(analyses),
        ]
    return lines


@contextlib.contextmanager
def _figure(path: Path, size: tuple[float, float]):
    """Axes to draw on; on leaving, a legend is added and the figure saved to `path`."""
    figure, axes = plt.subplots(figsize=size)
    yield axes
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def plot_beam_curves(analyses: dict[str, ModelAnalysis], field: str, label: str, path: Path):
    """One line per model of a `BeamPoint` field against the beam size (log scale)."""
    with _figure(path, (6, 4)) as axes:
        for name, analysis in analyses.items():
            points = [p for p in analysis.beam_curve if getattr(p, field) is not None]
            scale = 100.0 if field == "search_error_rate" else 1.0
            axes.plot(
                [p.beam_size for p in points],
                [scale * getattr(p, field) for p in points],
                marker="o",
                label=name,
            )
        axes.set_xscale("log", base=2)
        axes.set_xlabel("beam size")
        axes.set_ylabel(label)


def plot_exact_vs_empty(analyses: dict[str, ModelAnalysis], path: Path) -> None:
    """SCONES Fig. 6: mean and standard deviation of exact-search and empty log scores."""
    with _figure(path, (6, 4)) as axes:
        names = [name for name, a in analyses.items() if a.exact]
        for offset, (kind, label) in enumerate(
            (("exact_scores", "exact search"), ("empty_scores", "empty translation"))
        ):
            summaries = [score_summary(getattr(analyses[name].exact, kind)) for name in names]
            means = [summary.mean for summary in summaries]
            stds = [summary.std for summary in summaries]
            positions = [i + 0.2 * (2 * offset - 1) for i in range(len(names))]
            axes.errorbar(positions, means, yerr=stds, fmt="o", capsize=3, label=label)
        axes.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
        axes.set_ylabel("log score")


def plot_reliability(analyses: dict[str, ModelAnalysis], path: Path) -> None:
    """Reliability diagram: accuracy against mean confidence per bin, the diagonal for reference."""
    with _figure(path, (5, 5)) as axes:
        axes.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1)
        for name, analysis in analyses.items():
            pairs = [
                (confidence, accuracy)
                for confidence, accuracy in zip(
                    analysis.forced.bin_confidence, analysis.forced.bin_accuracy, strict=True
                )
                if not math.isnan(confidence)
            ]
            ece = analysis.forced.expected_calibration_error
            axes.plot(*zip(*pairs, strict=True), marker="o", label=f"{name} (ECE {ece:.3f})")
        axes.set_xlabel("confidence")
        axes.set_ylabel("accuracy")


def plot_exact_states(analyses: dict[str, ModelAnalysis], path: Path) -> None:
    """Per-sentence states explored by exact search, sorted (a budget hit is the plateau)."""
    with _figure(path, (6, 4)) as axes:
        for name, analysis in analyses.items():
            if analysis.exact:
                states = sorted(analysis.exact.states)
                fractions = [(i + 1) / len(states) for i in range(len(states))]
                axes.plot(states, fractions, label=name)
        axes.set_xscale("log")
        axes.set_xlabel("states explored per sentence")
        axes.set_ylabel("fraction of sentences")


def write_report(analyses: dict[str, ModelAnalysis], source: Path, out: Path, seconds: float):
    """`report.md`, `report.json` and the plots, in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    raw = {name: dataclasses.asdict(analysis) for name, analysis in analyses.items()}
    (out / "report.json").write_text(json.dumps(raw, indent=1), encoding="utf-8")
    lines = report_lines(analyses, source, seconds)
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    plot_beam_curves(analyses, "bleu", "BLEU", out / "bleu_vs_beam.png")
    plot_beam_curves(analyses, "length_ratio", "length ratio", out / "length_ratio_vs_beam.png")
    plot_reliability(analyses, out / "reliability.png")
    if any(analysis.exact for analysis in analyses.values()):
        plot_beam_curves(
            analyses, "search_error_rate", "search errors (%)", out / "search_errors_vs_beam.png"
        )
        plot_exact_vs_empty(analyses, out / "exact_vs_empty.png")
        plot_exact_states(analyses, out / "exact_states.png")
    print("\n".join(lines))


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Entry point of `tfscones analyze` and `python -m training.analyze`."""
    arguments = parse_arguments(argv, prog)
    started = time.perf_counter()
    try:
        sources, references = read_sentence_pairs(arguments.source, arguments.reference)
        analyses = analyze_runs(arguments, sources, references)
    except (OSError, ValueError) as error:
        sys.exit(f"analyze: error: {error}")
    write_report(analyses, arguments.source, arguments.out, time.perf_counter() - started)


def analyze_runs(arguments, sources: list[str], references: list[str]) -> dict:
    """`runner.analyze` of the runs the arguments name, by run name."""
    if arguments.limit:
        sources, references = sources[: arguments.limit], references[: arguments.limit]
    analyses = runner.analyze(
        arguments.runs,
        sources,
        references,
        beam_sizes=arguments.beams,
        exact_sentences=arguments.exact_sentences,
        state_budget=arguments.state_budget,
    )
    for name, analysis in analyses.items():
        print(f"{name}: analysed in {analysis.seconds:.0f} s", flush=True)
    return analyses
