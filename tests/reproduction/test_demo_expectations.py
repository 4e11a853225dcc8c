"""What the demo should reach at its step count: interpolation, the file, the shipped copy."""

from pathlib import Path

import pytest

from tfscones.commands import demo
from tfscones.reproduction.demo_expectations import (
    EXPECTATIONS_FILE,
    MeasuredPoint,
    describe_expectation,
    expected_greedy_bleu,
    measured_points,
    read_expectations,
    write_expectations,
)
from tfscones.reproduction.plans import DEMO
from tfscones.reproduction.records import read_run

POINTS = [MeasuredPoint(1000, 10.0, 11.0), MeasuredPoint(2000, 16.0, 16.5)]
REPRODUCTION = Path(__file__).parents[2] / "docs" / "reproduction"


@pytest.mark.parametrize(
    ("steps", "expected"), [(1000, 10.0), (1250, 11.5), (1500, 13.0), (2000, 16.0)]
)
def test_bleu_is_linear_between_the_measured_budgets(steps, expected):
    assert expected_greedy_bleu(POINTS, steps) == pytest.approx(expected)


@pytest.mark.parametrize("steps", [999, 2001])
def test_no_figure_is_made_up_outside_the_measured_budgets(steps):
    assert expected_greedy_bleu(POINTS, steps) is None


def test_the_description_names_the_points_it_rests_on():
    measured = "1,000 steps 10.0, 2,000 steps 16.0"
    assert describe_expectation(POINTS, 1500) == f"about 13.0 (measured: {measured})"
    assert describe_expectation(POINTS, 600) == (
        f"below 10.0, fewer steps than measured ({measured})"
    )
    assert describe_expectation(POINTS, 2600) == (
        f"16.0 or more, more steps than measured ({measured})"
    )


def test_the_file_reads_back_what_was_written(tmp_path):
    points = {"demo_softmax": POINTS, "demo_scones_a0.5": POINTS[:1]}
    write_expectations(tmp_path / "demo" / EXPECTATIONS_FILE, points)
    assert read_expectations(tmp_path / "demo" / EXPECTATIONS_FILE) == points


def test_the_shipped_expectations_are_the_committed_demo_runs():
    records = [read_run(REPRODUCTION, run) for run in DEMO.runs(REPRODUCTION)]
    measured = measured_points(records)

    assert read_expectations() == measured, (
        "tfscones/data/demo/expected_bleu.json differs from the runs in docs/reproduction: "
        "copy docs/reproduction/demo/expected_bleu.json after `tfscones reproduce demo`"
    )
    assert read_expectations(REPRODUCTION / "demo" / EXPECTATIONS_FILE) == measured
    assert set(measured) == set(demo.MODELS.values())
    assert all(len(points) == len(DEMO.runs(REPRODUCTION)) // 2 for points in measured.values())


def test_the_demo_says_what_its_step_counts_should_give(monkeypatch, capsys):
    monkeypatch.setattr(
        demo, "read_expectations", lambda: dict.fromkeys(demo.MODELS.values(), POINTS)
    )
    demo.print_expectations({"softmax": {"steps": 1500}, "SCONES α=0.5": {"steps": 800}})
    printed = capsys.readouterr().out

    assert "  softmax       1,500 steps: about 13.0 (measured: 1,000 steps 10.0," in printed
    assert "  SCONES α=0.5    800 steps: below 10.0, fewer steps than measured" in printed
