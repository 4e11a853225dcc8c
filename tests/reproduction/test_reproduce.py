"""`reproduce`: its steps, their order and what it skips; seeded runs bounded by steps."""

import json

import keras
import numpy as np
import pytest

from tfscones.reproduction import reproduce as reproduction
from tfscones.reproduction.demo_expectations import MeasuredPoint, read_expectations
from tfscones.reproduction.plans import PLANS, Plan, PlannedRun, scones_run
from tfscones.reproduction.reproduce import AnalysisSettings, reproduce, run_config
from tfscones.training import runner
from tfscones.training.config import ConfigError

from .test_report import analysis as fake_analysis
from .tiny_corpus import TINY, write_data_dir

SETTINGS = AnalysisSettings(beam_sizes=(1, 2), exact_sentences=3, state_budget=40)


def fake_results(dev_bleu: float) -> dict:
    return {"best_dev_bleu": dev_bleu, "steps": 3, "train_minutes": 1.0}


def bleu_evaluation(greedy: float) -> dict:
    return {
        "greedy": {"bleu": greedy, "chrf": 50.0},
        "beam4": {"bleu": greedy + 0.5, "chrf": 50.0},
    }


@pytest.fixture
def data_dir(tmp_path):
    return str(write_data_dir(tmp_path / "data"))


@pytest.fixture
def recorded_steps(monkeypatch):
    """Replaces each step's work by writing its file, and records the steps taken."""
    taken = []

    def fake(step, write):
        def action(config, settings, progress):
            taken.append(f"{step} {config.name}")
            write(config.run_dir, settings)

        return action

    def results(folder, settings):
        folder.mkdir(parents=True, exist_ok=True)
        better = ("multi30k-scones-a1.0-seed1", "demo-moe-k5-dropout0.1-6000steps-seed1")
        dev = 31.0 if folder.name in better else 30.0
        (folder / "results.json").write_text(json.dumps(fake_results(dev)))

    def evaluation(folder, settings):
        (folder / "evaluation.json").write_text(json.dumps(bleu_evaluation(30.0)))

    def analysis(folder, settings):
        record = fake_analysis(folder.name, 30.0, 30.0) | {"settings": settings.as_dict()}
        (folder / "analysis.json").write_text(json.dumps(record))

    monkeypatch.setattr(reproduction, "_train", fake("train", results))
    monkeypatch.setattr(reproduction, "_evaluate", fake("evaluate", evaluation))
    monkeypatch.setattr(reproduction, "_analyse", fake("analyse", analysis))
    return taken


def test_each_run_is_trained_evaluated_and_analysed_then_skipped(
    data_dir, tmp_path, recorded_steps
):
    out = tmp_path / "out"
    done = reproduce("entmax", out, data_dir, SETTINGS, TINY)

    expected = [
        f"{step} {run.name}"
        for run in PLANS["entmax"].fixed_runs
        for step in ("train", "evaluate", "analyse")[: 3 if run.analysed else 2]
    ]
    second_seeds = ["multi30k-entmax15-seed2", "multi30k-sparsemax-seed2"]  # ε on a dev tie: 0.1
    expected += [f"{step} {name}" for name in second_seeds for step in ("train", "evaluate")]
    assert recorded_steps == expected
    assert done == [
        line.replace("train", "trained")
        .replace("evaluate", "evaluated")
        .replace("analyse", "analysed")
        for line in expected
    ]

    recorded_steps.clear()
    assert reproduce("entmax", out, data_dir, SETTINGS, TINY) == []
    assert recorded_steps == []


def test_other_analysis_settings_redo_the_analyses_alone(data_dir, tmp_path, recorded_steps):
    out = tmp_path / "out"
    reproduce("entmax", out, data_dir, SETTINGS, TINY)
    recorded_steps.clear()

    wider = AnalysisSettings(beam_sizes=(1, 2, 4), exact_sentences=3, state_budget=40)
    reproduce("entmax", out, data_dir, wider, TINY)

    analysed = [run for run in PLANS["entmax"].fixed_runs if run.analysed]
    assert recorded_steps == [f"analyse {run.name}" for run in analysed]


def test_the_scones_plan_trains_tanh_at_the_alpha_chosen_on_dev(data_dir, tmp_path, recorded_steps):
    reproduce("scones", tmp_path / "out", data_dir, SETTINGS, TINY)

    # The recorded α = 1.0 run had the best dev BLEU (31.0 against 30.0).
    assert recorded_steps[-3:] == [
        "train multi30k-tanh-seed1",
        "evaluate multi30k-tanh-seed1",
        "analyse multi30k-tanh-seed1",
    ]
    tanh = json.loads((tmp_path / "out" / "multi30k-tanh-seed1" / "results.json").read_text())
    assert tanh == fake_results(30.0)
    seed2 = [step for step in recorded_steps if "seed2" in step]
    assert seed2 and not any(step.startswith("analyse") for step in seed2)


def test_the_demo_plan_tables_test_bleu_by_step_budget_once(tmp_path, recorded_steps, monkeypatch):
    def evaluate(config, settings, progress):
        steps = config.training.steps
        greedy = steps / 100 + (1.0 if "scones" in config.name else 0.0)
        (config.run_dir / "evaluation.json").write_text(json.dumps(bleu_evaluation(greedy)))

    monkeypatch.setattr(reproduction, "_evaluate", evaluate)
    out = tmp_path / "out"

    done = reproduce("demo", out, settings=SETTINGS)

    assert done[-1] == "tabled demo"
    assert not any(step.startswith("analyse") for step in recorded_steps)
    assert read_expectations(out / "demo" / "expected_bleu.json") == {
        "demo_softmax": [MeasuredPoint(s, s / 100, s / 100 + 0.5) for s in (1000, 2000, 3000)],
        "demo_scones_a0.5": [
            MeasuredPoint(s, s / 100 + 1.0, s / 100 + 1.5) for s in (1000, 2000, 3000)
        ],
    }
    assert reproduce("demo", out, settings=SETTINGS) == []


def test_the_moe_comparison_is_made_once_and_again_for_other_runs(
    tmp_path, recorded_steps, monkeypatch
):
    compared = []

    def compare(baseline, mixture):
        compared.append((baseline.name, mixture.name))
        experts = {
            "bleu": [20.0],
            "baseline_greedy_bleu": 21.0,
            "wins": {"shares": [1.0], "pairs": 3, "left_out": 0},
        }
        method = {
            "bleu": 20.0,
            "pairwise_bleu": 50.0,
            "average_oracle_bleu": 30.0,
            "references_covered": 1.0,
        }
        methods = dict.fromkeys(("hard-MoE K=5", "beam 5, 5-best", "sampling"), method)
        return experts, methods, 3

    monkeypatch.setattr(reproduction, "_compare_moe", compare)
    out = tmp_path / "out"
    # Dropout ties on dev for softmax (the first run, dropout 0, is kept); 0.1 wins for hard-MoE.
    names = ("demo-softmax-6000steps-seed1", "demo-moe-k5-dropout0.1-6000steps-seed1")

    assert reproduce("moe", out, settings=SETTINGS)[-1] == "compared moe"
    assert reproduce("moe", out, settings=SETTINGS) == []
    diversity_file = out / "moe" / "diversity.json"
    assert json.loads(diversity_file.read_text())["runs"] == list(names)

    stale = json.loads(diversity_file.read_text()) | {"runs": ["demo-softmax-3000steps-seed1"]}
    diversity_file.write_text(json.dumps(stale))
    assert reproduce("moe", out, settings=SETTINGS) == ["compared moe"]
    assert compared == [names, names]


def test_a_missing_data_folder_is_refused_before_any_training(tmp_path, recorded_steps):
    with pytest.raises(ConfigError, match=r"no such file: .*nowhere/multi30k-en-de/train.en"):
        reproduce("scones", tmp_path / "out", str(tmp_path / "nowhere"), SETTINGS, TINY)
    assert recorded_steps == []
    assert not (tmp_path / "out").exists()


def test_an_unknown_paper_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown paper 'bleu'; allowed: scones, entmax, moe"):
        reproduce("bleu", tmp_path)


def first_batches(config, tokenizer, count=3):
    batches = runner.training_batches(config, tokenizer).take(count)
    return [(inputs["source_ids"].numpy(), targets.numpy()) for inputs, targets in batches]


def initial_weights(config, vocabulary_size):
    keras.utils.set_random_seed(config.training.seed)  # as `runner.train` does
    return runner.build_model(config, vocabulary_size).get_weights()


def test_the_seed_fixes_the_initial_weights_and_the_first_batches(data_dir, tmp_path):
    configs = {
        seed: run_config(PlannedRun("multi30k_softmax", seed, "softmax"), tmp_path, data_dir, TINY)
        for seed in (1, 2)
    }
    configs[1].run_dir.mkdir(parents=True)
    tokenizer = runner.prepare_tokenizer(configs[1], configs[1].run_dir)

    first, again = (first_batches(configs[1], tokenizer) for _ in range(2))
    other = first_batches(configs[2], tokenizer)
    for (source, target), (source_again, target_again) in zip(first, again, strict=True):
        np.testing.assert_array_equal(source, source_again)
        np.testing.assert_array_equal(target, target_again)
    assert any(
        a.shape != b.shape or (a != b).any() for (a, _), (b, _) in zip(first, other, strict=True)
    )

    weights, weights_again, other_weights = (
        initial_weights(configs[seed], tokenizer.vocab_size) for seed in (1, 1, 2)
    )
    for array, array_again in zip(weights, weights_again, strict=True):
        np.testing.assert_array_equal(array, array_again)
    assert any((a != b).any() for a, b in zip(weights, other_weights, strict=True) if a.size > 1)


@pytest.mark.slow
def test_reproduce_runs_the_real_steps_then_skips_them(data_dir, tmp_path, monkeypatch):
    tiny_plan = Plan("tiny", "a test", (scones_run(0.5),))
    monkeypatch.setitem(PLANS, "tiny", tiny_plan)
    out = tmp_path / "out"

    done = reproduce("tiny", out, data_dir, SETTINGS, TINY)

    folder = out / "multi30k-scones-a0.5-seed1"
    assert done == [f"{step} {folder.name}" for step in ("trained", "evaluated", "analysed")]
    results = json.loads((folder / "results.json").read_text())
    evaluation = json.loads((folder / "evaluation.json").read_text())
    analysis = json.loads((folder / "analysis.json").read_text())
    assert results["steps"] == 3
    assert evaluation["greedy"]["bleu"] == pytest.approx(results["test_bleu"])
    assert analysis["settings"] == SETTINGS.as_dict()
    assert analysis["analysis"]["beam_curve"][0]["bleu"] == pytest.approx(results["test_bleu"])
    assert reproduce("tiny", out, data_dir, SETTINGS, TINY) == []


@pytest.mark.slow
def test_two_runs_of_one_seed_train_the_same_weights(data_dir, tmp_path):
    run = PlannedRun("multi30k_softmax", 1, "softmax")
    weights = []
    for folder in ("first", "second"):
        config = run_config(run, tmp_path / folder, data_dir, TINY)
        runner.train(config)
        model = keras.saving.load_model(config.run_dir / "checkpoints" / "last.keras")
        weights.append(model.get_weights())
    for first, second in zip(*weights, strict=True):
        np.testing.assert_array_equal(first, second)


def test_only_works_on_the_runs_named(data_dir, tmp_path, recorded_steps):
    only = ["multi30k-sparsemax-seed1"]
    reproduce("entmax", tmp_path / "out", data_dir, SETTINGS, TINY, only)
    assert recorded_steps == [f"{step} {only[0]}" for step in ("train", "evaluate", "analyse")]


def test_only_refuses_a_run_the_plan_does_not_have(data_dir, tmp_path, recorded_steps):
    with pytest.raises(
        ValueError, match="the entmax plan has no run multi30k-tanh-seed1; its runs: "
    ):
        reproduce("entmax", tmp_path / "out", data_dir, SETTINGS, TINY, ["multi30k-tanh-seed1"])
    assert recorded_steps == []
