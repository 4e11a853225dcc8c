"""The synthetic plan (Stahlberg & Kumar 2022, §5): its runs, its corpora, its report section."""

import dataclasses
import itertools
import json

import pytest

from tfscones.commands import reproduce as reproduce_command
from tfscones.data.demo import demo_file
from tfscones.evaluation.analysis import (
    BeamPoint,
    ExactSearchStatistics,
    ForcedStatistics,
    ModelAnalysis,
)
from tfscones.evaluation.model_errors import ScoreSummary
from tfscones.reproduction import synthetic
from tfscones.reproduction.plans import (
    PLANS,
    SYNTHETIC,
    SYNTHETIC_CONFIGS,
    SYNTHETIC_TEMPERATURES,
    AnalysisSettings,
    Plan,
    synthetic_run,
)
from tfscones.reproduction.report import write_report
from tfscones.reproduction.reproduce import reproduce, run_config

from .tiny_corpus import TINY

SOFTMAX, LOW_ALPHA, HIGH_ALPHA = SYNTHETIC_CONFIGS


def test_the_plan_trains_each_head_at_each_temperature_on_its_own_corpus(tmp_path):
    names = [run.name for run in SYNTHETIC.runs(tmp_path)]
    assert len(names) == len(set(names)) == 3 * len(SYNTHETIC_TEMPERATURES) + 3
    assert names[:3] == [
        "synthetic-softmax-gamma0.1-seed1",
        "synthetic-scones-a0.2-gamma0.1-seed1",
        "synthetic-scones-a1.0-gamma0.1-seed1",
    ]
    assert "synthetic-scones-a0.2-gamma0.5-seed2" in names
    config = run_config(synthetic_run(HIGH_ALPHA, 0.7), tmp_path)
    assert config.data.train_source == str(tmp_path / "synthetic" / "gamma-0.7" / "train.src")
    assert config.data.test_target == str(tmp_path / "synthetic" / "gamma-0.7" / "test.tgt")
    further = [str(tmp_path / "synthetic" / "gamma-0.7" / f"test.{k}.tgt") for k in range(2, 9)]
    assert config.data.test_references == further
    assert config.loss.alpha == 1.0 and config.model.head == "sigmoid"
    assert SYNTHETIC.analysis == AnalysisSettings(beam_sizes=(4,), exact_sentences=200)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["synthetic"], SYNTHETIC.analysis),
        (
            ["synthetic", "--exact-sentences", "7"],
            dataclasses.replace(SYNTHETIC.analysis, exact_sentences=7),
        ),
        (["scones"], AnalysisSettings()),
        (["scones", "--beam-sizes", "8", "2", "2"], AnalysisSettings(beam_sizes=(2, 8))),
    ],
)
def test_the_command_line_replaces_only_the_analysis_settings_it_gives(argv, expected):
    arguments = reproduce_command.parse_arguments(argv)
    assert reproduce_command.analysis_settings(arguments) == expected


@pytest.fixture
def tiny_plan(tmp_path, monkeypatch):
    """The plan cut to two runs at two temperatures, its corpus to 300 bundled pairs."""
    corpus = {}
    for split, count in (("train", 300), ("dev", 8), ("test", 8)):
        paths = []
        for language in ("de", "en"):
            path = tmp_path / f"{split}.{language}"
            with demo_file(split, language).open(encoding="utf-8") as lines:
                path.write_text("".join(itertools.islice(lines, count)), encoding="utf-8")
            paths.append(str(path))
        corpus[split] = tuple(paths)
    monkeypatch.setattr(synthetic, "CORPUS", corpus)
    plan = Plan(
        name="synthetic",
        title=SYNTHETIC.title,
        fixed_runs=(synthetic_run(SOFTMAX, 0.1), synthetic_run(LOW_ALPHA, 1.0)),
        analysis=AnalysisSettings(beam_sizes=(4,), exact_sentences=2, state_budget=30),
    )
    monkeypatch.setitem(PLANS, "synthetic", plan)
    return plan


@pytest.mark.slow  # 60 s: IBM-3 on 300 pairs, two tiny trainings, their analyses, then again
def test_the_plan_samples_trains_analyses_skips_and_samples_again_what_is_gone(tiny_plan, tmp_path):
    out = tmp_path / "out"
    names = [run.name for run in tiny_plan.fixed_runs]
    done = reproduce("synthetic", out, overrides=TINY)
    assert done == [
        "sampled synthetic corpora γ=0.1, 1",
        *(f"{step} {name}" for name in names for step in ("trained", "evaluated", "analysed")),
    ]
    references = out / "synthetic" / "gamma-1.0" / "test.tgt"
    sampled = references.read_text(encoding="utf-8")
    assert len(sampled.splitlines()) == 8
    last = (out / "synthetic" / "gamma-1.0" / "test.8.tgt").read_text(encoding="utf-8")
    assert len(last.splitlines()) == 8 and last != sampled
    analysis = json.loads((out / names[1] / "analysis.json").read_text())
    assert analysis["settings"] == {"beam_sizes": [4], "exact_sentences": 2, "state_budget": 30}
    assert analysis["analysis"]["exact"]["sentences"] == 2
    assert analysis["analysis"]["references"] == 8
    evaluation = json.loads((out / names[1] / "evaluation.json").read_text())
    assert evaluation["bleu_signature"].startswith("nrefs:8|")
    corpora = json.loads((out / "synthetic" / "corpora.json").read_text())
    assert 0 <= corpora["temperatures"]["1.0"]["sample_bleu"] <= 100
    assert reproduce("synthetic", out, overrides=TINY) == []

    # A run scored against one reference, as the plan did before: evaluated and analysed again.
    evaluation_file = out / names[1] / "evaluation.json"
    evaluation_file.write_text(
        json.dumps(
            {
                **evaluation,
                "bleu_signature": evaluation["bleu_signature"].replace("nrefs:8", "nrefs:1"),
            }
        )
    )
    del analysis["analysis"]["references"]
    (out / names[1] / "analysis.json").write_text(json.dumps(analysis))
    assert reproduce("synthetic", out, overrides=TINY) == [
        f"evaluated {names[1]}",
        f"analysed {names[1]}",
    ]
    assert json.loads(evaluation_file.read_text())["bleu_signature"].startswith("nrefs:8|")

    references.unlink()  # the corpora are not committed: a fresh clone has none
    (out / names[1] / "analysis.json").unlink()
    assert reproduce("synthetic", out, overrides=TINY) == [
        "sampled synthetic corpora γ=0.1, 1",
        f"analysed {names[1]}",
    ]
    assert references.read_text(encoding="utf-8") == sampled  # the same seed, the same samples

    page = write_report(out, tmp_path / "results.md")
    beam4 = json.loads((out / names[0] / "evaluation.json").read_text())["beam4"]["bleu"]
    section = synthetic_part(page)
    assert f"| softmax | {beam4:.1f} | not run yet |" in section
    assert "against 8 sampled references of each test source" in section
    sample = corpora["temperatures"]["0.1"]["sample_bleu"]
    assert f"| an IBM-3 sample | {sample:.1f} | not run yet |" in section
    assert "| 1 | " in section.split("### Fig. 8")[0]  # the corpora table's γ = 1 row


def fake_analysis(beam_bleu: float, exact_bleu: float, incomplete: float) -> dict:
    curve = [BeamPoint(4, beam_bleu, 0.97, -4.5, 20.0, 0.1)]
    exact = ExactSearchStatistics(
        sentences=50,
        state_budget=1_000_000,
        bleu=exact_bleu,
        length_ratio=0.8,
        beam_bleu=beam_bleu,
        beam_length_ratio=0.97,
        incomplete_fraction=incomplete,
        improved_fraction=0.3,
        empty_fraction=0.02,
        seconds=100.0,
        states=[10, 20],
        exact_scores=[-3.0, -4.0],
        empty_scores=[-6.0, -7.0],
    )
    forced = ForcedStatistics(0.05, 0.6, 8000.0, [0.5], [0.45], [10])
    result = ModelAnalysis(
        1000, "head", curve, exact, 0.0, ScoreSummary(-6.5, 0.5, 2, 1), forced, 9.0, 8
    )
    return {
        "settings": {"beam_sizes": [4], "exact_sentences": 50, "state_budget": 10**6},
        "analysis": dataclasses.asdict(result),
    }


def write_synthetic_run(out, run, beam_bleu: float, exact_bleu: float) -> None:
    folder = out / run.name
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("training: {steps_per_epoch: 500}\n")
    results = {"steps": 4000, "best_dev_bleu": beam_bleu, "train_minutes": 9.0}
    (folder / "results.json").write_text(json.dumps(results))
    (folder / "history.csv").write_text("epoch,loss,val_bleu\n0,4.0,20.0\n")
    scores = {"greedy": {"bleu": beam_bleu, "chrf": 50.0}, "beam4": {"bleu": beam_bleu, "chrf": 50}}
    (folder / "evaluation.json").write_text(json.dumps(scores))
    incomplete = 0.25 if run.config.endswith("a0.2") and run.temperature >= 0.5 else 0.0
    analysis = fake_analysis(beam_bleu, exact_bleu, incomplete)
    (folder / "analysis.json").write_text(json.dumps(analysis))


def write_synthetic_outputs(out, exact_fall: dict[str, float]) -> None:
    """Every run: beam-4 BLEU 40 - 20γ for every head (seed 2 +0.5); exact-search BLEU
    falling from 38 by `exact_fall[head]` × γ (γ = 1: the whole fall)."""
    for run in SYNTHETIC.runs(out):
        head = next(head for head, config in SYNTHETIC_CONFIGS.items() if config == run.config)
        beam = 40 - 20 * run.temperature + (0.5 if run.seed == 2 else 0.0)
        exact = 38 - exact_fall[head] * run.temperature + (0.5 if run.seed == 2 else 0.0)
        write_synthetic_run(out, run, beam, exact)
    statistics = {"mean_length": 7.5, "types": 900}
    entropies = {"t_entropy": 1.0, "n_entropy": 0.5, "d_entropy": 2.0, "sample_bleu": 31.25}
    record = {
        "settings": synthetic.corpora_settings(SYNTHETIC_TEMPERATURES),
        "estimation_seconds": 42.0,
        "model": {"source_vocabulary": 5000, "target_vocabulary": 4000, "t_entries": 9, "p1": 0.1},
        "original_targets": statistics,
        "temperatures": {str(g): {**statistics, **entropies} for g in SYNTHETIC_TEMPERATURES},
    }
    (out / "synthetic").mkdir()
    (out / "synthetic" / "corpora.json").write_text(json.dumps(record))


def synthetic_part(page: str) -> str:
    """The page's synthetic section, up to the next section."""
    start = page.index("## Stahlberg & Kumar (2022), §5")
    return page[start : page.index("\n## ", start + 1)]


def claims(page: str) -> list[str]:
    section = synthetic_part(page)
    return [line for line in section.splitlines() if line.startswith("- **")]


def test_the_section_lays_out_figs_8_and_9_and_table_7_and_judges_the_claims(tmp_path):
    out = tmp_path / "reproduction"
    write_synthetic_outputs(out, {SOFTMAX: 20.0, LOW_ALPHA: 4.0, HIGH_ALPHA: 18.0})
    page = write_report(out, tmp_path / "results.md")
    section = synthetic_part(page)
    assert "tfscones reproduce synthetic --out" in section and "--data" not in section
    assert "| 0.5 | 7.50 | 900 | 1.000 | 0.500 | 2.000 |" in section
    assert "the test sources 8 targets each" in section
    assert "BLEU (sacrebleu) against 8 sampled references of each test source." in section
    assert "| an IBM-3 sample | 31.2 | 31.2 | 31.2 | 31.2 | 31.2 | 31.2 |" in section
    # Fig. 8 at γ = 0.5: 30 and 30.5 for the two seeds.
    assert "| softmax | 38.0 | 36.0 | 34.0 | 30.2 | 26.0 | 20.0 |" in section
    # Fig. 9: SCONES α=0.2 exact 38 - 4γ minus softmax beam-4 40 - 20γ (seed means at 0.5).
    assert "| SCONES α=0.2 | -0.4 | 1.2 | 2.8 | 6.0 | 9.2 | 14.0 |" in section
    assert "| 0.5 | SCONES α=0.2 | 25.0% | 25.00% | 2.0% |" in section
    assert "| 1 | softmax | 0.0% | not in the paper | 2.0% |" in section
    alike, falls, exact = claims(page)
    assert alike.endswith("**agrees**.") and "widest gap between the heads is 0.0 BLEU" in alike
    assert falls.endswith("**agrees**.") and "softmax 38.0 → 20.0" in falls
    # Mean relative BLEU over γ 0.5, 0.7, 1 (mean γ 11/15): -2 + (20 - fall) · 11/15, so
    # softmax -2.0, α=0.2 9.7, α=1 -0.5; α=0.2 above the higher by 10.3.
    assert "softmax -2.0, SCONES α=0.2 9.7, SCONES α=1.0 -0.5" in exact
    assert exact.endswith("**agrees**.") and "higher of softmax and α = 1 by 10.3" in exact
    assert (tmp_path / "figures" / "synthetic_exact.png").is_file()


def test_an_exact_search_that_degrades_alike_for_every_head_disagrees(tmp_path):
    out = tmp_path / "reproduction"
    write_synthetic_outputs(out, {SOFTMAX: 10.0, LOW_ALPHA: 12.0, HIGH_ALPHA: 10.0})
    exact = claims(write_report(out, tmp_path / "results.md"))[2]
    # -2 + (20 - fall) · 11/15: softmax and α=1 5.3, α=0.2 3.9.
    assert exact.endswith("**disagrees**.") and "higher of softmax and α = 1 by -1.5" in exact
