"""The results page's G2P section, laid out like Peters & Martins 2021, Table 1.

One row per loss and label smoothing ε (SCONES: per α, beyond the paper) with its dev PER,
its beam-5 test WER and PER (mean ± standard deviation over the recipe's finished seeds) and the
paper's single-model figures beside them; the ensemble of each chosen recipe's seeds with the
paper's ensembles; a per-language table; and a verdict per claim of the paper, each difference
judged against the seed spread (the largest difference between two seeds of one recipe).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from tfscones.reproduction.g2p import EnsembleRecipe, ensemble_recipes, read_ensemble
from tfscones.reproduction.plans import (
    G2P,
    G2P_LOSSES,
    G2P_SCONES,
    G2P_SEEDS,
    PlannedRun,
    dev_choice,
    g2p_folder,
    g2p_losses,
    g2p_recipe_runs,
)
from tfscones.reproduction.records import RunRecord
from tfscones.reproduction.verdicts import DISAGREES, Claim, bleu_verdict, condition_verdict

SEARCH = "beam5"
# Peters & Martins 2021, Table 1: (WER, its std, PER, its std) of single models over runs, and
# (WER, PER) of their ensembles, for ε = 0 and the ε they chose (0.15 and 0.04).
PAPER_SINGLE = {
    ("cross-entropy", False): (18.14, 2.87, 3.95, 1.24),
    ("cross-entropy", True): (15.55, 0.48, 3.09, 0.10),
    ("entmax-1.5", False): (15.25, 0.25, 3.05, 0.03),
    ("entmax-1.5", True): (14.18, 0.24, 2.86, 0.05),
    ("sparsemax", False): (15.08, 0.28, 3.04, 0.06),
    ("sparsemax", True): (14.17, 0.20, 2.88, 0.04),
}
PAPER_ENSEMBLE = {
    ("cross-entropy", False): (14.74, 2.96),
    ("cross-entropy", True): (13.87, 2.77),
    ("entmax-1.5", False): (13.79, 2.77),
    ("entmax-1.5", True): (13.47, 2.69),
    ("sparsemax", False): (13.84, 2.75),
    ("sparsemax", True): (13.51, 2.73),
}
PAPER_SMOOTHING = {"cross-entropy": 0.15, "entmax-1.5": 0.04, "sparsemax": 0.04}
"""The ε the paper chose for each loss: its figures stand beside our run of that ε."""
PREVIOUS_BEST = (13.81, 2.76)  # Yu et al. 2020, itself an ensemble


def rates(record: RunRecord, search: str = SEARCH) -> dict | None:
    """A run's test `wer`, `per` and `by_language` for `search`, once evaluated."""
    if record.evaluation is None or search not in record.evaluation:
        return None
    return record.evaluation[search]


def seed_records(records: list[RunRecord], run: PlannedRun) -> list[RunRecord]:
    """The evaluated records of every seed of `run`'s recipe."""
    recipe = run.name.removesuffix(f"-seed{run.seed}")
    return [
        record
        for record in records
        if record.run.name.removesuffix(f"-seed{record.run.seed}") == recipe and rates(record)
    ]


def mean_and_deviation(values: list[float]) -> str:
    """`mean ± sample standard deviation` (the mean alone for one value; blank for none)."""
    if not values:
        return ""
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {statistics.stdev(values):.2f}"


def seed_spread(records: list[RunRecord]) -> float | None:
    """The largest test WER difference between two seeds of one recipe (None: no two seeds)."""
    spreads = []
    for loss in g2p_losses():
        for run in g2p_recipe_runs(loss):
            wers = [rates(record)["wer"] for record in seed_records(records, run)]
            if len(wers) > 1:
                spreads.append(max(wers) - min(wers))
    return max(spreads, default=None)


def g2p_section(records: list[RunRecord], results_dir: Path, folder: str) -> list[str]:
    """The section: command, Table 1, ensembles, languages, claims."""
    by_name = {record.run.name: record for record in records}
    spread = seed_spread(records)
    chosen = {loss: _chosen(results_dir, loss) for loss in g2p_losses()}
    ensembles = decoded_ensembles(results_dir)
    return [
        f"## {G2P.title}",
        "",
        "```bash",
        f"tfscones reproduce {G2P.name} --data {g2p_folder('../shared/data')} --out {folder}",
        "```",
        "",
        "One multilingual Transformer per recipe on the 15 languages' 54,000 training words",
        "(`configs/g2p.yaml`: the word's characters after NFD and a language tag in, phones",
        "out), its kept model the one of the lowest dev PER; test WER and PER with beam 5, per",
        "language and then averaged over the languages, as the shared task scores them",
        "(`tfscones.evaluation.phone_errors`). Each ε (α for SCONES) is chosen on dev PER",
        "among the grid below; the chosen recipe's seeds give mean ± standard deviation and",
        "their ensemble (log of the mean of the models' probabilities). Each run's test",
        f"hypotheses are in `{folder}/<run>/test-hypotheses/` (gold, hypothesis), for the",
        "shared task's own scorer. The paper trained RNNs; these are Transformers.",
        "",
        *_table(by_name, records, chosen),
        *_ensemble_table(ensembles, chosen),
        *_language_table(by_name, ensembles),
        "### Claims",
        "",
        *[
            line
            for claim in _claims(by_name, records, chosen, ensembles, spread)
            for line in claim.lines()
        ],
        "",
    ]


def _chosen(results_dir: Path, loss: str) -> PlannedRun | None:
    choice = dev_choice(results_dir, g2p_recipe_runs(loss))
    return choice.run if choice and choice.final else None


def _table(by_name: dict, records: list[RunRecord], chosen: dict) -> list[str]:
    lines = [
        "| loss | setting | dev PER (seed 1) | seeds | test WER | test PER | paper WER "
        "| paper PER |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for loss in g2p_losses():
        for run, setting in g2p_recipe_runs(loss).items():
            record = by_name[run.name]
            seeds = seed_records(records, run)
            dev = record.results.get("best_dev_per") if record.results else None
            paper = PAPER_SINGLE.get((loss, setting > 0)) if loss in G2P_LOSSES else None
            shows_paper = paper and setting in (0, PAPER_SMOOTHING.get(loss))
            name = "α" if loss == G2P_SCONES else "ε"
            lines.append(
                f"| {loss} | {name}={setting:g}{' (chosen)' if run == chosen[loss] else ''} "
                f"| {'' if dev is None else f'{dev:.2f}'} | {len(seeds)} "
                f"| {mean_and_deviation([rates(r)['wer'] for r in seeds]) or 'not run yet'} "
                f"| {mean_and_deviation([rates(r)['per'] for r in seeds])} "
                f"| {f'{paper[0]:.2f} ± {paper[1]:.2f}' if shows_paper else ''} "
                f"| {f'{paper[2]:.2f} ± {paper[3]:.2f}' if shows_paper else ''} |"
            )
    return [*lines, ""]


def _ensemble_table(ensembles: dict, chosen: dict) -> list[str]:
    lines = [
        f"Ensembles of the chosen recipes' seeds ({', '.join(map(str, G2P_SEEDS))}), beam 5:",
        "",
        "| loss | recipe | test WER | test PER | paper's ε | paper WER | paper PER |",
        "|---|---|---|---|---|---|---|",
    ]
    for loss in g2p_losses():
        _, record = ensembles.get(loss, (None, None))
        run = chosen[loss]
        figures = (
            f"{record[SEARCH]['wer']:.2f} | {record[SEARCH]['per']:.2f}"
            if record
            else "not run yet |"
        )
        paper = " | |"
        if loss in G2P_LOSSES:
            wer, per = PAPER_ENSEMBLE[(loss, True)]
            paper = f"{PAPER_SMOOTHING[loss]:g} | {wer:.2f} | {per:.2f}"
        lines.append(f"| {loss} | {run.label if run else 'not chosen yet'} | {figures} | {paper} |")
    lines.append(
        f"| previous best (Yu et al. 2020) | an ensemble | | | | {PREVIOUS_BEST[0]:.2f} "
        f"| {PREVIOUS_BEST[1]:.2f} |"
    )
    return [*lines, ""]


def _smoothed(run: PlannedRun | None) -> bool:
    return bool(run) and run.variant != "ls0"


def _language_table(by_name: dict, ensembles: dict) -> list[str]:
    """Per-language WER / PER of every evaluated seed-1 run and of every ensemble."""
    columns = {}
    for loss in g2p_losses():
        for run in g2p_recipe_runs(loss):
            if rates(by_name[run.name]):
                columns[run.label] = rates(by_name[run.name])["by_language"]
    for loss, (_, ensemble) in ensembles.items():
        columns[f"ensemble {loss}"] = ensemble[SEARCH]["by_language"]
    if not columns:
        return ["Per-language figures appear once a run is evaluated.", ""]
    languages = sorted({language for column in columns.values() for language in column})
    lines = [
        "Per language, WER / PER (beam 5; single models: seed 1):",
        "",
        "| language | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for language in languages:
        cells = [
            f"{column[language]['wer']:.1f} / {column[language]['per']:.2f}"
            if language in column
            else ""
            for column in columns.values()
        ]
        lines.append(f"| {language} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def mean_rate(records: list[RunRecord], run: PlannedRun | None, key: str) -> float | None:
    """The mean beam-5 test `wer` or `per` over the evaluated seeds of `run`'s recipe."""
    values = [rates(record)[key] for record in seed_records(records, run)] if run else []
    return statistics.fmean(values) if values else None


def _lower_verdict(ours: float, other: float, spread: float | None) -> str:
    """Whether `ours` is lower than `other` (a rate, lower is better) by more than the spread."""
    return bleu_verdict(other - ours, spread)


def _claims(by_name, records, chosen, ensembles: dict, spread) -> list[Claim]:
    claims = []
    cross_entropy = mean_rate(records, chosen["cross-entropy"], "wer")
    for loss in ("entmax-1.5", "sparsemax"):
        sparse = mean_rate(records, chosen[loss], "wer")
        if sparse is None or cross_entropy is None:
            evidence, verdict = "Not every run has finished.", "not run yet"
        else:
            evidence = (
                f"Chosen recipes, mean test WER: {loss} {sparse:.2f}, cross-entropy "
                f"{cross_entropy:.2f}; seed spread {_spread_text(spread)}."
            )
            verdict = _lower_verdict(sparse, cross_entropy, spread)
        claims.append(Claim(f"The {loss} loss beats cross-entropy (Table 1).", evidence, verdict))
    for loss in G2P_LOSSES:
        claims.append(_smoothing_claim(by_name, loss, chosen[loss], spread))
    claims.append(_best_claim(records, chosen))
    claims.append(_ensemble_claim(ensembles.get("entmax-1.5")))
    return claims


def _spread_text(spread: float | None) -> str:
    return "not measured yet" if spread is None else f"{spread:.2f} WER"


def _smoothing_claim(by_name, loss: str, chosen: PlannedRun | None, spread) -> Claim:
    unsmoothed = next(run for run, setting in g2p_recipe_runs(loss).items() if setting == 0)
    text = f"Fenchel-Young label smoothing improves the {loss} loss (Table 1)."
    base = by_name[unsmoothed.name]
    if chosen is None or not rates(base) or not rates(by_name[chosen.name]):
        return Claim(text, "Not every run has finished.", "not run yet")
    ours, other = rates(by_name[chosen.name])["wer"], rates(base)["wer"]
    if chosen == unsmoothed:
        return Claim(text, f"Dev chose ε = 0 (test WER {other:.2f}).", DISAGREES)
    evidence = (
        f"Seed 1, test WER: {chosen.label} {ours:.2f}, ε=0 {other:.2f}; seed spread "
        f"{_spread_text(spread)}."
    )
    return Claim(text, evidence, _lower_verdict(ours, other, spread))


def _best_claim(records, chosen) -> Claim:
    text = "Both together (a smoothed entmax loss) are best (Table 1)."
    means = {loss: mean_rate(records, chosen[loss], "wer") for loss in G2P_LOSSES}
    if any(value is None for value in means.values()):
        return Claim(text, "Not every run has finished.", "not run yet")
    best = min(means, key=means.get)
    smoothed_sparse = best in ("entmax-1.5", "sparsemax") and _smoothed(chosen[best])
    evidence = (
        "Mean test WER of the chosen recipes: "
        + ", ".join(f"{loss} {value:.2f}" for loss, value in means.items())
        + "."
    )
    numbers = {f"{loss} WER": value for loss, value in means.items()}
    return Claim(text, evidence, condition_verdict(smoothed_sparse, numbers))


def decoded_ensembles(results_dir: Path) -> dict[str, tuple[EnsembleRecipe, dict]]:
    """Each loss whose chosen recipe's ensemble has been decoded: its recipe and record."""
    decoded = {}
    for recipe in ensemble_recipes(results_dir):
        record = read_ensemble(results_dir, recipe)
        if record:
            decoded[recipe.loss] = (recipe, record)
    return decoded


def ensemble_rate(results_dir: Path, loss: str, key: str) -> float | None:
    """The beam-5 test `wer` or `per` of the ensemble of `loss`'s chosen recipe, once decoded."""
    decoded = decoded_ensembles(results_dir).get(loss)
    return decoded[1][SEARCH][key] if decoded else None


def _ensemble_claim(decoded: tuple[EnsembleRecipe, dict] | None) -> Claim:
    text = (
        "The ensemble of the smoothed entmax-1.5 model beats the previous state of the art, "
        f"{PREVIOUS_BEST[0]:.2f} WER / {PREVIOUS_BEST[1]:.2f} PER (Table 1)."
    )
    if decoded is None:
        return Claim(text, "The ensemble has not been decoded yet.", "not run yet")
    recipe, record = decoded
    wer, per = record[SEARCH]["wer"], record[SEARCH]["per"]
    better = wer < PREVIOUS_BEST[0] and per < PREVIOUS_BEST[1]
    evidence = f"The {_ensemble_label(recipe)}, beam 5: {wer:.2f} WER / {per:.2f} PER."
    numbers = {"ensemble WER": wer, "ensemble PER": per}
    return Claim(text, evidence, condition_verdict(better, numbers))


def _ensemble_label(recipe: EnsembleRecipe) -> str:
    return f"ensemble of {', '.join(run.name for run in recipe.runs)}"
