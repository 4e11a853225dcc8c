"""The G2P plan: its runs, choices on dev PER, real tiny runs and ensembles, its report section."""

import json

import pytest

from tfscones.reproduction import g2p
from tfscones.reproduction import reproduce as reproduction
from tfscones.reproduction.g2p_report import g2p_section
from tfscones.reproduction.plans import G2P, G2P_SMOOTHING, g2p_recipe_runs, g2p_run
from tfscones.reproduction.records import read_run
from tfscones.reproduction.report import write_report
from tfscones.reproduction.reproduce import reproduce, run_config

from .tiny_corpus import TINY

LANGUAGES = ("fre", "kor")
WORDS = {
    "fre": [("abat", "a b a"), ("bête", "b ɛ t"), ("tête", "t ɛ t"), ("été", "e t e")],
    "kor": [("가게", "k a̠ː ɡ e̞"), ("가다", "k a̠ d a̠"), ("나", "n a̠"), ("다", "t a̠")],
}
TINY_G2P = [
    *[o for o in TINY if not o.startswith(("data.vocabulary_size", "data.dev_sentences"))],
    f"data.languages=[{', '.join(LANGUAGES)}]",
]


@pytest.fixture
def data_dir(tmp_path):
    """A SIGMORPHON-shaped folder of two languages: every split holds each language's words."""
    folder = tmp_path / "data" / "sigmorphon2020-g2p"
    folder.mkdir(parents=True)
    for language, words in WORDS.items():
        text = "".join(f"{word}\t{phones}\n" for word, phones in words)
        for split in ("train", "dev", "test"):
            (folder / f"{language}_{split}.tsv").write_text(text, encoding="utf-8")
    return str(tmp_path / "data")


def fake_results(out_dir, run, dev_per: float) -> None:
    folder = out_dir / run.name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(
        json.dumps({"best_dev_per": dev_per, "steps": 3, "train_minutes": 1.0})
    )


def fake_evaluation_record(wer: float, per: float) -> dict:
    """`evaluation.json`'s content: 8 words, greedy and beam 5 alike, French alone."""
    rates = {"wer": wer, "per": per, "by_language": {"fre": {"words": 4, "wer": wer, "per": per}}}
    return {"words": 8, "greedy": rates, "beam5": rates}


def fake_evaluation(out_dir, run, wer: float, per: float) -> None:
    (out_dir / run.name / "evaluation.json").write_text(
        json.dumps(fake_evaluation_record(wer, per))
    )


def test_the_plan_names_each_loss_and_setting_and_reads_the_task_files(tmp_path):
    names = [run.name for run in G2P.runs(tmp_path)]
    assert names[:3] == [
        "g2p-softmax-ls0-seed1",
        "g2p-softmax-ls0.04-seed1",
        "g2p-softmax-ls0.15-seed1",
    ]
    assert "g2p-entmax15-ls0.04-seed1" in names and "g2p-scones-a0.5-seed1" in names
    assert len(names) == 3 * len(G2P_SMOOTHING) + 3  # no seed 2 before anything finished
    for data in ("../shared/data", "../shared/data/sigmorphon2020-g2p/"):
        config = run_config(g2p_run("entmax-1.5", 0.04), tmp_path, data)
        assert config.data.test_tsv == "../shared/data/sigmorphon2020-g2p/{language}_test.tsv"
        assert config.loss.label_smoothing == 0.04 and config.training.selection_metric == "per"


def test_the_lowest_dev_per_chooses_the_recipe_whose_seeds_are_added(tmp_path):
    runs = list(g2p_recipe_runs("entmax-1.5"))
    for run, dev_per in zip(runs, (3.2, 2.9, 3.0), strict=True):
        fake_results(tmp_path, run, dev_per)
    added = [run.name for run in G2P.runs(tmp_path) if run.seed == 2]
    assert added == ["g2p-entmax15-ls0.04-seed2"]  # the lowest PER, not the highest


@pytest.mark.slow  # 60 s: four tiny trainings, their beam-5 evaluations and an ensemble
def test_runs_are_trained_scored_per_language_skipped_and_their_seeds_ensembled(data_dir, tmp_path):
    out = tmp_path / "out"
    candidates = [run.name for run in g2p_recipe_runs("entmax-1.5")]
    done = reproduce("g2p", out, data_dir, overrides=TINY_G2P, only=candidates)
    assert done == [f"{step} {name}" for name in candidates for step in ("trained", "evaluated")]
    evaluation = json.loads((out / candidates[0] / "evaluation.json").read_text())
    assert set(evaluation) == {"words", "greedy", "beam5"} and evaluation["words"] == 8
    assert set(evaluation["beam5"]["by_language"]) == set(LANGUAGES)
    kor = (out / candidates[0] / "test-hypotheses" / "kor.tsv").read_text(encoding="utf-8")
    assert [line.split("\t")[0] for line in kor.splitlines()] == [p for _, p in WORDS["kor"]]
    assert reproduce("g2p", out, data_dir, overrides=TINY_G2P, only=candidates) == []

    chosen = next(run for run in G2P.runs(out) if run.seed == 2)
    assert reproduce("g2p", out, data_dir, overrides=TINY_G2P, only=[chosen.name]) == [
        f"trained {chosen.name}",
        f"evaluated {chosen.name}",
    ]
    config_of = lambda run: run_config(run, out, data_dir, TINY_G2P)  # noqa: E731
    recipe_name = "ensemble-" + chosen.name.removesuffix("-seed2")
    assert reproduce("g2p", out, data_dir, overrides=TINY_G2P, only=[recipe_name]) == [
        f"ensembled {recipe_name}"
    ]
    record = json.loads((out / "g2p" / f"{recipe_name}.json").read_text())
    assert record["runs"] == [chosen.name.replace("seed2", "seed1"), chosen.name]
    assert set(record["beam5"]["by_language"]) == set(LANGUAGES)
    assert (out / "g2p" / recipe_name / "test-hypotheses" / "fre.tsv").is_file()
    assert g2p.evaluate_ensembles(out, config_of) == []  # recorded: not decoded again


def finish_entmax_grid(out_dir) -> str:
    """Fake results of the entmax-1.5 grid and the chosen recipe's seed 2; the ensemble's name."""
    for run, dev_per in zip(g2p_recipe_runs("entmax-1.5"), (3.2, 2.9, 3.0), strict=True):
        fake_results(out_dir, run, dev_per)
    fake_results(out_dir, g2p_run("entmax-1.5", 0.04, seed=2), 3.1)
    fake_evaluation(out_dir, g2p_run("entmax-1.5", 0.04, seed=2), 14.0, 3.0)
    return "ensemble-g2p-entmax15-ls0.04"


def test_only_names_an_ensemble_once_its_seeds_have_finished(data_dir, tmp_path, monkeypatch):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="no run ensemble-g2p-entmax15-ls0.04; .*once every run"):
        reproduce("g2p", out, data_dir, overrides=TINY_G2P, only=["ensemble-g2p-entmax15-ls0.04"])
    name = finish_entmax_grid(out)
    decoded = []
    monkeypatch.setattr(
        g2p, "evaluate_ensembles", lambda out_dir, config_of, names: decoded.append(names) or []
    )
    reproduce("g2p", out, data_dir, overrides=TINY_G2P, only=[name])
    reproduce("g2p", out, data_dir, overrides=TINY_G2P, only=["g2p-entmax15-ls0.04-seed2"])
    assert decoded == [[name]]  # a run named alone decodes no ensemble
    with pytest.raises(ValueError, match="its ensembles now: ensemble-g2p-entmax15-ls0.04\\."):
        reproduce("g2p", out, data_dir, overrides=TINY_G2P, only=["ensemble-g2p-softmax-ls0.15"])


def test_an_ensemble_whose_runs_lost_their_models_is_refused_naming_them(data_dir, tmp_path):
    out = tmp_path / "out"
    name = finish_entmax_grid(out)
    with pytest.raises(FileNotFoundError, match=f"{name} needs the model .*ls0.04-seed1, .*seed2"):
        reproduce("g2p", out, data_dir, overrides=TINY_G2P, only=[name])
    assert not (out / "g2p").exists()


def test_the_g2p_evaluation_step_replaces_the_bleu_one(tmp_path, monkeypatch, data_dir):
    config = run_config(g2p_run("sparsemax", 0.0), tmp_path, data_dir, TINY_G2P)
    (tmp_path / g2p_run("sparsemax", 0.0).name).mkdir()
    monkeypatch.setattr(g2p, "evaluate_run", lambda config: {"words": 8})
    reproduction._evaluate(config, None, None)
    assert json.loads((config.run_dir / "evaluation.json").read_text()) == {"words": 8}


def test_the_section_lays_out_table_1_with_the_paper_beside_and_judges_claims(tmp_path):
    out = tmp_path
    for loss, (chosen_setting, wers) in {
        "cross-entropy": (0.15, {0.0: 20.0, 0.04: 19.0, 0.15: 18.0}),
        "entmax-1.5": (0.04, {0.0: 16.0, 0.04: 14.0, 0.15: 15.0}),
        "sparsemax": (0.04, {0.0: 16.5, 0.04: 14.5, 0.15: 15.5}),
    }.items():
        for run, setting in g2p_recipe_runs(loss).items():
            fake_results(out, run, wers[setting] / 5)
            fake_evaluation(out, run, wers[setting], wers[setting] / 5)
            if setting == chosen_setting:
                second = g2p_run(loss, setting, seed=2)
                fake_results(out, second, wers[setting] / 5)
                fake_evaluation(out, second, wers[setting] + 0.5, wers[setting] / 5)
    records = [read_run(out, run) for run in G2P.runs(out)]
    lines = "\n".join(g2p_section(records, out, "docs/reproduction"))

    assert "tfscones reproduce g2p --data ../shared/data/sigmorphon2020-g2p" in lines
    assert (
        "| entmax-1.5 | ε=0.04 (chosen) | 2.80 | 2 | 14.25 ± 0.35 | 2.80 ± 0.00 | 14.18 ± 0.24"
        in lines
    )
    assert "| entmax-1.5 | ε=0 | 3.20 | 1 | 16.00 | 3.20 | 15.25 ± 0.25 | 3.05 ± 0.03 |" in lines
    assert "| SCONES | α=0.2 |  | 0 | not run yet |" in lines
    assert (
        "The entmax-1.5 loss beats cross-entropy (Table 1).** Chosen recipes, mean test " in lines
    )
    assert (
        "entmax-1.5 14.25, cross-entropy 18.25; seed spread 0.50 WER. Verdict: **agrees**" in lines
    )
    assert (
        "improves the sparsemax loss (Table 1).** Seed 1, test WER: sparsemax ε=0.04 14.50" in lines
    )
    assert "| fre | 20.0 / 4.00 | 19.0 / 3.80 | 18.0 / 3.60 | 16.0 / 3.20 | 14.0 / 2.80 |" in lines
    assert "entmax-1.5 14.25, sparsemax 14.75. Verdict: **agrees**" in lines  # both together
    assert "The ensemble has not been decoded yet. Verdict: **not run yet**" in lines


@pytest.mark.parametrize("wer, per, verdict", [(13.5, 2.7, "agrees"), (16.67, 3.48, "disagrees")])
def test_the_decoded_ensemble_is_judged_against_the_previous_state_of_the_art(
    tmp_path, wer, per, verdict
):
    finish_entmax_grid(tmp_path)
    fake_evaluation(tmp_path, g2p_run("entmax-1.5", 0.04), 14.0, 3.0)
    (recipe,) = g2p.ensemble_recipes(tmp_path)
    g2p.write_ensemble(tmp_path, recipe, fake_evaluation_record(wer, per))
    records = [read_run(tmp_path, run) for run in G2P.runs(tmp_path)]
    lines = "\n".join(g2p_section(records, tmp_path, "docs/reproduction"))
    assert (
        "The ensemble of g2p-entmax15-ls0.04-seed1, g2p-entmax15-ls0.04-seed2, beam 5: "
        f"{wer:.2f} WER / {per:.2f} PER. Verdict: **{verdict}**" in lines
    )
    assert (
        f"| entmax-1.5 | entmax-1.5 ε=0.04 | {wer:.2f} | {per:.2f} | 0.04 | 13.47 | 2.69 |" in lines
    )


def test_the_results_page_holds_the_g2p_section_and_its_targets(tmp_path):
    run = g2p_run("entmax-1.5", 0.04)
    fake_results(tmp_path, run, 2.8)
    fake_evaluation(tmp_path, run, 14.1, 2.85)
    page = write_report(tmp_path, tmp_path / "results.md")
    assert "| g2p-entmax15-ls0.04-seed1 | 1 | 3 | PER 2.80 |" in page
    assert (
        "| G2P entmax-1.5 (ε by dev) beam-5 test WER, mean of seeds ≤ 14.2 | 14.10 | met |" in page
    )
    assert "| G2P entmax-1.5 (ε by dev) beam-5 test PER, mean of seeds ≤ 2.9 | 2.85 | met |" in page
