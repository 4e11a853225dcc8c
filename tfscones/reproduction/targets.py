"""The figures the reproductions are meant to reach, read from a reproduction folder's records.

Greedy test BLEU is the mean over the finished seeds of a recipe (Multi30k test_2016_flickr);
SCONES's α, the label smoothing of entmax-1.5 and of sparsemax and sparsemax's learning rate are
those chosen on dev (until every run of the choice has finished, the best on dev so far); the
hard-MoE figures are on the multi-reference Tatoeba dev set.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path

from tfscones.evaluation.analysis_report import percent
from tfscones.reproduction import confidence_report
from tfscones.reproduction.g2p_report import ensemble_rate, mean_rate
from tfscones.reproduction.plans import (
    SCONES_ALPHAS,
    PlannedRun,
    g2p_recipe_runs,
    judged_on_dev,
    recipe_runs,
    scones_run,
)
from tfscones.reproduction.records import RunRecord, find, mean_over_seeds, read_moe_comparison


@dataclasses.dataclass(frozen=True)
class Target:
    """A figure the reproductions are meant to reach, and how to read it from the records.

    Attributes:
        text: The target as the table states it.
        value: The figure, read from the records and the reproduction folder; None until run.
        met: Whether a figure reaches the target.
        render: The figure as the table writes it: BLEU means to two decimals, as the claims
            give them, so that a mean just short of its target does not print as reaching it.
    """

    text: str
    value: Callable[[dict[str, list[RunRecord]], Path], float | None]
    met: Callable[[float], bool]
    render: Callable[[float], str] = lambda value: f"{value:.2f}"


def _mean_greedy(plan: str, config: str):
    return lambda records, results_dir: mean_over_seeds(records[plan], config)


def _chosen_greedy(plan: str, runs: list[PlannedRun]):
    def value(records, results_dir):
        chosen = judged_on_dev(results_dir, runs)
        return mean_over_seeds(records[plan], chosen.config) if chosen else None

    return value


def _entmax_empty_rate(records, results_dir):
    chosen = judged_on_dev(results_dir, recipe_runs("entmax-1.5"))
    entmax = find(records["entmax"], chosen.label) if chosen else None
    return entmax.analysis.empty_string_rate if entmax and entmax.analysis else None


def _g2p_mean(loss: str, key: str):
    def value(records, results_dir):
        chosen = judged_on_dev(results_dir, g2p_recipe_runs(loss))
        return mean_rate(records["g2p"], chosen, key)

    return value


def _g2p_ensemble(loss: str, key: str):
    return lambda records, results_dir: ensemble_rate(results_dir, loss, key)


def _moe_number(key: Callable[[dict, dict], float]):
    def value(records, results_dir):
        comparison = read_moe_comparison(results_dir)
        return key(comparison.methods, comparison.experts) if comparison else None

    return value


def _confidence(figure: Callable[[Path, str], float | None], test_set: str):
    return lambda records, results_dir: figure(results_dir, test_set)


def _confidence_targets(test_set: str, name: str) -> tuple[Target, ...]:
    """The confidence plan's targets on one test set (ours, not a paper's)."""
    return (
        Target(
            f"Confidence, {name}: SCONES's best measure's Spearman with sentence chrF, minus "
            "softmax's best (MC dropout included), ≥ 0.05",
            _confidence(confidence_report.spearman_gain, test_set),
            lambda v: v >= 0.05,
            lambda v: f"{v:+.3f}",
        ),
        Target(
            f"Confidence, {name}: those two bootstrap intervals apart (SCONES's lower end minus "
            "softmax's upper end > 0)",
            _confidence(confidence_report.interval_gap, test_set),
            lambda v: v > 0,
            lambda v: f"{v:+.3f}",
        ),
        Target(
            f"Confidence, {name}: SCONES's AUROC of references against corrupted ones ≥ 0.95",
            _confidence(confidence_report.corruption_auroc, test_set),
            lambda v: v >= 0.95,
            lambda v: f"{v:.3f}",
        ),
    )


def _method(methods: dict, prefix: str) -> dict:
    return next(report for name, report in methods.items() if name.startswith(prefix))


TARGETS = (
    Target(
        "softmax greedy test BLEU, mean of seeds ≥ 37.0",
        _mean_greedy("scones", "multi30k_softmax"),
        lambda v: v >= 37.0,
    ),
    Target(
        "SCONES (α by dev) greedy test BLEU, mean of seeds ≥ 37.5",
        _chosen_greedy("scones", [scones_run(alpha) for alpha in SCONES_ALPHAS]),
        lambda v: v >= 37.5,
    ),
    Target(
        "entmax-1.5 (ε by dev) greedy test BLEU, mean of seeds ≥ 36.5",
        _chosen_greedy("entmax", recipe_runs("entmax-1.5")),
        lambda v: v >= 36.5,
    ),
    Target(
        "sparsemax (recipe by dev) greedy test BLEU, mean of seeds ≥ 35.0",
        _chosen_greedy("entmax", recipe_runs("sparsemax")),
        lambda v: v >= 35.0,
    ),
    Target(
        "entmax-1.5 (ε by dev): empty string above beam-4 in < 1% of test sentences",
        _entmax_empty_rate,
        lambda v: v < 0.01,
        percent,
    ),
    Target(
        "G2P entmax-1.5 (ε by dev) beam-5 test WER, mean of seeds ≤ 14.2",
        _g2p_mean("entmax-1.5", "wer"),
        lambda v: v <= 14.2,
    ),
    Target(
        "G2P entmax-1.5 (ε by dev) beam-5 test PER, mean of seeds ≤ 2.9",
        _g2p_mean("entmax-1.5", "per"),
        lambda v: v <= 2.9,
    ),
    Target(
        "G2P ensemble of entmax-1.5's seeds: test WER ≤ 13.5",
        _g2p_ensemble("entmax-1.5", "wer"),
        lambda v: v <= 13.5,
    ),
    Target(
        "G2P ensemble of entmax-1.5's seeds: test PER ≤ 2.7",
        _g2p_ensemble("entmax-1.5", "per"),
        lambda v: v <= 2.7,
    ),
    Target(
        "hard-MoE: every expert wins ≥ 5% of pairs",
        _moe_number(lambda m, e: min(e["wins"]["shares"])),
        lambda v: v >= 0.05,
        percent,
    ),
    Target(
        "hard-MoE: best expert's BLEU within 1.5 of softmax greedy",
        _moe_number(lambda m, e: max(e["bleu"]) - e["baseline_greedy_bleu"]),
        lambda v: v >= -1.5,
        lambda v: f"{v:+.1f}",
    ),
    Target(
        "hard-MoE: pairwise BLEU below beam n-best's",
        _moe_number(
            lambda m, e: (
                _method(m, "hard-MoE")["pairwise_bleu"] - _method(m, "beam")["pairwise_bleu"]
            )
        ),
        lambda v: v < 0,
        lambda v: f"{v:+.1f}",
    ),
    Target(
        "hard-MoE: average oracle BLEU above sampling's",
        _moe_number(
            lambda m, e: (
                _method(m, "hard-MoE")["average_oracle_bleu"] - m["sampling"]["average_oracle_bleu"]
            )
        ),
        lambda v: v > 0,
        lambda v: f"{v:+.1f}",
    ),
    *_confidence_targets("multi30k", "Multi30k"),
    *_confidence_targets("demo", "demo test set"),
    Target(
        "Confidence, multi-reference dev set: with SCONES both references outscore every "
        "corruption for ≥ 90% of sources",
        _confidence(confidence_report.multiref_wins, "demo"),
        lambda v: v >= 0.9,
        percent,
    ),
)


def targets_table(records: dict[str, list[RunRecord]], results_dir: Path) -> list[str]:
    """One row per target: its value in the records and whether it is met.

    A value that is not finite is shown as it is and not judged.
    """
    lines = ["| target | value | |", "|---|---|---|"]
    for target in TARGETS:
        value = target.value(records, results_dir)
        if value is None:
            lines.append(f"| {target.text} | not run yet | |")
        elif not math.isfinite(value):
            lines.append(f"| {target.text} | {value} | not judged (not a finite number) |")
        else:
            verdict = "met" if target.met(value) else "missed"
            lines.append(f"| {target.text} | {target.render(value)} | {verdict} |")
    return lines + [""]
