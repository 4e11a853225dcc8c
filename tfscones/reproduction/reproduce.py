"""Runs a paper's reproduction into one folder: train, evaluate, analyse; finished parts skipped.

    from tfscones.reproduction import reproduce
    reproduce.reproduce("scones", out_dir="reproduction", data_dir="../shared/data")

For every run of the plan (`tfscones.reproduction.plans`), in order, into `OUT/<run name>/`:

1. training (`tfscones.training.runner.train`), skipped when the folder has a `results.json`; a
   killed run resumes from its backup, as `tfscones train` does;
2. `evaluation.json`: greedy and beam-4 BLEU and chrF on the test set;
3. `analysis.json` (runs marked `analysed`, those of the Multi30k plans):
   `tfscones.evaluation.analysis.analyze_model` with the settings it records (beam sizes 1-128
   and exact search with the SCONES paper's budget of 1M states on the whole test set by
   default), redone only when the settings change;
4. the `moe` plan writes `OUT/moe/diversity.json` (Shen et al. 2019, Table 1 columns for the
   hard-MoE model and each decoding baseline of the softmax run, naming the two runs) and
   `OUT/moe/experts.json` (each expert's BLEU and share of E-step wins), redone when the plan's
   runs are others (another step budget); the `demo` plan writes
   `OUT/demo/expected_bleu.json` (`tfscones.reproduction.demo_expectations`); the `g2p` plan
   scores its runs by beam-5 WER and PER with their hypotheses, and the ensembles of each
   chosen recipe's seeds (`tfscones.reproduction.g2p`); the `confidence` plan measures each
   head's confidence as a quality estimate (`tfscones.reproduction.confidence`).

Each step writes its file only when it is complete, so a killed reproduction started again
goes on where it stopped. Before the first step every output of the plan already in the folder
is read (`tfscones.reproduction.run_outputs`): a damaged one stops the reproduction with a
`RunOutputError` naming the file and the field, and is never trained, evaluated or compared
over; moved away, its step is redone. `tfscones report OUT` turns the folder into the results
page.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from tfscones import decoding
from tfscones.decoding import Search
from tfscones.evaluation import diversity, metrics
from tfscones.evaluation.analysis import analyze_model
from tfscones.evaluation.diverse_translations import (
    baseline_translations,
    expert_translations,
    read_multiref,
)
from tfscones.evaluation.expert_wins import expert_wins
from tfscones.models import load_run
from tfscones.reproduction import confidence, g2p, synthetic
from tfscones.reproduction.demo_expectations import (
    EXPECTATIONS_FILE,
    measured_points,
    read_expectations,
    write_expectations,
)
from tfscones.reproduction.plans import (
    CONFIDENCE,
    DEFAULT_DATA_DIR,
    DEMO,
    G2P,
    MOE,
    MOE_EXPERTS,
    MULTIREF_FILE,
    PLANS,
    SYNTHETIC,
    AnalysisSettings,
    Plan,
    PlannedRun,
)
from tfscones.reproduction.records import (
    moe_comparison_files,
    moe_run_names,
    read_analysis,
    read_moe_comparison,
    read_run,
)
from tfscones.reproduction.run_outputs import EVALUATION_SIGNATURE, read_json
from tfscones.run_folder import RunFolder
from tfscones.training import runner
from tfscones.training.config import ExperimentConfig, data_path, load_config
from tfscones.written_aside import write_text_aside

logger = logging.getLogger("reproduce")

TOP_K = 10
DIVERSITY_STRENGTH = 0.5


def run_config(
    run: PlannedRun, out_dir: Path, data_dir: str = DEFAULT_DATA_DIR, overrides: Sequence[str] = ()
) -> ExperimentConfig:
    """The experiment config of a planned run, with further `section.key=value` overrides."""
    return load_config(run.config, [*run.config_overrides(data_dir, out_dir), *overrides])


def reproduce(
    paper: str,
    out_dir: str | Path,
    data_dir: str = DEFAULT_DATA_DIR,
    settings: AnalysisSettings | None = None,
    overrides: Sequence[str] = (),
    only: Sequence[str] = (),
    progress: TextIO | None = None,
) -> list[str]:
    """Trains, evaluates and analyses every run of a paper's plan; skips what is done.

    Every run's config is built and checked (data files included) before the first step
    starts, so a wrong `data_dir` fails at once.

    Args:
        paper: A plan of `tfscones.reproduction.plans.PLANS` (`scones`, `entmax`, `g2p`, ...).
        out_dir: The reproduction folder (shared by the plans: a run two plans use is trained
            once).
        data_dir: The folder holding `multi30k-en-de/` (the `moe` plan uses the bundled corpus).
        settings: How much of the analysis to run (None: the plan's `analysis`).
        overrides: `section.key=value` overrides for every run, after the plan's own: where
            and how to train (`training.strategy=mirrored`); anything else makes other runs
            than the plan's.
        only: Names of the plan's runs to work on (all if empty): parts of a plan can run on
            several machines, their folders gathered into one afterwards. The G2P plan's
            ensembles (`ensemble-g2p-entmax15-ls0.04`) can be named once they can be decoded.
        progress: Where training progress lines go (standard output if None).

    Returns:
        What was done, one line a step (`trained multi30k-softmax-seed1`, `skipped ...`).

    Raises:
        ValueError: If `paper` is not a plan's name, or `only` names a run it does not have.
        tfscones.reproduction.run_outputs.RunOutputError: If an output of the plan in
            `out_dir` is damaged, naming the file and the field, before any step.
        tfscones.training.config.ConfigError: If a run's config is invalid or a data file is
            missing.
    """
    if paper not in PLANS:
        raise ValueError(f"unknown paper {paper!r}; allowed: {', '.join(PLANS)}.")
    plan, out_dir = PLANS[paper], Path(out_dir)
    settings = plan.analysis if settings is None else settings
    _check_run_names(plan, out_dir, only)
    check_outputs(plan, out_dir)
    if plan.name == CONFIDENCE.name:
        confidence.check_models(out_dir, only)
    done = []
    if plan.name == SYNTHETIC.name and _pending(plan, out_dir, only, settings):
        temperatures = sorted({run.temperature for run in plan.runs(out_dir)})
        done += synthetic.prepare_corpora(out_dir, temperatures)
    for run in plan.fixed_runs:
        runner.check_config(run_config(run, out_dir, data_dir, overrides))
    while pending := _pending(plan, out_dir, only, settings):
        run, step = pending[0]
        step.action(run_config(run, out_dir, data_dir, overrides), settings, progress)
        done.append(f"{step.name} {run.name}")
    config_of = functools.partial(
        run_config, out_dir=out_dir, data_dir=data_dir, overrides=overrides
    )
    if plan.name == G2P.name:
        done += _g2p_ensembles(out_dir, config_of, only)
    elif plan.name == CONFIDENCE.name:
        done += confidence.measure(out_dir, config_of, only)
    elif plan.name in _COMPARISONS and all(
        RunFolder(out_dir / run.name).evaluation.is_file() for run in plan.runs(out_dir)
    ):
        done += _COMPARISONS[plan.name](out_dir, data_dir)
    return done


def _pending(
    plan: Plan, out_dir: Path, only: Sequence[str], settings: AnalysisSettings
) -> list[tuple[PlannedRun, _Step]]:
    """The steps still to do, in order: each run's training, evaluation and analysis."""
    return [
        (run, step)
        for run in plan.runs(out_dir)
        if not only or run.name in only
        for step in _steps()
        if not step.is_done(run, out_dir, settings)
    ]


def check_outputs(plan: Plan, out_dir: Path) -> None:
    """Reads every output of the plan's runs and of its comparison that `out_dir` holds.

    Raises:
        tfscones.reproduction.run_outputs.RunOutputError: If one is damaged, naming it.
    """
    for run in plan.runs(out_dir):
        read_run(out_dir, run)
    if plan.name in _COMPARISON_READERS:
        _COMPARISON_READERS[plan.name](out_dir)


def _check_run_names(plan: Plan, out_dir: Path, names: Sequence[str]) -> None:
    """Refuses names that are not runs of the plan (the tanh run only once it is planned).

    The G2P plan's ensembles are named too, once they can be decoded.
    """
    known = [run.name for run in plan.runs(out_dir)]
    ensembles = g2p.ensemble_names(out_dir) if plan.name == G2P.name else []
    unknown = [name for name in names if name not in known + ensembles]
    if unknown:
        raise ValueError(
            f"the {plan.name} plan has no run {', '.join(unknown)}; its runs: {', '.join(known)}"
            + (_ensembles_now(ensembles) if plan.name == G2P.name else ".")
        )


def _ensembles_now(names: list[str]) -> str:
    """What the error of an unknown name says of the G2P plan's ensembles."""
    decodable = f"; its ensembles now: {', '.join(names)}" if names else ""
    return (
        f"{decodable}. A loss's ensemble can be decoded once every run of its smoothing grid "
        "and every seed of the recipe dev chose has finished."
    )


@dataclasses.dataclass(frozen=True)
class _Step:
    """One step of a run: what it is called, whether it is done, and what it does."""

    name: str
    is_done: Callable[[PlannedRun, Path, AnalysisSettings], bool]
    action: Callable[[ExperimentConfig, AnalysisSettings, TextIO | None], None]


def _steps() -> list[_Step]:
    return [
        _Step("trained", lambda run, out, s: RunFolder(out / run.name).results.is_file(), _train),
        _Step("evaluated", _is_evaluated, _evaluate),
        _Step("analysed", _is_analysed, _analyse),
    ]


def _train(config: ExperimentConfig, settings, progress) -> None:
    runner.train(config, progress)


def _test_set(config: ExperimentConfig) -> tuple[list[str], list[list[str]]]:
    """The test sources and their reference streams (several: the synthetic plan's)."""
    return runner.scored_test_set(config, config.data.test_sentences)


def _evaluate(config: ExperimentConfig, settings, progress) -> None:
    """Greedy and beam-4 BLEU and chrF of the run's best model on the test set.

    A G2P run gets greedy and beam-5 WER and PER instead, and its hypotheses
    (`tfscones.reproduction.g2p`).
    """
    with RunFolder(config.run_dir).hold():
        evaluation = g2p.evaluate_run(config) if g2p.is_g2p(config) else _evaluation(config)
        _write_json(RunFolder(config.run_dir).evaluation, evaluation)


def _evaluation(config: ExperimentConfig) -> dict:
    sources, streams = _test_set(config)
    evaluation = {
        "sentences": len(sources),
        "bleu_signature": metrics.bleu_signature(len(streams)),
    }
    for name, search in (("greedy", Search()), ("beam4", Search("beam", beam_size=4))):
        scores = runner.evaluate(config.run_dir, sources, streams, search)
        evaluation[name] = {"bleu": scores["bleu"], "chrf": scores["chrf"]}
    return evaluation


def _is_evaluated(run: PlannedRun, out_dir: Path, settings: AnalysisSettings) -> bool:
    """Whether the run's evaluation exists and counted the references its test set has now."""
    evaluation = read_json(RunFolder(out_dir / run.name).evaluation, EVALUATION_SIGNATURE)
    if evaluation is None:
        return False
    counted = re.search(r"nrefs:(\d+)", evaluation.get("bleu_signature", "nrefs:1"))
    return counted is None or int(counted.group(1)) == run.test_references


def _is_analysed(run: PlannedRun, out_dir: Path, settings: AnalysisSettings) -> bool:
    """Whether the run's analysis exists, with these settings and its test set's references."""
    if not run.analysed:
        return True
    analysis = read_analysis(RunFolder(out_dir / run.name).analysis)
    return (
        analysis is not None
        and analysis["settings"] == settings.as_dict()
        and analysis["analysis"].get("references", 1) == run.test_references
    )


def _analyse(config: ExperimentConfig, settings: AnalysisSettings, progress) -> None:
    """`analyze_model` of the run's best model on the test set, with its settings."""
    with RunFolder(config.run_dir).hold():
        _write_json(RunFolder(config.run_dir).analysis, _analysis(config, settings))


def _analysis(config: ExperimentConfig, settings: AnalysisSettings) -> dict:
    sources, streams = _test_set(config)
    model, tokenizer = load_run(config.run_dir)
    analysis = analyze_model(
        model,
        tokenizer,
        sources,
        streams,
        beam_sizes=settings.beam_sizes,
        exact_sentences=settings.exact_sentences,
        state_budget=settings.state_budget,
    )
    return {"settings": settings.as_dict(), "analysis": dataclasses.asdict(analysis)}


def _moe_comparison(out_dir: Path) -> list[str]:
    """Compares the moe plan's runs, unless a comparison of these runs exists."""
    if read_moe_comparison(out_dir) is not None:
        return []
    runs = moe_run_names(out_dir)
    experts, reports, sentences = _compare_moe(*(out_dir / name for name in runs))
    diversity_file, experts_file = moe_comparison_files(out_dir)
    diversity_file.parent.mkdir(parents=True, exist_ok=True)
    _write_json(experts_file, experts)
    _write_json(diversity_file, {"runs": runs, "sentences": sentences, "methods": reports})
    return [f"compared {MOE.name}"]


def _compare_moe(baseline: Path, mixture: Path) -> tuple[dict, dict, int]:
    """Diversity of the hard-MoE model and the softmax baselines; each expert's BLEU and wins.

    Args:
        baseline: The softmax run, decoded K times by each baseline decoder.
        mixture: The hard-MoE run, decoded once by each expert.

    Returns:
        The experts' statistics, the diversity report of each method, and how many multi-reference
        sentences they were measured on.
    """
    sources, references = read_multiref(data_path(MULTIREF_FILE))
    model, tokenizer = load_run(mixture)
    translations = {f"hard-MoE K={MOE_EXPERTS}": expert_translations(model, tokenizer, sources)}
    experts = expert_statistics(model, tokenizer, sources, references, translations)
    baseline_model, baseline_tokenizer = load_run(baseline)
    greedy = decoding.translate(baseline_model, baseline_tokenizer, sources)
    experts["baseline_greedy_bleu"] = metrics.corpus_bleu(greedy, _streams(references)).score
    translations.update(
        baseline_translations(
            baseline_model,
            baseline_tokenizer,
            sources,
            MOE_EXPERTS,
            TOP_K,
            DIVERSITY_STRENGTH,
            seed=1,
        )
    )
    reports = {
        name: {
            **dataclasses.asdict(diversity.diversity_report(hypotheses, references, seed=1)),
            "bleu": mean_bleu(hypotheses, references),
        }
        for name, hypotheses in translations.items()
    }
    return experts, reports, len(sources)


def _demo_expectations(out_dir: Path) -> list[str]:
    """The demo plan's test BLEU by step budget, for `tfscones demo` to compare with."""
    points = measured_points([read_run(out_dir, run) for run in DEMO.runs(out_dir)])
    if _demo_table(out_dir) == points:
        return []
    write_expectations(out_dir / DEMO.name / EXPECTATIONS_FILE, points)
    return [f"tabled {DEMO.name}"]


def _demo_table(out_dir: Path) -> dict | None:
    """The demo plan's table of test BLEU by step budget, or None if there is none yet."""
    path = out_dir / DEMO.name / EXPECTATIONS_FILE
    return read_expectations(path) if path.exists() else None


def _g2p_ensembles(
    out_dir: Path, config_of: Callable[[PlannedRun], ExperimentConfig], only: Sequence[str]
) -> list[str]:
    """The G2P plan's ensembles of each chosen recipe's seeds (`tfscones.reproduction.g2p`).

    Every ensemble that can be decoded now, or those of them `only` names (none if it names
    runs only).
    """
    names = [name for name in only if name in g2p.ensemble_names(out_dir)]
    if only and not names:
        return []
    return g2p.evaluate_ensembles(out_dir, config_of, names)


_COMPARISONS = {
    MOE.name: lambda out_dir, data_dir: _moe_comparison(out_dir),
    DEMO.name: lambda out_dir, data_dir: _demo_expectations(out_dir),
}
_COMPARISON_READERS = {
    MOE.name: read_moe_comparison,
    DEMO.name: _demo_table,
    G2P.name: g2p.read_ensembles,
    SYNTHETIC.name: synthetic.read_corpora,
    CONFIDENCE.name: confidence.read_records,
}


def _streams(references: list[list[str]]) -> list[list[str]]:
    """Multi-reference rows (a list of references per source) as reference streams."""
    return [list(column) for column in itertools.zip_longest(*references)]


def mean_bleu(hypotheses: list[list[str]], references: list[list[str]]) -> float:
    """The mean over k of the multi-reference corpus BLEU of every source's k-th translation."""
    scores = [
        metrics.corpus_bleu([row[k] for row in hypotheses], _streams(references)).score
        for k in range(len(hypotheses[0]))
    ]
    return sum(scores) / len(scores)


def expert_statistics(model, tokenizer, sources, references, translations) -> dict:
    """Each expert's multi-reference BLEU and its share of E-step wins over (source, reference)."""
    per_expert = next(iter(translations.values()))
    bleu = [
        metrics.corpus_bleu([row[k] for row in per_expert], _streams(references)).score
        for k in range(model.num_experts)
    ]
    pairs = [
        (source, ref) for source, refs in zip(sources, references, strict=True) for ref in refs
    ]
    wins = expert_wins(model, tokenizer, [s for s, _ in pairs], [r for _, r in pairs])
    return {"bleu": bleu, "wins": wins}


def _write_json(path: Path, value: dict) -> None:
    """Writes through a temporary file, so a killed step never leaves half a file."""
    write_text_aside(path, json.dumps(value, indent=1) + "\n")
