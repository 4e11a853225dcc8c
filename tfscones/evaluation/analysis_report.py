"""Tables and plots of `ModelAnalysis` results: the `tfscones analyze` report and the results page.

`report_lines` is the markdown report of one test set; the tables and plots are also used one
by one by `tfscones.reproduction.report`. Numbers are rendered with fixed digits and plots are
written without a timestamp, so the same analyses always give the same files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tfscones.evaluation.analysis import ModelAnalysis  # noqa: E402
from tfscones.evaluation.model_errors import score_summary  # noqa: E402


def number(value: float | None, digits: int = 1) -> str:
    """`value` with `digits` decimals; `-` for None or NaN."""
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def percent(value: float | None) -> str:
    """A fraction as a percentage with one decimal; `-` for None."""
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
            number(greedy.bleu) if greedy else "-",
            number(analysis.beam(4).bleu),
            number(exact.bleu) if exact else "-",
            number(exact.beam_bleu) if exact else "-",
            number(exact.length_ratio, 3) if exact else "-",
            number(exact.beam_length_ratio, 3) if exact else "-",
            percent(analysis.empty_string_rate),
            percent(exact.empty_fraction) if exact else "-",
            percent(exact.incomplete_fraction) if exact else "-",
            number(analysis.forced.expected_calibration_error, 4),
            number(100 * analysis.forced.accuracy) + "%",
            number(analysis.forced.mean_support_size),
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
            f"| {percent(exact.incomplete_fraction)} | {percent(exact.improved_fraction)} "
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
        *beam_table(analyses, "bleu", number),
        "",
        "## Length ratio against beam size (Fig. 4)",
        "",
        *beam_table(analyses, "length_ratio", lambda value: number(value, 3)),
        "",
        "## Decoding speed, sentences per second",
        "",
        *beam_table(analyses, "sentences_per_second", number),
    ]
    if exact:
        lines += [
            "",
            "## Beam-search errors against beam size (Fig. 7)",
            "",
            "Sentences whose beam translation scores below the best known translation (exact "
            "search's, or a wider beam's where exact search hit its budget).",
            "",
            *beam_table(analyses, "search_error_rate", percent),
            "",
            "## Exact search (Table 7, Fig. 6)",
            "",
            *exact_table(analyses),
        ]
    return lines


@contextlib.contextmanager
def figure(path: Path, size: tuple[float, float]):
    """Axes to draw on; on leaving, a legend is added and the figure saved to `path`."""
    figure, axes = plt.subplots(figsize=size)
    yield axes
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(figure)


def plot_beam_curves(analyses: dict[str, ModelAnalysis], field: str, label: str, path: Path):
    """One line per model of a `BeamPoint` field against the beam size (log scale)."""
    with figure(path, (6, 4)) as axes:
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
    with figure(path, (6, 4)) as axes:
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
    with figure(path, (5, 5)) as axes:
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
    with figure(path, (6, 4)) as axes:
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
