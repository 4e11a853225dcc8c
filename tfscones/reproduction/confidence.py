"""The confidence plan's measurement: each head's confidence as a quality estimate.

For each test set of `tfscones.reproduction.plans.CONFIDENCE_TEST_SETS` and each head, the run
chosen on dev (`plans.confidence_models`) is measured by
`tfscones.evaluation.quality_report.confidence_quality` on its test set (the demo corpus's
models on the bundled multi-reference dev set too, which is German→English like them), with
`DROPOUT_PASSES` Monte Carlo dropout passes, into `OUT/confidence/<run name>.json`:

    {"test_set": "demo", "head": "SCONES", "run": "demo-scones-a0.5-dropout0.1-6000steps-seed1",
     "dropout_passes": 30, "report": {...confidence_quality's figures...}}

A record is made once; another run chosen on dev (a candidate finished since) gets its own.
Models are not kept in the repository: a chosen run whose folder holds its results but not its
model is refused before any step, with what to do (`check_models`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from tfscones.evaluation.diverse_translations import read_multiref
from tfscones.evaluation.quality_estimation import DROPOUT_PASSES
from tfscones.evaluation.quality_report import confidence_quality
from tfscones.models import load_run
from tfscones.reproduction.plans import (
    CONFIDENCE_HEADS,
    CONFIDENCE_TEST_SETS,
    MULTIREF_FILE,
    PlannedRun,
    confidence_models,
    finished_results,
)
from tfscones.reproduction.run_outputs import CONFIDENCE_RECORD, read_json
from tfscones.run_folder import RunFolder
from tfscones.training import runner
from tfscones.training.config import ExperimentConfig, data_path
from tfscones.written_aside import write_text_aside

FOLDER = "confidence"
# The test set whose models translate the multi-reference set's direction (German→English).
MULTIREF_TEST_SET = "demo"


class MissingModelError(ValueError):
    """A run to be measured has finished, but its folder no longer holds its model."""


def record_file(out_dir: Path, run: PlannedRun) -> Path:
    """Where a run's confidence record goes: `OUT/confidence/<run name>.json`."""
    return Path(out_dir) / FOLDER / f"{run.name}.json"


def read_record(out_dir: Path, run: PlannedRun) -> dict | None:
    """A run's confidence record; None if it has not been measured.

    Raises:
        tfscones.reproduction.run_outputs.RunOutputError: If it is damaged, naming it.
    """
    return read_json(record_file(out_dir, run), CONFIDENCE_RECORD)


def read_records(out_dir: Path) -> dict[str, dict[str, dict | None]]:
    """Each test set's record of each head's run chosen on dev (None: not measured yet)."""
    return {
        test_set: {
            head: read_record(out_dir, run) if run else None
            for head, run in confidence_models(out_dir, test_set).items()
        }
        for test_set in CONFIDENCE_TEST_SETS
    }


def to_measure(out_dir: Path, only: Sequence[str] = ()) -> list[tuple[str, str, PlannedRun]]:
    """The (test set, head, run) chosen on dev without a record yet, or of `only`'s runs."""
    return [
        (test_set, head, run)
        for test_set in CONFIDENCE_TEST_SETS
        for head, run in confidence_models(out_dir, test_set).items()
        if run is not None and (not only or run.name in only) and read_record(out_dir, run) is None
    ]


def check_models(out_dir: Path, only: Sequence[str] = ()) -> None:
    """Refuses, before any step, runs to be measured whose folder has results but no model.

    Raises:
        MissingModelError: Naming the runs and how to train them again.
    """
    missing = [
        run.name
        for _, _, run in to_measure(out_dir, only)
        if finished_results(out_dir, run) is not None
        and not RunFolder(Path(out_dir) / run.name).model.is_file()
    ]
    if missing:
        folders = " ".join(str(Path(out_dir) / name) for name in missing)
        raise MissingModelError(
            f"the confidence plan measures the models of {', '.join(missing)}, whose folders "
            "hold their results but not their model.keras (models are not kept in the "
            f"repository). Move those folders aside (for example `mkdir -p old && mv {folders} "
            "old/`) and run the plan again: it trains them again from their seeds."
        )


def measure(
    out_dir: Path, config_of: Callable[[PlannedRun], ExperimentConfig], only: Sequence[str] = ()
) -> list[str]:
    """Measures each run `to_measure` lists and writes its record; returns what it did."""
    done = []
    for test_set, head, run in to_measure(out_dir, only):
        record = measure_run(config_of(run), test_set, head)
        path = record_file(out_dir, run)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_aside(path, _json(record))
        done.append(f"measured {run.name}")
    return done


def measure_run(
    config: ExperimentConfig, test_set: str, head: str, passes: int = DROPOUT_PASSES
) -> dict:
    """The confidence record of one run's best model on its test set.

    Args:
        config: The run's experiment config (its folder, its test set).
        test_set: Which of `CONFIDENCE_TEST_SETS` it is measured for.
        head: Which of `CONFIDENCE_HEADS` it stands for.
        passes: Monte Carlo dropout passes (none if the model has no dropout).
    """
    if head not in CONFIDENCE_HEADS:
        raise ValueError(f"unknown head {head!r}; allowed: {', '.join(CONFIDENCE_HEADS)}.")
    sources, streams = runner.scored_test_set(config, config.data.test_sentences)
    model, tokenizer = load_run(config.run_dir)
    passes = passes if model.dropout > 0 else 0
    multiref = read_multiref(data_path(MULTIREF_FILE)) if test_set == MULTIREF_TEST_SET else None
    with RunFolder(config.run_dir).hold():
        report = confidence_quality(
            model, tokenizer, sources, streams[0], multiref=multiref, passes=passes
        )
    return {
        "test_set": test_set,
        "head": head,
        "run": config.name,
        "dropout_passes": passes,
        "report": report,
    }


def _json(record: dict) -> str:
    """The record as JSON, where a figure no sample defines (a NaN) is null."""
    return json.dumps(_nulls(record), indent=1) + "\n"


def _nulls(value):
    if isinstance(value, dict):
        return {key: _nulls(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_nulls(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
