"""SCONES Figs. 8-9 as a table: BLEU against the IBM-3 sampling temperature, from analyze reports.

    tfscones temperature-table reports/synthetic-gamma0.1 reports/synthetic-gamma0.5 \
        reports/synthetic-gamma1.0

Each folder is a `training.analyze` report of the models trained on one synthetic corpus, named
`...gamma<γ>`. For every model (its run name without the `-gamma<γ>` suffix) the table has its
beam-4 BLEU (Fig. 8) and its exact-search BLEU minus the softmax model's beam-4 BLEU on the same
sentences (Fig. 9), one column pair per temperature.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

TEMPERATURE = re.compile(r"gamma-?([0-9.]+)$")


def read_reports(folders: list[Path]) -> dict[float, dict]:
    """`{γ: {model: analysis as JSON}}` from report folders named `...gamma<γ>`."""
    reports = {}
    for folder in folders:
        match = TEMPERATURE.search(folder.name)
        if match is None:
            raise ValueError(f"{folder}: the folder name does not end with gamma<temperature>")
        analyses = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        reports[float(match.group(1))] = {
            TEMPERATURE.sub("", name).rstrip("-"): analysis for name, analysis in analyses.items()
        }
    return dict(sorted(reports.items()))


def table(reports: dict[float, dict]) -> list[str]:
    """The markdown table: beam-4 BLEU and exact BLEU relative to softmax beam-4, per γ."""
    models = list(next(iter(reports.values())))
    header = " | ".join(f"γ={gamma} beam-4 | γ={gamma} exact − softmax" for gamma in reports)
    lines = [f"| model | {header} |", "|---|" + "---|---|" * len(reports)]
    for model in models:
        cells = []
        for analyses in reports.values():
            beam4 = next(p for p in analyses[model]["beam_curve"] if p["beam_size"] == 4)
            exact = analyses[model]["exact"]
            softmax = next(a for name, a in analyses.items() if "softmax" in name)["exact"]
            relative = exact["bleu"] - softmax["beam_bleu"] if exact and softmax else None
            cells += [f"{beam4['bleu']:.1f}", "-" if relative is None else f"{relative:+.1f}"]
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Entry point of `tfscones temperature-table` and `python -m training.temperature_table`."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("reports", type=Path, nargs="+", help="analyze report folders")
    arguments = parser.parse_args(argv)
    print("\n".join(table(read_reports(arguments.reports))))
