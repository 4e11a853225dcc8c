"""A multi-reference test set (`data.test_references`): read, checked, and scored as one."""

import json

import pytest

from tfscones.data import ParallelTextError
from tfscones.evaluation.metrics import corpus_bleu, corpus_chrf
from tfscones.training import runner
from tfscones.training.config import ConfigError, load_config
from tfscones.training.splits import scored_test_set

CONFIG = "demo_scones_a0.2"


@pytest.fixture
def second_references(tmp_path, tiny_overrides):
    """A second reference file of the tiny test set: its references, words reversed."""
    del tiny_overrides  # Writes the corpus.
    lines = (tmp_path / "corpus" / "test.en").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "corpus" / "test.2.en"
    path.write_text("".join(" ".join(line.split()[::-1]) + "\n" for line in lines), "utf-8")
    return path


def test_the_test_set_reads_its_target_then_every_further_reference(
    tiny_overrides, second_references, tmp_path
):
    config = load_config(CONFIG, [*tiny_overrides, f"data.test_references=[{second_references}]"])
    sources, streams = scored_test_set(config, limit=5)
    corpus = tmp_path / "corpus"
    assert sources == (corpus / "test.de").read_text(encoding="utf-8").splitlines()[:5]
    assert streams == [
        (corpus / "test.en").read_text(encoding="utf-8").splitlines()[:5],
        second_references.read_text(encoding="utf-8").splitlines()[:5],
    ]
    alone = load_config(CONFIG, tiny_overrides)
    assert scored_test_set(alone, limit=5) == (sources, streams[:1])


def test_a_reference_file_of_another_length_is_named_with_its_line_count(
    tiny_overrides, second_references
):
    second_references.write_text("one line\n", encoding="utf-8")
    config = load_config(CONFIG, [*tiny_overrides, f"data.test_references=[{second_references}]"])
    with pytest.raises(ParallelTextError, match=rf"{second_references.name}.*1"):
        scored_test_set(config)


def test_a_missing_reference_file_is_refused_before_training(tiny_overrides, tmp_path):
    missing = tmp_path / "corpus" / "nowhere.en"
    config = load_config(CONFIG, [*tiny_overrides, f"data.test_references=[{missing}]"])
    with pytest.raises(ConfigError, match=rf"data.test_references: no such file: {missing}"):
        runner.check_config(config)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        (["data.test_references=ref.en"], r"must be list or NoneType \(got 'ref.en'\)"),
        (["data.test_references=[1, 2]"], r"must be a list of file names \(got \[1, 2\]\)"),
        (
            ["data.source=tsv", "data.train_tsv=a.tsv", "data.test_references=[r.en]"],
            "needs a `source: text` test set.*'tsv'",
        ),
        (
            ["training.selection_metric=per", "data.test_references=[r.en]"],
            "WER and PER compare one reference.*'per'",
        ),
    ],
)
def test_further_references_a_test_set_cannot_use_are_refused(tiny_overrides, overrides, problem):
    with pytest.raises(ConfigError, match=f"data.test_references: {problem}"):
        load_config(CONFIG, [*tiny_overrides, *overrides])


@pytest.mark.slow  # 20 s: a tiny training
def test_a_run_scores_its_test_set_against_every_reference(
    tiny_overrides, second_references, tmp_path
):
    overrides = [*tiny_overrides, "training.steps=2", "training.steps_per_epoch=2"]
    config = load_config(CONFIG, [*overrides, f"data.test_references=[{second_references}]"])
    results = runner.train(config)
    hypotheses = (tmp_path / "run" / "test.hyp").read_text(encoding="utf-8").splitlines()
    streams = scored_test_set(config)[1]
    assert results["test_bleu"] == pytest.approx(corpus_bleu(hypotheses, streams).score)
    assert results["test_chrf"] == pytest.approx(corpus_chrf(hypotheses, streams).score)
    assert json.loads((tmp_path / "run" / "results.json").read_text()) == results
