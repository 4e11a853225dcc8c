"""`tfscones translate --confidence` and `tfscones score`: the library's confidences, as lines."""

import math

import pytest

from tfscones.commands import score, translate
from tfscones.data import Tokenizer
from tfscones.decoding import score_with_confidence, translate_with_confidence
from tfscones.models import load_model
from tfscones.training import runner
from tfscones.training.config import load_config


@pytest.fixture
def tiny_run(tiny_overrides, tmp_path):
    config = load_config(
        "demo_scones_a0.2", [*tiny_overrides, "training.steps=3", "training.steps_per_epoch=3"]
    )
    runner.train(config)
    return tmp_path / "run"


def lines_of(path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_translate_and_score_print_the_librarys_confidences(tiny_run, tmp_path):
    sources = lines_of(tmp_path / "corpus" / "test.de")[:5]
    source = tmp_path / "in.de"
    source.write_text("".join(line + "\n" for line in sources), encoding="utf-8")
    translated = tmp_path / "out.tsv"
    translate.main(
        ["--run", str(tiny_run), "--input", str(source), "--output", str(translated)]
        + ["--token-confidence"]
    )
    model = load_model(tiny_run / "model.keras")
    tokenizer = Tokenizer.from_file(tiny_run / "spm.model")
    expected = translate_with_confidence(model, tokenizer, sources)
    rows = [line.split("\t") for line in lines_of(translated)]
    assert [row[0] for row in rows] == [text for text, _ in expected]
    for (_, confidence, tokens), (_, wanted) in zip(rows, expected, strict=True):
        assert float(confidence) == pytest.approx(wanted.sentence, rel=1e-5)
        values = [float(pair.rsplit(":", 1)[1]) for pair in tokens.split(" ")]
        assert math.prod(values) == pytest.approx(wanted.sentence, rel=1e-3)
        pairs = [pair.rsplit(":", 1)[0] for pair in tokens.split(" ")]
        assert pairs == list(wanted.pieces) and all(pairs)  # pieces as spelt: `▁the`

    targets = tmp_path / "out.en"
    targets.write_text("".join(row[0] + "\n" for row in rows), encoding="utf-8")
    scored = tmp_path / "scores.txt"
    score.main(
        ["--run", str(tiny_run), "--source", str(source), "--target", str(targets)]
        + ["--output", str(scored)]
    )
    wanted = score_with_confidence(model, tokenizer, sources, [row[0] for row in rows])
    assert [float(line) for line in lines_of(scored)] == pytest.approx(
        [confidence.sentence for confidence in wanted], rel=1e-5
    )


def test_score_refuses_files_of_different_lengths_naming_both(tiny_run, tmp_path):
    source, target = tmp_path / "a.de", tmp_path / "b.en"
    source.write_text("eins\nzwei\n", encoding="utf-8")
    target.write_text("one\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"score: error: .*a.de has 2 lines but .*b.en has 1"):
        score.main(["--run", str(tiny_run), "--source", str(source), "--target", str(target)])


def test_confidence_with_an_nbest_list_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "model.keras").write_bytes(b"")
    (run / "spm.model").write_bytes(b"")
    with pytest.raises(SystemExit):
        translate.parse_arguments(
            ["--run", str(run), "--search", "beam", "--nbest", "2", "--confidence"]
        )
    assert "--nbest lists give each hypothesis's score" in capsys.readouterr().err
