"""The confidence plan: which models it measures, its records, their skips, and its section."""

import json

import pytest

from tests import harness
from tfscones.data.symbol_vocab import SymbolTokenizer
from tfscones.reproduction import confidence
from tfscones.reproduction.confidence_report import (
    confidence_section,
    corruption_auroc,
    interval_gap,
    multiref_wins,
    spearman_gain,
)
from tfscones.reproduction.plans import (
    CONFIDENCE,
    MOE,
    PlannedRun,
    confidence_candidates,
    confidence_models,
)
from tfscones.reproduction.records import read_records
from tfscones.reproduction.reproduce import reproduce, run_config
from tfscones.reproduction.run_outputs import RunOutputError
from tfscones.reproduction.targets import targets_table
from tfscones.training import runner

from .test_reproduce import (  # noqa: F401 (fixtures)
    SETTINGS,
    data_dir,
    fake_results,
    recorded_steps,
)

# Each head's Spearman of its best measure, with its interval, in the fake records.
SPEARMAN = {"softmax": (0.50, 0.45, 0.58), "SCONES": (0.60, 0.55, 0.65)}


def correlation(spearman: float, low: float, high: float) -> dict:
    return {
        "pearson": spearman,
        "spearman": spearman,
        "pearson_interval": [low, high],
        "spearman_interval": [low, high],
        "pairs": 12,
    }


def fake_record(test_set: str, head: str, run: str) -> dict:
    best = SPEARMAN.get(head, (0.4, 0.3, 0.5))
    report = {
        "sentences": 12,
        "dropout_passes": 30,
        "mean_chrf": 40.0,
        "correlation": {
            "log_confidence": correlation(*best),
            "normalised": correlation(0.2, 0.1, 0.3),
            "dropout_variance": correlation(None, None, None),  # constant: undefined
        },
        "flagging_auroc": {"log_confidence": 0.8, "normalised": 0.6, "dropout_variance": 0.5},
        "corruption_auroc": {
            name: {
                "other_reference": 0.99,
                "without_a_content_word": None,
                "two_words_swapped": 0.9,
                "all": 0.96,
            }
            for name in ("log_confidence", "normalised", "dropout_variance")
        },
    }
    if test_set == "demo":
        report["multiref_wins"] = 0.85
    return {"test_set": test_set, "head": head, "run": run, "dropout_passes": 30, "report": report}


@pytest.fixture
def measured(monkeypatch):
    calls = []

    def measure_run(config, test_set, head, passes=30):
        calls.append(config.name)
        return fake_record(test_set, head, config.name)

    monkeypatch.setattr(confidence, "measure_run", measure_run)
    return calls


def test_the_demo_softmax_model_is_the_moe_plans_run_with_dropout():
    demo = confidence_candidates("demo")
    assert [run.name for run in demo["SCONES"]] == [
        f"demo-scones-a{alpha}-dropout0.1-6000steps-seed1" for alpha in (0.2, 0.5, 1.0)
    ]
    moe_names = {run.name for run in MOE.fixed_runs}
    assert demo["softmax"][0].name in moe_names
    multi30k = confidence_candidates("multi30k")
    assert [run.name for run in multi30k["softmax"]] == ["multi30k-softmax-seed1"]
    assert len(multi30k["sparsemax"]) == 5  # ε ∈ {0.1, 0} and three variants of ε = 0
    names = [run.name for run in CONFIDENCE.fixed_runs]
    assert len(names) == len(set(names)) == 1 + 3 + 2 + 5 + 6


@pytest.mark.slow  # 40 s: four calls of the plan over 17 fake runs, each checking its config
def test_the_plan_measures_each_chosen_model_once_and_refuses_a_missing_model(
    data_dir,  # noqa: F811 (fixture)
    tmp_path,
    recorded_steps,  # noqa: F811 (fixture)
    measured,
):
    out = tmp_path / "out"
    done = reproduce("confidence", out, data_dir, SETTINGS)
    chosen = {test_set: confidence_models(out, test_set) for test_set in ("multi30k", "demo")}
    # recorded_steps gives α = 1.0 the best Multi30k dev BLEU; the demo's αs tie: the first.
    assert chosen["multi30k"]["SCONES"].name == "multi30k-scones-a1.0-seed1"
    assert chosen["demo"]["SCONES"].name == "demo-scones-a0.2-dropout0.1-6000steps-seed1"
    expected = [run.name for runs in chosen.values() for run in runs.values()]
    assert measured == expected
    assert done[-8:] == [f"measured {name}" for name in expected]
    record = json.loads(confidence.record_file(out, chosen["demo"]["SCONES"]).read_text())
    assert record["report"]["multiref_wins"] == 0.85
    assert reproduce("confidence", out, data_dir, SETTINGS) == []

    # A record gone, and the run's folder holds its results but no model: refused at once.
    softmax = chosen["multi30k"]["softmax"]
    confidence.record_file(out, softmax).unlink()
    with pytest.raises(confidence.MissingModelError, match="multi30k-softmax-seed1.*mv"):
        reproduce("confidence", out, data_dir, SETTINGS)
    (out / softmax.name / "model.keras").write_bytes(b"a model")
    assert reproduce("confidence", out, data_dir, SETTINGS) == [f"measured {softmax.name}"]

    # A damaged record stops the plan, naming it.
    confidence.record_file(out, softmax).write_text('{"test_set": "multi30k"}')
    with pytest.raises(RunOutputError, match=f"{softmax.name}.json.*head"):
        reproduce("confidence", out, data_dir, SETTINGS)


def finish_candidates(out) -> None:
    """Every candidate finished (α = 1.0 best on Multi30k dev), each chosen model measured."""
    for test_set in ("multi30k", "demo"):
        for runs in confidence_candidates(test_set).values():
            for run in runs:
                (out / run.name).mkdir(parents=True, exist_ok=True)
                dev = 31.0 if run.name == "multi30k-scones-a1.0-seed1" else 30.0
                (out / run.name / "results.json").write_text(json.dumps(fake_results(dev)))
        for head, run in confidence_models(out, test_set).items():
            path = confidence.record_file(out, run)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(fake_record(test_set, head, run.name)))


def test_the_section_and_the_targets_read_the_records(tmp_path):
    out = tmp_path / "out"
    finish_candidates(out)
    page = "\n".join(confidence_section(out, "out"))
    assert "tfscones reproduce confidence --data ../shared/data --out out" in page
    assert (
        "| SCONES (multi30k-scones-a1.0-seed1) | confidence (summed log score) "
        "| 0.600 [0.550, 0.650] | 0.600 [0.550, 0.650] | 0.800 | 0.960 |"
    ) in page
    assert "| MC dropout variance (lower better) | undefined | undefined | 0.500 |" in page
    assert "| softmax | 12 | 40.0 | 0.990 | n/a | 0.900 |" in page
    assert "SCONES 85.0%" in page
    # SCONES's best (0.60) against softmax's best (0.50): +0.10; intervals 0.55 against 0.58.
    assert spearman_gain(out, "demo") == pytest.approx(0.10)
    assert interval_gap(out, "multi30k") == pytest.approx(-0.03)
    assert corruption_auroc(out, "multi30k") == 0.96 and multiref_wins(out) == 0.85
    table = "\n".join(targets_table(read_records(out), out))
    assert "SCONES's best measure's Spearman with sentence chrF, minus softmax's best" in table
    assert "| +0.100 | met |" in table and "| -0.030 | missed |" in table
    assert "| 0.960 | met |" in table and "| 85.0% | missed |" in table


@pytest.mark.parametrize(("dropout", "passes"), [(0.0, 0), (0.3, 2)])
def test_a_run_is_measured_on_its_test_set_with_dropout_passes_if_it_has_dropout(
    tmp_path, monkeypatch, dropout, passes
):
    symbols = SymbolTokenizer.build(["ab", "ba"], ["a b", "b a"])
    model = harness.small_model(symbols.vocab_size, dropout=dropout)
    streams = [["a b", "b a", "a"], ["b", "a", "b a"]]
    monkeypatch.setattr(confidence, "load_run", lambda folder: (model, symbols))
    monkeypatch.setattr(
        runner, "scored_test_set", lambda config, count: (["ab", "ba", "a"], streams)
    )
    measured = []

    def confidence_quality(model_, tokenizer, sources, references, multiref, passes):
        measured.append((model_, sources, references, multiref, passes))
        return {"sentences": len(sources)}

    monkeypatch.setattr(confidence, "confidence_quality", confidence_quality)
    run = PlannedRun("demo_sparsemax", 1, "sparsemax", corpus="demo", analysed=False)
    config = run_config(run, tmp_path)
    config.run_dir.mkdir(parents=True)
    for test_set in ("multi30k", "demo"):
        record = confidence.measure_run(config, test_set, "sparsemax", passes=2)
        assert record == {
            "test_set": test_set,
            "head": "sparsemax",
            "run": run.name,
            "dropout_passes": passes,
            "report": {"sentences": 3},
        }
    (multi30k, demo) = measured
    assert multi30k == (model, ["ab", "ba", "a"], streams[0], None, passes)
    sources, references = demo[3]  # the bundled multi-reference dev set, for the demo's models
    assert len(sources) == len(references) == 522 and len(references[0]) == 2
    with pytest.raises(ValueError, match="unknown head 'tanh'"):
        confidence.measure_run(config, "demo", "tanh")
