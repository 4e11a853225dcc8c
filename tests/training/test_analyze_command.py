import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tfscones.commands import analyze
from tfscones.data import Tokenizer
from tfscones.decoding import Search, source_ids_for_model, translate, translate_nbest
from tfscones.evaluation import model_errors
from tfscones.evaluation.metrics import corpus_bleu
from tfscones.models import load_model
from tfscones.training import runner
from tfscones.training.config import CONFIG_DIR as CONFIGS
from tfscones.training.config import load_config

BUDGET = 40
BEAM4 = Search("beam", beam_size=4)


@pytest.fixture
def tiny_run(tiny_overrides, tmp_path):
    config = load_config(
        CONFIGS / "demo_scones_a0.2.yaml",
        [*tiny_overrides, "training.steps=3", "training.steps_per_epoch=3"],
    )
    runner.train(config)
    return tmp_path / "run"


def test_analyze_writes_a_consistent_report(tiny_run, tmp_path):
    corpus = tmp_path / "corpus"
    out = tmp_path / "report"
    analyze.main(
        ["--runs", str(tiny_run), "--source", str(corpus / "test.de")]
        + ["--reference", str(corpus / "test.en"), "--limit", "6", "--exact-sentences", "3"]
        + ["--state-budget", str(BUDGET), "--beams", "1", "2", "--out", str(out)]
    )

    report = json.loads((out / "report.json").read_text())["run"]
    assert [point["beam_size"] for point in report["beam_curve"]] == [1, 2, 4]
    sources = (corpus / "test.de").read_text(encoding="utf-8").splitlines()[:6]
    references = (corpus / "test.en").read_text(encoding="utf-8").splitlines()[:6]
    model = load_model(tiny_run / "model.keras")
    tokenizer = Tokenizer.from_file(tiny_run / "spm.model")
    greedy = translate(model, tokenizer, sources)
    assert report["beam_curve"][0]["bleu"] == pytest.approx(corpus_bleu(greedy, references).score)

    exact = report["exact"]
    assert exact["sentences"] == 3 and exact["state_budget"] == BUDGET
    assert all(1 <= states <= BUDGET for states in exact["states"])
    beam4 = translate(model, tokenizer, sources[:3], search=BEAM4)
    assert exact["beam_bleu"] == pytest.approx(corpus_bleu(beam4, references[:3]).score)
    source_ids = source_ids_for_model(tokenizer, tf.constant(sources), 32)
    empty = model_errors.empty_translation_scores(model, source_ids)
    np.testing.assert_allclose(exact["empty_scores"], empty[:3], rtol=1e-4)
    beam4_scores = [row[0][1] for row in translate_nbest(model, tokenizer, sources, search=BEAM4)]
    expected_rate = model_errors.empty_string_rate(empty, np.array(beam4_scores))
    assert report["empty_string_rate"] == pytest.approx(expected_rate)
    for point in report["beam_curve"]:
        assert 0.0 <= point["search_error_rate"] <= 1.0
    assert 0.0 <= report["forced"]["expected_calibration_error"] <= 1.0
    assert report["forced"]["mean_support_size"] == model.vocabulary_size

    table = (out / "report.md").read_text(encoding="utf-8")
    assert "| run |" in table and "## Exact search" in table
    for plot in ("bleu_vs_beam", "length_ratio_vs_beam", "search_errors_vs_beam", "reliability"):
        assert (out / f"{plot}.png").stat().st_size > 0
    assert (out / "exact_vs_empty.png").exists() and (out / "exact_states.png").exists()

    assert report["references"] == 1

    beam_4_only = tmp_path / "beam-4-only"
    reversed_references = write_reversed(corpus / "test.en", tmp_path / "reversed.en")
    analyze.main(
        ["--runs", str(tiny_run), "--source", str(corpus / "test.de"), "--reference"]
        + [str(corpus / "test.en"), str(reversed_references), "--limit", "3"]
        + ["--exact-sentences", "0", "--beams", "4", "--out", str(beam_4_only)]
    )
    summary = (beam_4_only / "report.md").read_text(encoding="utf-8").split("## BLEU")[0]
    assert "| run | - |" in summary  # No greedy BLEU without beam 1.
    two_references = json.loads((beam_4_only / "report.json").read_text())["run"]
    assert two_references["exact"] is None and two_references["references"] == 2
    streams = [references[:3], reversed_references.read_text(encoding="utf-8").splitlines()[:3]]
    expected = corpus_bleu(beam4, streams).score
    assert two_references["beam_curve"][0]["bleu"] == pytest.approx(expected)


def write_reversed(path, out):
    """A second reference file: each line's words in reverse order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out.write_text("".join(" ".join(line.split()[::-1]) + "\n" for line in lines), "utf-8")
    return out


def test_a_reference_file_of_another_length_stops_analyze_before_any_model_loads(tmp_path):
    source, short = tmp_path / "test.de", tmp_path / "short.en"
    source.write_text("a\nb\n", encoding="utf-8")
    short.write_text("a\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"analyze: error: .*short.en.*1"):
        analyze.main(
            ["--runs", str(tmp_path / "no-run"), "--source", str(source)]
            + ["--reference", str(source), str(short), "--out", str(tmp_path / "out")]
        )
    assert not (tmp_path / "out").exists()


def test_analyze_names_a_bad_test_set(tmp_path, capsys):
    source, reference = tmp_path / "a.de", tmp_path / "a.en"
    source.write_text("eins\nzwei\n", encoding="utf-8")
    reference.write_text("one\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="a.de"):
        analyze.main(
            ["--runs", str(tmp_path), "--source", str(source), "--reference", str(reference)]
        )


def test_runs_of_one_name_in_two_folders_get_a_row_each(tiny_run, tmp_path):
    corpus, out = tmp_path / "corpus", tmp_path / "report"
    runs = [tmp_path / "runs" / "base", tmp_path / "runs2" / "base", tmp_path / "runs" / "other"]
    for run in runs:
        shutil.copytree(tiny_run, run)
    analyze.main(
        ["--runs", *map(str, runs), "--source", str(corpus / "test.de")]
        + ["--reference", str(corpus / "test.en"), "--limit", "2", "--exact-sentences", "0"]
        + ["--beams", "1", "--out", str(out)]
    )

    report = json.loads((out / "report.json").read_text())
    assert list(report) == ["runs/base", "runs2/base", "other"]
    assert "| runs2/base |" in (out / "report.md").read_text(encoding="utf-8")
