"""What BLEU `tfscones demo` should reach at the number of steps it trained.

The demo trains for a wall-clock budget, so a slow machine trains fewer steps and scores lower
without anything being wrong. The `demo` reproduction plan trains each demo config for fixed
step budgets (seed 1) and `tfscones reproduce demo` writes their test BLEU to
`OUT/demo/expected_bleu.json`; the package ships the copy made from `docs/reproduction`
(`tfscones/data/demo/expected_bleu.json`), which the demo reads to say what its step count
should give.

The file maps each demo config to its measured points, fewest steps first:

    {"demo_softmax": [{"steps": 1000, "greedy_bleu": 12.3, "beam4_bleu": 12.9}, ...], ...}
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from tfscones.reproduction.records import RunRecord
from tfscones.reproduction.run_outputs import EXPECTATIONS, Place, read_json
from tfscones.training.config import data_path

EXPECTATIONS_FILE = "expected_bleu.json"
SHIPPED_EXPECTATIONS = "tfscones:data/demo/expected_bleu.json"


@dataclasses.dataclass(frozen=True)
class MeasuredPoint:
    """Test BLEU of a demo config trained for a fixed number of steps.

    Attributes:
        steps: The step budget (the learning rate decays to 0 at its end, as in the demo).
        greedy_bleu: Greedy BLEU on the demo test set.
        beam4_bleu: Beam-4 BLEU on the demo test set.
    """

    steps: int
    greedy_bleu: float
    beam4_bleu: float


def measured_points(records: Sequence[RunRecord]) -> dict[str, list[MeasuredPoint]]:
    """The evaluated runs of the `demo` plan as measured points by config, fewest steps first."""
    points: dict[str, list[MeasuredPoint]] = {}
    for record in records:
        if record.evaluation is None:
            continue
        point = MeasuredPoint(record.run.steps, record.test_bleu(), record.test_bleu("beam4"))
        points.setdefault(record.run.config, []).append(point)
    return {config: sorted(found, key=lambda p: p.steps) for config, found in points.items()}


def write_expectations(path: Path, points: dict[str, list[MeasuredPoint]]) -> None:
    """Writes the measured points as JSON, in the format `read_expectations` reads."""
    value = {
        config: [dataclasses.asdict(point) for point in found] for config, found in points.items()
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1) + "\n", encoding="utf-8")


def read_expectations(path: str | Path = SHIPPED_EXPECTATIONS) -> dict[str, list[MeasuredPoint]]:
    """The measured points of a file (by default the copy shipped with the package).

    Raises:
        tfscones.reproduction.run_outputs.RunOutputError: If the file is missing or damaged,
            naming it.
    """
    file = data_path(str(path))
    value = read_json(file, EXPECTATIONS)
    if value is None:
        raise Place(file).error("missing")
    return {config: [MeasuredPoint(**point) for point in found] for config, found in value.items()}


def expected_greedy_bleu(points: Sequence[MeasuredPoint], steps: int) -> float | None:
    """Greedy BLEU at `steps`, linear between the two nearest measured step budgets.

    None outside the measured budgets: BLEU does not grow linearly beyond them.
    """
    for lower, upper in zip(points, points[1:], strict=False):
        if lower.steps <= steps <= upper.steps:
            share = (steps - lower.steps) / (upper.steps - lower.steps)
            return lower.greedy_bleu + share * (upper.greedy_bleu - lower.greedy_bleu)
    if len(points) == 1 and points[0].steps == steps:
        return points[0].greedy_bleu
    return None


def describe_expectation(points: Sequence[MeasuredPoint], steps: int) -> str:
    """One line: what greedy test BLEU `steps` steps should give, with the points it rests on.

    Example: "about 16.9 (measured: 2,000 steps 15.8, 3,000 steps 18.4)".
    """
    measured = ", ".join(f"{p.steps:,} steps {p.greedy_bleu:.1f}" for p in points)
    expected = expected_greedy_bleu(points, steps)
    if expected is not None:
        return f"about {expected:.1f} (measured: {measured})"
    if steps < points[0].steps:
        return f"below {points[0].greedy_bleu:.1f}, fewer steps than measured ({measured})"
    return f"{points[-1].greedy_bleu:.1f} or more, more steps than measured ({measured})"
