"""Damaged run outputs: `report` and `reproduce` name the file and the field, in one line.

Each case writes one damaged file into a reproduction folder that is otherwise whole (the
fixtures of `test_report` and `test_g2p_plan`) and expects the one error that names it, from
the commands (`report error: ...`, `reproduce error: ...`) and from the library. A verdict is
never drawn from a number that is not finite.
"""

import json
import math
import re

import pytest

from tfscones.commands import report as report_command
from tfscones.commands import reproduce as reproduce_command
from tfscones.reproduction import reproduce as reproduction
from tfscones.reproduction import verdicts
from tfscones.reproduction.plans import G2P_SEEDS, g2p_recipe_runs, g2p_run
from tfscones.reproduction.report import write_report
from tfscones.reproduction.reproduce import reproduce

from .test_g2p_plan import TINY_G2P, WORDS, fake_evaluation, fake_results
from .test_report import write_results_dir
from .tiny_corpus import TINY, write_data_dir

RUN = "multi30k-softmax-seed1"
RESULTS = {"steps": 3200, "best_dev_bleu": 38.0, "train_minutes": 64.0, "test_bleu": 37.0}
SCORES = {"bleu": 37.0, "chrf": 60.0}
GARBAGE = "\x00\x01 this is no JSON"
# (file, what is wrong, its content, the error after "FILE: ")
DAMAGE = [
    (f"{RUN}/results.json", "garbage", GARBAGE, "not JSON (line 1 column 1: expecting value)"),
    (f"{RUN}/results.json", "empty", "", "empty file"),
    (f"{RUN}/results.json", "a list", "[]", "expected an object, got a list"),
    (f"{RUN}/results.json", "cut short", '{"steps": 3200, "best_d', "not JSON (line 1 column"),
    (
        f"{RUN}/results.json",
        "not UTF-8",
        b'{"steps": "\xff"}',
        "not UTF-8: bytes b'\\xff' at byte offset 11",
    ),
    (
        f"{RUN}/results.json",
        "a field missing",
        json.dumps({"steps": 3200, "best_dev_bleu": 38.0}),
        'field "train_minutes": missing',
    ),
    (
        f"{RUN}/results.json",
        "no dev score",
        json.dumps({"steps": 3200, "train_minutes": 64.0}),
        "missing: one of best_dev_bleu, best_dev_chrf, best_dev_per, best_dev_wer",
    ),
    (
        f"{RUN}/results.json",
        "a NaN BLEU",
        json.dumps(RESULTS | {"test_bleu": math.nan}),
        'field "test_bleu": expected a finite number, got NaN',
    ),
    (
        f"{RUN}/results.json",
        "a word for a number",
        json.dumps(RESULTS | {"steps": "many"}),
        'field "steps": expected a whole number in [0, inf), got "many"',
    ),
    (
        f"{RUN}/results.json",
        "no minutes",
        json.dumps(RESULTS | {"train_minutes": 0}),
        'field "train_minutes": expected a finite number in (0, inf), got 0',
    ),
    (f"{RUN}/evaluation.json", "garbage", "{greedy}", "not JSON (line 1 column 2"),
    (f"{RUN}/evaluation.json", "a list", "[]", "expected an object, got a list"),
    (
        f"{RUN}/evaluation.json",
        "a search missing",
        json.dumps({"greedy": SCORES}),
        'field "beam4": missing',
    ),
    (
        f"{RUN}/evaluation.json",
        "a BLEU of text",
        json.dumps({"greedy": SCORES | {"bleu": "nan"}, "beam4": SCORES}),
        'field "greedy.bleu": expected a finite number, got "nan"',
    ),
    (f"{RUN}/analysis.json", "garbage", "{", "not JSON (line 1 column 2"),
    (f"{RUN}/analysis.json", "a list", "[]", "expected an object, got a list"),
    (
        f"{RUN}/analysis.json",
        "settings only",
        json.dumps({"settings": {"beam_sizes": [4], "exact_sentences": None, "state_budget": 9}}),
        'field "analysis": missing',
    ),
    (f"{RUN}/history.csv", "empty", "", "empty file"),
    (f"{RUN}/history.csv", "no epochs", "loss\n4.0\n", 'no "epoch" column'),
    (
        f"{RUN}/history.csv",
        "two headers",
        "epoch,loss,val_bleu\n0,4.0,20.0\nepoch,loss,val_bleu\n1,3.0,21.0\n",
        'line 3: field "epoch": expected a number, got "epoch"',
    ),
    (
        f"{RUN}/history.csv",
        "a row too long",
        "epoch,loss\n0,4.0,20.0\n",
        "line 2: 3 cells, the header names 2",
    ),
    (
        f"{RUN}/config.yaml",
        "garbage",
        "training: [",
        "not YAML (line 1 column 12: expected the node content",
    ),
    (f"{RUN}/config.yaml", "empty", "", "empty file"),
    (f"{RUN}/config.yaml", "a list", "[]", "expected an object, got a list"),
    (
        f"{RUN}/config.yaml",
        "no steps per epoch",
        "training: {steps_per_epoch: 0}",
        'field "training.steps_per_epoch": expected a whole number in [1, inf), got 0',
    ),
    ("moe/diversity.json", "garbage", GARBAGE, "not JSON (line 1 column 1"),
    ("moe/diversity.json", "a list", "[]", "expected an object, got a list"),
    (
        "moe/diversity.json",
        "methods missing",
        '{"runs": [], "sentences": 5}',
        'field "methods": missing',
    ),
    ("moe/experts.json", "empty", "", "empty file"),
    ("moe/experts.json", "a list", "[]", "expected an object, got a list"),
    (
        "moe/experts.json",
        "a NaN share",
        json.dumps(
            {
                "bleu": [29.0],
                "baseline_greedy_bleu": 32.0,
                "wins": {"shares": [math.nan], "pairs": 10, "left_out": 0},
            }
        ),
        'field "wins.shares[0]": expected a finite number in [0, 1], got NaN',
    ),
]
DAMAGE_IDS = [f"{path.split('/')[-1]}: {what}" for path, what, _, _ in DAMAGE]


def damage(folder, path: str, content: str | bytes):
    target = folder / path
    target.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return target


def expected_error(target, problem: str) -> str:
    return re.escape(f"{target}: {problem}")


@pytest.fixture
def out(tmp_path):
    return write_results_dir(tmp_path / "reproduction")


@pytest.mark.parametrize(("path", "what", "content", "problem"), DAMAGE, ids=DAMAGE_IDS)
def test_report_names_the_damaged_file_and_field_in_one_line(
    out, tmp_path, path, what, content, problem
):
    target = damage(out, path, content)
    page = tmp_path / "page" / "results.md"
    with pytest.raises(SystemExit) as stop:
        report_command.main([str(out), "--out", str(page)])
    assert re.fullmatch("report error: " + expected_error(target, problem) + ".*", stop.value.code)
    assert "\n" not in stop.value.code
    assert not page.parent.exists()  # nothing written before the damage was found


@pytest.fixture
def g2p_out(tmp_path):
    """Every entmax-1.5 G2P run evaluated, ε = 0.04 chosen on dev, and both its seeds."""
    for run, setting in g2p_recipe_runs("entmax-1.5").items():
        fake_results(tmp_path, run, 2.8 if setting == 0.04 else 3.0)
        fake_evaluation(tmp_path, run, 14.0, 2.8)
    second = g2p_run("entmax-1.5", 0.04, seed=G2P_SEEDS[1])
    fake_results(tmp_path, second, 2.9)
    fake_evaluation(tmp_path, second, 14.2, 2.9)
    return tmp_path


G2P_RUN = "g2p-entmax15-ls0.04-seed1"
ENSEMBLE = "g2p/ensemble-g2p-entmax15-ls0.04.json"
G2P_RATES = {"wer": 14.0, "per": 2.8, "by_language": {}}
G2P_DAMAGE = [
    (
        f"{G2P_RUN}/evaluation.json",
        "a NaN WER",
        json.dumps({"words": 8, "greedy": G2P_RATES, "beam5": G2P_RATES | {"wer": math.nan}}),
        'field "beam5.wer": expected a finite number in [0, inf), got NaN',
    ),
    (
        f"{G2P_RUN}/evaluation.json",
        "the BLEU kind",
        json.dumps({"greedy": SCORES, "beam4": SCORES}),
        'field "words": missing',
    ),
    (ENSEMBLE, "garbage", GARBAGE, "not JSON (line 1 column 1"),
    (ENSEMBLE, "a list", "[]", "expected an object, got a list"),
    (
        ENSEMBLE,
        "a search missing",
        json.dumps({"loss": "entmax-1.5", "runs": [], "words": 8, "greedy": G2P_RATES}),
        'field "beam5": missing',
    ),
]


@pytest.mark.parametrize(
    ("path", "what", "content", "problem"),
    G2P_DAMAGE,
    ids=[f"{path.split('/')[-1]}: {what}" for path, what, _, _ in G2P_DAMAGE],
)
def test_report_names_a_damaged_g2p_output(g2p_out, tmp_path, path, what, content, problem):
    (g2p_out / "g2p").mkdir(exist_ok=True)
    target = damage(g2p_out, path, content)
    with pytest.raises(ValueError, match=expected_error(target, problem)):
        write_report(g2p_out, tmp_path / "page" / "results.md")


@pytest.fixture
def data_dir(tmp_path):
    return str(write_data_dir(tmp_path / "data"))


@pytest.fixture
def no_steps(monkeypatch):
    """Fails a test in which `reproduce` would train, evaluate or analyse anything."""

    def refuse(config, settings, progress):
        raise AssertionError(f"a step of {config.name} ran")

    for step in ("_train", "_evaluate", "_analyse"):
        monkeypatch.setattr(reproduction, step, refuse)


REPRODUCE_DAMAGE = [
    ("scones", f"{RUN}/results.json", GARBAGE, "not JSON (line 1 column 1"),
    ("scones", "multi30k-scones-a0.2-seed1/results.json", "[]", "expected an object, got a list"),
    ("scones", f"{RUN}/evaluation.json", "", "empty file"),
    (
        "scones",
        f"{RUN}/analysis.json",
        '{"settings": 1}',
        'field "settings": expected an object, got 1',
    ),
    ("entmax", f"{RUN}/history.csv", "epoch\nnone\n", 'line 2: field "epoch": expected a number'),
    ("moe", "moe/diversity.json", "[]", "expected an object, got a list"),
]


@pytest.mark.parametrize(
    ("paper", "path", "content", "problem"),
    REPRODUCE_DAMAGE,
    ids=[f"{paper} {path}" for paper, path, _, _ in REPRODUCE_DAMAGE],
)
def test_reproduce_refuses_a_damaged_output_before_any_step(
    out, data_dir, no_steps, paper, path, content, problem
):
    target = damage(out, path, content)
    with pytest.raises(ValueError, match=expected_error(target, problem)):
        reproduce(paper, out, data_dir, overrides=TINY)


def test_reproduce_refuses_a_damaged_demo_table(out, no_steps):
    (out / "demo").mkdir()
    target = damage(out, "demo/expected_bleu.json", '{"demo_softmax": [{"steps": 1000}]}')
    with pytest.raises(ValueError, match=expected_error(target, 'field "demo_softmax[0].greedy')):
        reproduce("demo", out)


def test_reproduce_refuses_a_damaged_g2p_ensemble(g2p_out, no_steps, tmp_path):
    data = tmp_path / "data" / "sigmorphon2020-g2p"
    data.mkdir(parents=True)
    for language, words in WORDS.items():
        for split in ("train", "dev", "test"):
            text = "".join(f"{word}\t{phones}\n" for word, phones in words)
            (data / f"{language}_{split}.tsv").write_text(text, encoding="utf-8")
    (g2p_out / "g2p").mkdir()
    target = damage(g2p_out, ENSEMBLE, "[]")
    runs = [run.name for run in g2p_recipe_runs("entmax-1.5")]
    with pytest.raises(ValueError, match=expected_error(target, "expected an object, got a list")):
        reproduce("g2p", g2p_out, str(data), overrides=TINY_G2P, only=runs)


def test_the_reproduce_command_says_which_file_in_one_line(out, data_dir, no_steps):
    target = damage(out, f"{RUN}/results.json", "[]")
    with pytest.raises(SystemExit) as stop:
        reproduce_command.main(["scones", "--data", data_dir, "--out", str(out), *TINY])
    assert stop.value.code.startswith(f"reproduce error: {target}: expected an object, got a list")
    assert "\n" not in stop.value.code


@pytest.mark.parametrize(
    ("judge", "reason"),
    [
        (lambda: verdicts.bleu_verdict(math.nan, 0.5), "the difference is nan"),
        (lambda: verdicts.bleu_verdict(1.0, math.inf), "the spread is inf"),
        (lambda: verdicts.at_least_verdict(math.nan, 0.5), "the difference is nan"),
        (lambda: verdicts.rate_verdict(math.nan, 0.2, 100), "the rate is nan"),
        (lambda: verdicts.condition_verdict(True, {"share": -math.inf}), "the share is -inf"),
    ],
    ids=["bleu", "spread", "at least", "rate", "condition"],
)
def test_no_verdict_is_drawn_from_a_number_that_is_not_finite(judge, reason):
    assert judge() == f"not judged ({reason})"


def test_a_claim_on_a_nan_analysis_rate_is_not_judged(out, tmp_path):
    path = out / RUN / "analysis.json"
    analysis = json.loads(path.read_text())
    analysis["analysis"]["empty_string_rate"] = math.nan
    path.write_text(json.dumps(analysis))
    page = write_report(out, tmp_path / "results.md")
    claim = next(line for line in page.splitlines() if "rarely outscores the beam" in line)
    assert claim.endswith("Verdict: **not judged (the compared rate is nan)**.")


def test_the_history_of_a_run_still_training_is_not_read(out, tmp_path):
    folder = out / "multi30k-scones-a0.2-seed1"
    (folder / "results.json").unlink()
    (folder / "history.csv").write_text("epoch,loss,val_bleu\n0,4.0,20.0\n1,3.")  # mid-write
    page = write_report(out, tmp_path / "results.md")
    assert "| multi30k-scones-a0.2-seed1 | 1 | not run yet |" in page


@pytest.mark.parametrize("command", ["reproduce", "report"])
def test_a_damaged_synthetic_corpora_record_is_named_before_any_step(out, no_steps, command):
    (out / "synthetic").mkdir()
    target = damage(out, "synthetic/corpora.json", '{"settings": {}, "estimation_seconds": -1}')
    with pytest.raises(ValueError, match=expected_error(target, 'field "estimation_seconds"')):
        if command == "reproduce":
            reproduce("synthetic", out)
        else:
            write_report(out, out.parent / "page" / "results.md")
    assert not (out / "synthetic" / "ibm3").exists()
