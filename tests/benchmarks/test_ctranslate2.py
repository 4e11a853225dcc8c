"""The CTranslate2 benchmarks: what they time, the flags they refuse, the models they name.

CTranslate2 is an optional extra (`pip install ".[ctranslate2]"`, also in `.[test]`); without
it these tests are skipped. The export and translator it times are tested in
tests/export/test_ctranslate2.py.
"""

import contextlib
import functools
import json

import pytest

pytest.importorskip(
    "ctranslate2", reason='ctranslate2 is not installed (pip install ".[ctranslate2]")'
)

from benchmarks import ctranslate2_heads  # noqa: E402
from benchmarks.ctranslate2_heads import describe_run  # noqa: E402
from benchmarks.ctranslate2_speed import build_timed_decoder, parse_arguments, seconds_per_pass  # noqa: E402
from benchmarks.decoder_process import DecoderProcess, time_requests  # noqa: E402
from tests.export.conftest import demo_sentences  # noqa: E402


class _CountingDecoder:
    """Records the size of every request it gets."""

    def __init__(self):
        self.requests = []

    def translate(self, sentences, beam_size):
        self.requests.append((len(sentences), beam_size))
        return [("", 0.0)] * len(sentences)


def test_speed_passes_time_only_the_batch_sizes_asked_for():
    decoder = _CountingDecoder()
    timers = {"engine": functools.partial(time_requests, decoder)}
    seconds = seconds_per_pass(timers, ["s"] * 10, repeats=2, batch_sizes=(4,))
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


def test_heads_times_every_row_of_every_decoder_at_every_batch_size_after_one_warm_up():
    decoders = {"SCONES": _CountingDecoder(), "softmax": _CountingDecoder()}
    timers = {
        ("engine", name): functools.partial(time_requests, decoder)
        for name, decoder in decoders.items()
    }
    translations, seconds = ctranslate2_heads.measure(
        timers, ["s"] * 5, batch_sizes=(1, 4), repeats=2
    )
    rows = [("engine", *row) for row in ctranslate2_heads.ROWS]
    assert set(translations) == set(rows)
    assert set(seconds) == {(*row, size) for row in rows for size in (1, 4)}
    # Per batch size: one warm-up request, then two passes over 5 sentences.
    assert decoders["SCONES"].requests == [(1, 1), (4, 1)] + ([(1, 1)] * 5 + [(4, 1), (1, 1)]) * 2
    greedy, beam = [(1, 1)] * 5 + [(4, 1), (1, 1)], [(1, 4)] * 5 + [(4, 4), (1, 4)]
    assert decoders["softmax"].requests == [(1, 1), (4, 1), (1, 4), (4, 4)] + (greedy + beam) * 2


def test_heads_compares_scones_greedy_with_softmax_beam_on_each_ctranslate2_engine(capsys):
    references = ["ein Hund läuft über die Wiese", "zwei Kinder spielen im Park"]
    keys = [
        (engine, *row) for engine in ctranslate2_heads.ENGINES for row in ctranslate2_heads.ROWS
    ]
    translations = {key: references for key in keys}
    seconds = {(*key, 32): 1.0 for key in keys}
    seconds[ctranslate2_heads.CTRANSLATE2, "softmax", 4, 32] = 2.5
    translations[ctranslate2_heads.CTRANSLATE2_INT8, "SCONES", 1] = [references[0], "zwei Kinder"]
    ctranslate2_heads.print_table(translations, seconds, references, (32,))
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].endswith("2.50x at batch 32; BLEU 100.000 against 100.000 (+0.000)")
    assert lines[-1].startswith(
        "CTranslate2 int8: SCONES greedy / softmax beam 4 sentences/s 1.00x"
    )
    assert "against 100.000 (-" in lines[-1]


@pytest.mark.slow
def test_heads_decoders_translate_alike_each_in_a_process_of_its_own(tiny_runs, tmp_path):
    models = ctranslate2_heads.export_models(tiny_runs, tmp_path, output_limit=8)
    engines = (ctranslate2_heads.CTRANSLATE2, ctranslate2_heads.SAVEDMODEL)
    with contextlib.ExitStack() as processes:
        timers = {
            (engine, name): processes.enter_context(
                DecoderProcess(build_timed_decoder, engine, model, 1)
            ).time_requests
            for engine in engines
            for name, model in models.items()
        }
        sentences = demo_sentences("test", 6, "en")
        translations, seconds = ctranslate2_heads.measure(timers, sentences, (1, 4), repeats=1)
    assert len(seconds) == 2 * 3 * 2 and all(value > 0 for value in seconds.values())
    for name, beam_size in ctranslate2_heads.ROWS:
        ours = translations[ctranslate2_heads.SAVEDMODEL, name, beam_size]
        assert translations[ctranslate2_heads.CTRANSLATE2, name, beam_size] == ours
        assert len(ours) == len(sentences) and any(ours)


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
