import json

import pytest

from tfscones.reproduction import plans
from tfscones.reproduction.plans import (
    PLANS,
    SPARSE_VARIANTS,
    DevChoice,
    PlannedRun,
    chosen_alpha,
    chosen_on_dev,
    dev_choice,
    moe_compared_runs,
    moe_runs,
    recipe_runs,
    scones_run,
    smoothing_runs,
)
from tfscones.training.config import config_to_dict, load_config
from tfscones.training.resume_check import config_differences

MULTI30K_STEPS = 3200  # the Multi30k configs' own `training.steps`


def finish(out_dir, run: PlannedRun, dev_bleu: float) -> None:
    folder = out_dir / run.name
    folder.mkdir(parents=True)
    results = {"best_dev_bleu": dev_bleu, "steps": 3, "train_minutes": 1.0}
    (folder / "results.json").write_text(json.dumps(results))


def test_a_run_is_named_by_its_config_and_seed_and_trains_there(tmp_path):
    run = PlannedRun("multi30k_scones_a0.5", 2, "SCONES α=0.5")
    config = load_config(run.config, run.config_overrides("../shared/data", tmp_path))

    assert run.name == "multi30k-scones-a0.5-seed2"
    assert config.name == run.name and config.run_dir == tmp_path / run.name
    assert config.training.seed == 2
    assert config.data.test_source == "../shared/data/multi30k-en-de/test_2016_flickr.en"
    assert config.data.dev_target == "../shared/data/multi30k-en-de/val.de"


CORPUS_STEPS = {"multi30k": MULTI30K_STEPS, "g2p": 7600, "synthetic": 4000}  # the configs' budgets


def test_every_run_is_bounded_by_its_steps_not_minutes(tmp_path):
    for plan in PLANS.values():
        for run in plan.fixed_runs:
            config = load_config(run.config, run.config_overrides("data", tmp_path))
            assert config.training.max_minutes is None, run.name
            assert config.training.steps == (run.steps or CORPUS_STEPS[run.corpus]), run.name


def test_the_tanh_run_waits_for_every_alpha_then_takes_the_best_on_dev(tmp_path):
    dev_bleu = {0.2: 30.0, 0.5: 31.5, 1.0: 31.0}
    for alpha in plans.SCONES_ALPHAS[:-1]:
        finish(tmp_path, scones_run(alpha), dev_bleu[alpha])
    assert chosen_alpha(tmp_path) is None
    assert not any(run.config == "multi30k_tanh" for run in PLANS["scones"].runs(tmp_path))

    finish(tmp_path, scones_run(1.0), dev_bleu[1.0])
    tanh = PLANS["scones"].runs(tmp_path)[-1]

    assert chosen_alpha(tmp_path) == 0.5
    assert tanh.config == "multi30k_tanh" and tanh.overrides == ("loss.alpha=0.5",)
    assert load_config(tanh.config, list(tanh.overrides)).loss.alpha == 0.5


def test_a_tie_on_dev_goes_to_the_smaller_alpha(tmp_path):
    for alpha in plans.SCONES_ALPHAS:
        finish(tmp_path, scones_run(alpha), 30.0 if alpha != 0.2 else 29.0)
    assert chosen_alpha(tmp_path) == 0.5


@pytest.mark.parametrize("head", ["entmax-1.5", "sparsemax"])
def test_label_smoothing_is_chosen_on_dev_once_both_runs_have_finished(head, tmp_path):
    runs = smoothing_runs(head)
    smoothed, unsmoothed = runs
    assert smoothed.name != unsmoothed.name
    for run, smoothing in runs.items():
        assert load_config(run.config).loss.label_smoothing == smoothing
    assert load_config(unsmoothed.config).model.head == load_config(smoothed.config).model.head

    assert dev_choice(tmp_path, runs) is None
    finish(tmp_path, unsmoothed, 31.0)
    assert dev_choice(tmp_path, runs) == DevChoice(unsmoothed, final=False)
    assert chosen_on_dev(tmp_path, runs) is None
    finish(tmp_path, smoothed, 31.0)
    assert dev_choice(tmp_path, runs) == DevChoice(smoothed, final=True)  # a tie: the recipe's
    assert chosen_on_dev(tmp_path, runs) == smoothed


# What each sparsemax variant changes in the ε = 0 recipe: `section.key`: (variant, recipe).
VARIANT_CHANGES = {
    "lr0.001": {"training.learning_rate": (0.001, 0.002)},
    "avg3": {"training.average_checkpoints": (3, 0)},
    "untied": {"model.tie_embeddings": (False, True)},
}


@pytest.mark.parametrize("variant", SPARSE_VARIANTS["sparsemax"], ids=lambda v: v.suffix)
def test_each_sparsemax_variant_changes_one_setting_of_the_recipe(variant, tmp_path):
    runs = recipe_runs("sparsemax")
    candidate = list(runs)[2 + SPARSE_VARIANTS["sparsemax"].index(variant)]
    assert candidate.name == f"multi30k-sparsemax-ls0-{variant.suffix}-seed1"
    assert runs[candidate] == f"ε=0, {variant.change}"
    assert candidate.label == f"sparsemax ε=0 {variant.label}" and not candidate.analysed
    data = candidate.config_overrides("data", tmp_path)
    recipe = load_config("multi30k_sparsemax_ls0", data)
    config = load_config(candidate.config, data)
    differences = config_differences(config_to_dict(config), config_to_dict(recipe))
    assert differences == VARIANT_CHANGES[variant.suffix]


def test_sparsemax_chooses_its_recipe_on_dev_once_every_candidate_has_finished(tmp_path):
    runs = recipe_runs("sparsemax")
    smoothed, unsmoothed, *variants = runs
    assert [smoothed, unsmoothed] == list(smoothing_runs("sparsemax"))
    assert len(variants) == len(SPARSE_VARIANTS["sparsemax"]) == len(VARIANT_CHANGES)
    assert recipe_runs("entmax-1.5") == {
        run: f"ε={smoothing:g}" for run, smoothing in smoothing_runs("entmax-1.5").items()
    }

    finish(tmp_path, smoothed, 30.0)
    finish(tmp_path, unsmoothed, 31.0)
    for dev_bleu, variant in enumerate(variants[:-1]):
        finish(tmp_path, variant, 29.0 + dev_bleu)
    assert chosen_on_dev(tmp_path, runs) is None
    finish(tmp_path, variants[-1], 31.5)
    assert chosen_on_dev(tmp_path, runs) == variants[-1]
    assert PLANS["entmax"].runs(tmp_path)[-1].name == variants[-1].name.replace("seed1", "seed2")


def test_a_second_seed_of_each_sparse_head_follows_its_choice_on_dev(tmp_path):
    entmax_runs, sparsemax_runs = recipe_runs("entmax-1.5"), recipe_runs("sparsemax")
    for run in entmax_runs:
        finish(tmp_path, run, 30.0 if run.name.endswith("ls0-seed1") else 29.0)
    finish(tmp_path, next(iter(sparsemax_runs)), 28.0)

    entmax_seed2, sparsemax_seed2 = PLANS["entmax"].runs(tmp_path)[-2:]
    assert entmax_seed2.name == "multi30k-entmax15-ls0-seed2"
    assert entmax_seed2.label == "entmax-1.5 ε=0" and not entmax_seed2.analysed
    # Sparsemax's other candidates are unfinished: its best run so far has the second seed.
    assert sparsemax_seed2.name == "multi30k-sparsemax-seed2"

    for run in sparsemax_runs:
        if not (tmp_path / run.name).exists():
            finish(tmp_path, run, 29.0)  # ε=0 and its other rate tie: the earlier run
    assert PLANS["entmax"].runs(tmp_path)[-1].name == "multi30k-sparsemax-ls0-seed2"


def test_the_moe_comparison_takes_each_models_dropout_chosen_on_dev(tmp_path):
    softmax_runs, mixture_runs = moe_runs("softmax"), moe_runs("hard-MoE K=5")
    # The runs without dropout keep the names of the moe plan's first runs, which they are.
    assert [run.name for run in (*softmax_runs, *mixture_runs)] == [
        "demo-softmax-6000steps-seed1",
        "demo-softmax-dropout0.1-6000steps-seed1",
        "demo-moe-k5-6000steps-seed1",
        "demo-moe-k5-dropout0.1-6000steps-seed1",
    ]
    for run, dropout in (softmax_runs | mixture_runs).items():
        config = load_config(run.config, run.config_overrides("data", tmp_path))
        assert config.model.dropout == dropout
        assert config.model.num_experts == (5 if run in mixture_runs else None)

    for run, dev_bleu in zip([*softmax_runs, *mixture_runs], [22.0, 21.0, 18.0], strict=False):
        finish(tmp_path, run, dev_bleu)
    assert moe_compared_runs(tmp_path) is None
    finish(tmp_path, list(mixture_runs)[1], 19.0)

    assert moe_compared_runs(tmp_path) == (list(softmax_runs)[0], list(mixture_runs)[1])


def test_the_softmax_baseline_is_one_run_for_both_multi30k_papers():
    scones = {run.name for run in PLANS["scones"].fixed_runs}
    entmax = {run.name for run in PLANS["entmax"].fixed_runs}
    assert scones & entmax == {"multi30k-softmax-seed1"}


@pytest.mark.parametrize("paper", sorted(PLANS))
def test_run_names_are_unique_within_a_plan(paper):
    names = [run.name for run in PLANS[paper].fixed_runs]
    assert len(names) == len(set(names))
