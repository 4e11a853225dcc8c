"""Distribution: a MirroredStrategy step equals the default strategy's on the same global batch."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]


def run_script(name: str, timeout: int = 300) -> list[dict]:
    finished = subprocess.run(
        [sys.executable, str(Path(__file__).with_name(name))],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    return [json.loads(line) for line in finished.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def mirrored_results():
    return {row["head"]: row for row in run_script("mirrored_step.py")}


@pytest.mark.parametrize("head", ["softmax", "sigmoid", "sparsemax"])
def test_mirrored_step_equals_default_step_with_unequal_tokens_per_replica(mirrored_results, head):
    row = mirrored_results[head]
    assert row["replicas"] == 2
    assert row["mirrored_loss"] == pytest.approx(row["default_loss"], rel=1e-5)
    # Head metrics (sparsemax's support size counts with the loss's thresholds, which each
    # replica's loss records for its own logits) agree across the replicas' split too.
    assert row["mirrored_metrics"].keys() == row["default_metrics"].keys()
    for name, value in row["default_metrics"].items():
        assert row["mirrored_metrics"][name] == pytest.approx(value, rel=1e-5), name
    # The step moved the weights by O(1); both strategies moved them the same way.
    assert row["weights_moved"] > 0.1
    assert row["max_weight_difference"] < 1e-5
