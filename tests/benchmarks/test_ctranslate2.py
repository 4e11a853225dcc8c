"""The CTranslate2 benchmarks: what they time, the flags they refuse, the models they name.

CTranslate2 is an optional extra (`pip install ".[ctranslate2]"`, also in `.[test]`); without
it these tests are skipped. The export and translator it times are tested in
tests/export/test_ctranslate2.py.
"""

import json

import pytest

pytest.importorskip(
    "ctranslate2", reason='ctranslate2 is not installed (pip install ".[ctranslate2]")'
)

from benchmarks.ctranslate2_heads import describe_run  # noqa: E402
from benchmarks.ctranslate2_speed import parse_arguments, seconds_per_pass  # noqa: E402


class _CountingDecoder:
    """Records the size of every request it gets."""

    def __init__(self):
        self.requests = []

    def translate(self, sentences, beam_size):
        self.requests.append((len(sentences), beam_size))
        return [("", 0.0)] * len(sentences)


def test_speed_passes_time_only_the_batch_sizes_asked_for():
    decoder = _CountingDecoder()
    seconds = seconds_per_pass({"engine": decoder}, ["s"] * 10, repeats=2, batch_sizes=(4,))
    assert set(seconds) == {("engine", 1, 4), ("engine", 4, 4)}
    # Per beam size: one warm-up request, then two passes of requests of 4, 4 and 2 sentences.
    assert (
        decoder.requests == [(4, 1), (4, 4)] + [(4, 1), (4, 1), (2, 1), (4, 4), (4, 4), (2, 4)] * 2
    )


@pytest.mark.parametrize(
    "flag, values", [("--batch-sizes", ["4", "0"]), ("--threads", ["0"]), ("--repeats", ["-1"])]
)
def test_counts_below_one_are_refused_by_name(tmp_path, capsys, flag, values):
    folder = tmp_path
    for name in ("model.keras", "spm.model"):
        (folder / name).write_text("")
    arguments = ["--run", str(folder), "--sentences", str(folder / "spm.model")]
    with pytest.raises(SystemExit):
        parse_arguments([*arguments, flag, *values])
    error = capsys.readouterr().err
    assert f"argument {flag}" in error and f"(got {values[-1]})" in error


def test_a_record_names_the_training_run_of_each_model(tmp_path):
    results = {
        "steps": 3200,
        "best_dev_bleu": 40.26,
        "machine": {"description": "AMD EPYC, 1 core"},
        "code": {"commit": "43fd796c0ffee", "modified": False},
    }
    (tmp_path / "results.json").write_text(json.dumps(results))
    assert describe_run("SCONES", tmp_path) == (
        f"SCONES: {tmp_path}, 3,200 steps on AMD EPYC, 1 core, code 43fd796, best dev BLEU 40.3"
    )


def test_a_run_without_its_training_record_is_named_by_path(tmp_path):
    assert describe_run("softmax", tmp_path) == (
        f"softmax: {tmp_path} (no results.json: training record unknown)"
    )
