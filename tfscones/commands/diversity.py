"""Diverse translation: Hard-MoE against sampling, top-k sampling, beam n-best and diverse beam.

    tfscones diversity --moe-run runs/demo-moe-k5 --baseline-run runs/demo-softmax \
        --multiref tfscones/data/demo/multiref-dev.de-en.jsonl --k 5 --out reports/diversity-demo
    tfscones diversity --baseline-run RUN --source src.de --references ref1.en ref2.en \
        --k 5 --out reports/diversity

Every method produces K translations of each source (Shen et al. 2019, §4): the K experts of a
latent-expert model decoded greedily in one batched call (`--moe-run`, a run trained with
`model.num_experts`), and, with the plain model of `--baseline-run`, K samples, K top-k samples,
the K best of a beam of K, and diverse beam search with K groups of one beam. The table has
the metrics of Shen et al. (2019) (`tfscones.evaluation.diversity`): pairwise BLEU (lower is more
diverse), average oracle BLEU (higher is better), the number of references covered, and the
human leave-one-out row; the plot is Figure 2 of Shen et al. (2019), average oracle BLEU
against pairwise BLEU. Written to `OUT/diversity.md`, `OUT/diversity.json` and `OUT/diversity.png`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tfscones import ranges  # noqa: E402
from tfscones.commands.argument_types import in_range, non_negative_int  # noqa: E402
from tfscones.evaluation import diversity  # noqa: E402
from tfscones.evaluation.diverse_translations import (  # noqa: E402
    baseline_translations,
    expert_translations,
    read_multiref,
    read_references,
)
from tfscones.models import load_run  # noqa: E402
from tfscones.run_folder import RunFolder  # noqa: E402


def write_report(reports: dict[str, diversity.DiversityReport], out: Path) -> None:
    """The markdown table, the JSON and the plot of Figure 2 of Shen et al. (2019)."""
    out.mkdir(parents=True, exist_ok=True)
    first = next(iter(reports.values()))
    lines = [
        "| method | pairwise BLEU ↓ | avg oracle BLEU ↑ | #refs covered ↑ |",
        "|---|---|---|---|",
    ]
    for name, report in reports.items():
        lines.append(
            f"| {name} | {report.pairwise_bleu:.1f} | {report.average_oracle_bleu:.1f} "
            f"| {report.references_covered:.2f} |"
        )
    if first.human_pairwise_bleu is not None:
        lines.append(
            f"| human (leave one out) | {first.human_pairwise_bleu:.1f} "
            f"| {first.human_oracle_bleu:.1f} | - |"
        )
    (out / "diversity.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "diversity.json").write_text(
        json.dumps({name: dataclasses.asdict(r) for name, r in reports.items()}, indent=2),
        encoding="utf-8",
    )
    figure, axes = plt.subplots(figsize=(6, 4))
    for name, report in reports.items():
        axes.scatter(report.pairwise_bleu, report.average_oracle_bleu, label=name)
    if first.human_pairwise_bleu is not None:
        axes.scatter(first.human_pairwise_bleu, first.human_oracle_bleu, marker="*", label="human")
    axes.set_xlabel("pairwise BLEU (lower: more diverse)")
    axes.set_ylabel("average oracle BLEU")
    axes.set_title(f"quality vs diversity, K = {first.num_hypotheses}")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out / "diversity.png", dpi=120)
    print("\n".join(lines))


TOP_K_SAMPLING = ranges.Range(1, ranges.TOP_K.high, integer=True)
"""`--top-k`: the k of the top-k sampling row, a `ranges.TOP_K` that filters (0 would not)."""


def parse_arguments(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--moe-run", type=Path, help="a run trained with model.num_experts")
    parser.add_argument("--baseline-run", type=Path, help="a plain run for the baselines")
    parser.add_argument("--multiref", type=Path, help="JSON lines {src, refs}")
    parser.add_argument("--source", type=Path, help="source sentences (with --references)")
    parser.add_argument("--references", type=Path, nargs="+", help="aligned reference files")
    parser.add_argument(
        "--k", type=in_range(ranges.SEARCH_COUNT), default=5, help="translations per sentence"
    )
    parser.add_argument(
        "--top-k", type=in_range(TOP_K_SAMPLING), default=10, help="k of top-k sampling"
    )
    parser.add_argument(
        "--diversity-strength",
        type=in_range(ranges.DIVERSITY_STRENGTH),
        default=0.5,
        help="λ of diverse beam search, per earlier group's beam that chose the same token",
    )
    parser.add_argument(
        "--limit", type=non_negative_int, default=0, help="first N sentences (0: all)"
    )
    parser.add_argument(
        "--seed",
        type=in_range(ranges.SAMPLING_SEED),
        default=0,
        help="seed of the sampling methods and of the tie-breaking of #refs covered",
    )
    parser.add_argument("--out", type=Path, default=Path("reports/diversity"))
    arguments = parser.parse_args(argv)
    if not (arguments.moe_run or arguments.baseline_run):
        parser.error("give --moe-run, --baseline-run or both")
    if bool(arguments.multiref) == bool(arguments.source and arguments.references):
        parser.error("give either --multiref, or --source with --references")
    return arguments


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Entry point of `tfscones diversity` and `python -m training.diversity`."""
    arguments = parse_arguments(argv, prog)
    try:
        if arguments.multiref:
            sources, references = read_multiref(arguments.multiref)
        else:
            sources, references = read_references(arguments.source, arguments.references)
        for run in (arguments.moe_run, arguments.baseline_run):
            if run:
                RunFolder(run).check_decodable()
        limit = arguments.limit or None
        translations = all_translations(arguments, sources[:limit])
    except (OSError, ValueError) as error:
        sys.exit(f"diversity: error: {error}")
    reports = {
        name: diversity.diversity_report(hypotheses, references[:limit], seed=arguments.seed)
        for name, hypotheses in translations.items()
    }
    write_report(reports, arguments.out)


def all_translations(arguments, sources: list[str]) -> dict[str, list[list[str]]]:
    """K translations of every source by each model and search the arguments name.

    Raises:
        ValueError: If the hard-MoE run's model has another number of experts than `--k`.
    """
    translations = {}
    if arguments.moe_run:
        model, tokenizer = load_run(arguments.moe_run)
        if getattr(model, "num_experts", None) != arguments.k:
            raise ValueError(f"{arguments.moe_run} is not a model of --k {arguments.k} experts")
        translations[f"hard-MoE, {arguments.k} experts"] = expert_translations(
            model, tokenizer, sources
        )
    if arguments.baseline_run:
        model, tokenizer = load_run(arguments.baseline_run)
        translations.update(
            baseline_translations(
                model,
                tokenizer,
                sources,
                arguments.k,
                arguments.top_k,
                arguments.diversity_strength,
                arguments.seed,
            )
        )
    return translations
