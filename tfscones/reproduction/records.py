"""What a reproduction folder holds for one run, read back from its small text files.

A run folder written by `tfscones reproduce` keeps, beside the models and backups that stay
out of the repository, the files the report is made from: `config.yaml`, `results.json`,
`history.csv`, `evaluation.json` and `analysis.json`. `read_run` reads whichever exist;
`read_moe_comparison` reads the moe plan's comparison of its two runs.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import yaml

from tfscones.evaluation.analysis import ModelAnalysis
from tfscones.reproduction.plans import MOE, PlannedRun, moe_compared_runs
from tfscones.run_folder import RunFolder


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """The outputs of one planned run; None (or empty) for what it has not written yet.

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
    """The run's record from `out_dir/<run name>/`."""
    folder = RunFolder(out_dir / run.name)
    analysis_record = read_json(folder.analysis)
    config_file = folder.config
    return RunRecord(
        run=run,
        config=yaml.safe_load(config_file.read_text(encoding="utf-8"))
        if config_file.is_file()
        else None,
        results=read_json(folder.results),
        history=_history(folder.history),
        evaluation=read_json(folder.evaluation),
        analysis=ModelAnalysis.from_dict(analysis_record["analysis"]) if analysis_record else None,
        analysis_settings=analysis_record["settings"] if analysis_record else None,
    )


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
    """The moe comparison, or None if there is none of the plan's current runs."""
    diversity_file, experts_file = moe_comparison_files(results_dir)
    diversity, experts = read_json(diversity_file), read_json(experts_file)
    runs = moe_run_names(results_dir)
    if runs is None or diversity is None or experts is None or diversity.get("runs") != runs:
        return None
    return MoeComparison(runs, diversity["sentences"], diversity["methods"], experts)


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
    """A JSON file's value; None if there is no such file."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _history(path: Path) -> list[dict]:
    """The epoch rows of a Keras `CSVLogger` file, numbers as floats (empty cells left out)."""
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", newline="") as file:
        return [
            {key: float(value) for key, value in row.items() if value not in ("", None)}
            for row in csv.DictReader(file)
        ]


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
