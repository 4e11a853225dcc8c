"""What a reproduction folder holds for one run, read back from its small text files.

A run folder written by `tfscones reproduce` keeps, beside the models and backups that stay
out of the repository, the files the report is made from: `config.yaml`, `results.json`,
`history.csv`, `evaluation.json` and `analysis.json`. `read_run` reads whichever exist;
`read_moe_comparison` reads the moe plan's comparison of its two runs. Both read through
`tfscones.reproduction.run_outputs`, so a damaged file is a `RunOutputError` naming it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tfscones.evaluation.analysis import REFERENCE_BEAM, ModelAnalysis
from tfscones.reproduction import run_outputs
from tfscones.reproduction.plans import MOE, PLANS, PlannedRun, moe_compared_runs
from tfscones.reproduction.run_outputs import (
    ANALYSIS,
    BLEU_EVALUATION,
    CONFIG,
    DIVERSITY,
    EXPERTS,
    G2P_EVALUATION,
    RESULTS,
    Object,
    Place,
    read_csv_rows,
    read_yaml_file,
)
from tfscones.run_folder import RunFolder


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """The outputs of one planned run; None (or empty) for what it has not written yet.

    The config and the history are those of a finished run only.

    Attributes:
        run: The planned run.
        config: The resolved config it trained with (`config.yaml`).
        results: `results.json`: steps, best dev BLEU, greedy test BLEU, wall time.
        history: `history.csv` rows, one per epoch, values as floats.
        evaluation: `evaluation.json`: greedy and beam-4 BLEU and chrF on the test set.
        analysis: The `ModelAnalysis` of `analysis.json`.
        analysis_settings: The settings the analysis ran with.
    """

    run: PlannedRun
    config: dict | None
    results: dict | None
    history: list[dict]
    evaluation: dict | None
    analysis: ModelAnalysis | None
    analysis_settings: dict | None

    @property
    def finished(self) -> bool:
        """Whether training finished (its `results.json` exists)."""
        return self.results is not None

    def test_bleu(self, search: str = "greedy") -> float | None:
        """Test BLEU of `greedy` or `beam4` search."""
        return self._test_score("bleu", search)

    def test_chrf(self, search: str = "greedy") -> float | None:
        """Test chrF of `greedy` or `beam4` search."""
        return self._test_score("chrf", search)

    def _test_score(self, metric: str, search: str) -> float | None:
        """From the evaluation; greedy also from `results.json` before the evaluation ran."""
        if self.evaluation is not None:
            return self.evaluation[search][metric]
        if search == "greedy" and self.results is not None:
            return self.results.get(f"test_{metric}")
        return None


def read_run(out_dir: Path, run: PlannedRun) -> RunRecord:
    """The run's record from `out_dir/<run name>/`.

    The config and the history of a run that has not finished are not read: training writes
    them as it goes (a killed run's last history row may be cut short until it resumes).

    Raises:
        RunOutputError: If a file of the run is damaged, naming the file and the field.
    """
    folder = RunFolder(out_dir / run.name)
    results = read_results(folder.results)
    analysis = read_analysis(folder.analysis)
    evaluation = G2P_EVALUATION if run.corpus == "g2p" else BLEU_EVALUATION
    return RunRecord(
        run=run,
        config=read_yaml_file(folder.config, CONFIG) if results else None,
        results=results,
        history=read_csv_rows(folder.history, "epoch") if results else [],
        evaluation=run_outputs.read_json(folder.evaluation, evaluation),
        analysis=ModelAnalysis.from_dict(analysis["analysis"]) if analysis else None,
        analysis_settings=analysis["settings"] if analysis else None,
    )


def read_records(results_dir: Path) -> dict[str, list[RunRecord]]:
    """The records of every plan's runs known so far, by plan name.

    Raises:
        RunOutputError: If a file of a run is damaged, naming the file and the field.
    """
    return {
        name: [read_run(results_dir, run) for run in plan.runs(results_dir)]
        for name, plan in PLANS.items()
    }


def read_results(path: Path) -> dict | None:
    """A `results.json`; None if there is none (the run has not finished)."""
    return run_outputs.read_json(path, RESULTS)


def read_analysis(path: Path) -> dict | None:
    """An `analysis.json`, its beam curve with the reference beam; None if there is none."""
    analysis = run_outputs.read_json(path, ANALYSIS)
    if analysis is None:
        return None
    if REFERENCE_BEAM not in [point["beam_size"] for point in analysis["analysis"]["beam_curve"]]:
        raise Place(path, "analysis.beam_curve").error(
            f"no point of beam size {REFERENCE_BEAM}, which the claims compare with"
        )
    return analysis


MOE_METHODS = ("hard-MoE", "beam")
"""The methods of the moe comparison its claims compare, by the start of their names."""


@dataclasses.dataclass(frozen=True)
class MoeComparison:
    """The moe plan's comparison (`OUT/moe/`): Shen et al. (2019), Table 1 columns.

    Attributes:
        runs: The names of the softmax and hard-MoE runs compared.
        sentences: How many multi-reference dev sentences they were compared on.
        methods: Each method's BLEU and diversity (`diversity.json`).
        experts: Each expert's BLEU and share of E-step wins, and softmax greedy BLEU
            (`experts.json`).
    """

    runs: list[str]
    sentences: int
    methods: dict
    experts: dict


def moe_run_names(results_dir: Path) -> list[str] | None:
    """The runs the moe comparison compares, each chosen on dev: softmax, then hard-MoE.

    None until every run of the moe plan has finished.
    """
    runs = moe_compared_runs(Path(results_dir))
    return None if runs is None else [run.name for run in runs]


def moe_comparison_files(results_dir: Path) -> tuple[Path, Path]:
    """Where the moe comparison is written: `diversity.json` and `experts.json`."""
    folder = Path(results_dir) / MOE.name
    return folder / "diversity.json", folder / "experts.json"


def read_moe_comparison(results_dir: Path) -> MoeComparison | None:
    """The moe comparison, or None if there is none of the plan's current runs.

    Raises:
        RunOutputError: If `diversity.json` or `experts.json` is damaged, or the diversity
            lacks the hard-MoE model or beam search, naming the file and the field.
    """
    diversity_file, experts_file = moe_comparison_files(results_dir)
    diversity = run_outputs.read_json(diversity_file, DIVERSITY)
    experts = run_outputs.read_json(experts_file, EXPERTS)
    if diversity is not None:
        _check_methods(diversity_file, diversity["methods"])
    runs = moe_run_names(results_dir)
    if runs is None or diversity is None or experts is None or diversity.get("runs") != runs:
        return None
    return MoeComparison(runs, diversity["sentences"], diversity["methods"], experts)


def _check_methods(path: Path, methods: dict) -> None:
    """Refuses a diversity comparison without a method the claims compare (`MOE_METHODS`)."""
    for method in MOE_METHODS:
        if not any(name.startswith(method) for name in methods):
            raise Place(path, "methods").error(f"no method named {method}...")


def code_version_label(code: dict | None) -> str:
    """The commit a run trained with, from `results.json`'s `code` record.

    Args:
        code: What `tfscones.training.machine.code_version` recorded, or None.

    Returns:
        The short commit, marked "(modified)" where tracked files differed from it; "not
        recorded" for a run without one.
    """
    if not code or not code.get("commit"):
        return "not recorded"
    return code["commit"][:7] + (" (modified)" if code.get("modified") else "")


def read_json(path: Path) -> dict | None:
    """A file holding a JSON object, through the run-outputs reader; None if there is none.

    The caller checks the fields it reads; `run_outputs.read_json` with a shape checks them on
    reading.
    """
    return run_outputs.read_json(path, Object())


def seed_scores(records: list[RunRecord]) -> dict[str, dict[int, float]]:
    """Greedy test BLEU by seed of each config with two or more finished seeds."""
    by_config: dict[str, dict[int, float]] = {}
    for record in records:
        if record.finished and record.test_bleu() is not None:
            by_config.setdefault(record.run.config, {})[record.run.seed] = record.test_bleu()
    return {config: scores for config, scores in by_config.items() if len(scores) > 1}


def seed_spread(records: list[RunRecord]) -> float | None:
    """The largest greedy test BLEU difference between two seeds of one config."""
    spreads = [max(s.values()) - min(s.values()) for s in seed_scores(records).values()]
    return max(spreads) if spreads else None


def mean_over_seeds(records: list[RunRecord], config: str, search: str = "greedy") -> float | None:
    """The mean test BLEU over the finished seeds of a config; None if none finished."""
    scores = [r.test_bleu(search) for r in records if r.run.config == config and r.finished]
    scores = [score for score in scores if score is not None]
    return sum(scores) / len(scores) if scores else None


def find(records: list[RunRecord], label: str, seed: int = 1) -> RunRecord | None:
    """The record of the run with this label and seed; None if the plan has none."""
    return next((r for r in records if r.run.label == label and r.run.seed == seed), None)
