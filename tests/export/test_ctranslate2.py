"""CTranslate2 exports: greedy search is every head's own, beam search softmax's, text as served.

CTranslate2 is an optional extra (`pip install ".[ctranslate2]"`, also in `.[test]`); without it
these tests are skipped. Models are untrained: their outputs are nonsense but deterministic, and
an untrained model rarely ends early, so most outputs run to their length limit.
"""

import ast
import itertools
import json
import re
import shutil
import subprocess
import sys
import threading

import keras
import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip(
    "ctranslate2", reason='ctranslate2 is not installed (pip install ".[ctranslate2]")'
)

from tests.export.conftest import VOCABULARY_SIZE  # noqa: E402
from tests.harness import tiny_model  # noqa: E402
from tfscones import heads  # noqa: E402
from tfscones.commands import export as export_command  # noqa: E402
from tfscones.data.vocab_ids import EOS_ID  # noqa: E402
from tfscones.decoding import (  # noqa: E402
    OutputLimits,
    Search,
    beam_search,
    greedy_decode,
    teacher_forced,
    translate,
    translate_with_confidence,
)
from tfscones.models import LatentExpertTransformer, Seq2SeqTransformer  # noqa: E402
from tfscones.serving import (  # noqa: E402
    ExportError,
    RequestLimits,
    TranslationModule,
    ctranslate2_translator,
)
from tfscones.serving.ctranslate2_export import (  # noqa: E402
    EXPORT_INFO,
    CTranslate2Info,
    export_ctranslate2,
    write_ctranslate2,
)
from tfscones.serving.ctranslate2_translator import CTranslate2Translator  # noqa: E402

MAX_LENGTH = 24
# Source pieces, EOS added: output limits min(floor(1.5 (n + 1) + 10), 24) are 13, 14, 20 and
# the cap 24 twice.
SOURCE_LENGTHS = (1, 2, 6, 11, 23)
# CTranslate2's log-softmax is approximate: a sentence's score is up to about 3e-5 off the exact
# value (benchmarks.ctranslate2_speed); the logits agree to 1e-5.
SCORE_TOLERANCE = 5e-5
# With EOS this likely, greedy search ends some sources early (EOS may come first).
EOS_LIKELY = {"eos_bias": 3.8}
# Every registered head, with the four layouts in turn (pre- or post-norm, tied or untied).
LAYOUTS = {
    "post-norm, untied": {},
    "pre-norm, tied": {"normalize_first": True, "tie_embeddings": True},
    "post-norm, tied": {"tie_embeddings": True},
    "pre-norm, untied": {"normalize_first": True},
}
MODELS = {
    f"{name}, {layout}": {"head": name, **LAYOUTS[layout]}
    for name, layout in zip(heads.HEAD_NAMES, itertools.cycle(LAYOUTS), strict=False)
}
MODELS |= {
    "softmax, pre-norm, tied": {"head": "softmax", **LAYOUTS["pre-norm, tied"]},
    "softmax, EOS likely": {"head": "softmax", "tie_embeddings": True, **EOS_LIKELY},
    "sigmoid, pre-norm, EOS likely": {"head": "sigmoid", "normalize_first": True, **EOS_LIKELY},
    "entmax α=1.3, post-norm": {"head": {"name": "entmax", "alpha": 1.3}},
    "sparsemax, kernel scale 1/8, pre-norm, tied": {
        "head": "sparsemax",
        "output_kernel_scale": 0.125,
        **LAYOUTS["pre-norm, tied"],
    },
    "softmax, kernel scale 0.3, EOS likely": {
        "head": "softmax",
        "output_kernel_scale": 0.3,
        **EOS_LIKELY,
    },
}


def random_sources() -> list[list[int]]:
    generator = np.random.default_rng(5)
    return [generator.integers(4, VOCABULARY_SIZE, length).tolist() for length in SOURCE_LENGTHS]


def our_hypotheses(model, sources, beam_size):
    """Our decoder's `(ids, score)` of each source (EOS appended), decoded alone."""
    hypotheses = []
    for source in sources:
        source_ids = tf.constant([[*source, EOS_ID]], tf.int32)
        if beam_size == 1:
            output = greedy_decode(model, source_ids)
            ids, length, score = output.ids[0], output.lengths[0], output.scores[0]
        else:
            output = beam_search(model, source_ids, beam_size=beam_size)
            ids, length, score = output.ids[0, 0], output.lengths[0, 0], output.log_scores[0, 0]
        hypotheses.append((ids[: int(length)].numpy().tolist(), float(score)))
    return hypotheses


def export_tiny_model(folder, spm, **arguments):
    """`(model, CTranslate2Translator)` of an untrained tiny model exported into `folder`."""
    keras.utils.set_random_seed(1234)
    model = tiny_model(VOCABULARY_SIZE, max_sequence_length=MAX_LENGTH, **arguments)
    write_ctranslate2(model, spm, folder)
    return model, CTranslate2Translator(folder)


@pytest.fixture(scope="module", params=list(MODELS), ids=list(MODELS))
def exported(request, run_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ct2") / "model"
    return export_tiny_model(folder, run_dir / "spm.model", **MODELS[request.param])


def test_greedy_search_is_the_models_own_for_every_head(exported):
    model, translator = exported
    sources = random_sources()
    expected = our_hypotheses(model, sources, beam_size=1)
    outputs = [translator.decode_ids([source])[0] for source in sources]
    assert [hypothesis.ids for hypothesis in outputs] == [ids for ids, _ in expected]
    if translator.info.exact_searches == ("greedy",):
        assert {hypothesis.score for hypothesis in outputs} == {None}
    else:
        np.testing.assert_allclose(
            [hypothesis.score for hypothesis in outputs],
            [score for _, score in expected],
            rtol=1e-6,
            atol=SCORE_TOLERANCE,
        )


def test_greedy_confidences_are_the_models_own_head_scores_for_every_head(exported):
    model, translator = exported
    sources = random_sources()
    for source, hypothesis in zip(
        sources, translator.decode_ids(sources, scored=True), strict=True
    ):
        forced = teacher_forced(
            model, tf.constant([[*source, EOS_ID]]), tf.constant([hypothesis.ids], tf.int32)
        )
        np.testing.assert_allclose(
            hypothesis.token_log_scores,
            forced.token_scores[0, : len(hypothesis.ids)].numpy(),
            rtol=1e-4,
            atol=1e-4,
        )
    with pytest.raises(ValueError, match="greedy search \\(beam_size=1\\)"):
        translator.decode_ids(sources, beam_size=2, scored=True)


def test_the_translators_confidence_is_the_librarys(translator, model, tokenizer):
    sentences = ["Guten Morgen.", "", "Tom hat es mir gesagt, aber ich glaube es nicht."]
    ours = translator.translate(sentences, confidence=True)
    library = translate_with_confidence(model, tokenizer, sentences)
    assert [translation.text for translation in ours] == [text for text, _ in library]
    for translation, (_, expected) in zip(ours, library, strict=True):
        assert translation.confidence.pieces == expected.pieces
        assert translation.confidence.tokens == pytest.approx(expected.tokens, rel=1e-3, abs=1e-6)
        assert translation.confidence.sentence == pytest.approx(expected.sentence, rel=1e-3)
    assert translator.translate(sentences)[0].confidence is None


def test_beam_search_is_exact_for_softmax_and_refused_for_other_heads(exported):
    model, translator = exported
    sources = random_sources()
    if translator.info.exact_searches == ("greedy",):
        with pytest.raises(ValueError, match=r"only greedy search \(beam_size=1\) is its own"):
            translator.decode_ids(sources, beam_size=4)
        with pytest.raises(ValueError, match="only greedy search"):
            translator.translate(["Guten Morgen."], beam_size=2)
        return
    expected = our_hypotheses(model, sources, beam_size=4)
    outputs = [translator.decode_ids([source], beam_size=4)[0] for source in sources]
    assert [hypothesis.ids for hypothesis in outputs] == [ids for ids, _ in expected]
    np.testing.assert_allclose(
        [hypothesis.score for hypothesis in outputs],
        [score for _, score in expected],
        rtol=1e-6,
        atol=SCORE_TOLERANCE,
    )


class CallCounting:
    """A CTranslate2 translator that counts its `translate_batch` calls and their settings."""

    def __init__(self, translator):
        self.translator = translator
        self.calls = 0
        self.scores_asked = set()

    def translate_batch(self, *arguments, **settings):
        self.calls += 1
        self.scores_asked.add(settings["return_scores"])
        return self.translator.translate_batch(*arguments, **settings)


def test_a_batch_decodes_as_its_sentences_alone_in_few_calls(exported, monkeypatch):
    _, translator = exported
    sources = random_sources()
    beam_sizes = (1, 4) if "beam" in translator.info.exact_searches else (1,)
    for beam_size in beam_sizes:
        alone = [translator.decode_ids([source], beam_size)[0] for source in sources]
        counting = CallCounting(translator.translator)
        monkeypatch.setattr(translator, "translator", counting)
        batched = translator.decode_ids(sources, beam_size)
        monkeypatch.undo()
        assert [hypothesis.ids for hypothesis in batched] == [h.ids for h in alone]
        assert [hypothesis.score for hypothesis in batched] == pytest.approx(
            [hypothesis.score for hypothesis in alone], abs=SCORE_TOLERANCE
        )
        limits = [translator.output_limit(len(source) + 1) for source in sources]
        if beam_size == 1:
            # One call at the largest limit, then one per limit of the outputs cut by it.
            cut = {limit for limit, h in zip(limits, alone, strict=True) if h.ids[-1:] != [EOS_ID]}
            assert counting.calls == 1 + len(cut - {max(limits)})
        else:
            assert counting.calls == len(set(limits))
        # Only a softmax model's scores are its own: other heads' calls skip the log-softmax.
        assert counting.scores_asked == {"beam" in translator.info.exact_searches}


def test_the_export_records_its_head_and_exact_searches(exported):
    model, translator = exported
    info = translator.info
    assert info.head == repr(model.head)
    assert info.positions == MAX_LENGTH
    expected = ("greedy", "beam", "sampling") if "Softmax" in info.head else ("greedy",)
    assert info.exact_searches == expected


@pytest.mark.parametrize("preset", ["small", pytest.param("base", marks=pytest.mark.slow)])
def test_every_preset_converts_exactly(preset, run_dir, tmp_path):
    keras.utils.set_random_seed(3)
    model = Seq2SeqTransformer.from_preset(
        preset,
        vocabulary_size=VOCABULARY_SIZE,
        head="sigmoid",
        max_sequence_length=MAX_LENGTH,
        dropout=0.0,
    )
    write_ctranslate2(model, run_dir / "spm.model", tmp_path / "ct2")
    translator = CTranslate2Translator(tmp_path / "ct2")
    sources = random_sources()[:2]
    expected = our_hypotheses(model, sources, beam_size=1)
    assert [translator.decode_ids([source])[0].ids for source in sources] == [
        ids for ids, _ in expected
    ]


@pytest.fixture(scope="module")
def ctranslate2_export(run_dir, tmp_path_factory):
    """The run (SCONES head) exported by `tfscones export --format ctranslate2`."""
    out = tmp_path_factory.mktemp("ct2-run") / "scones"
    export_command.main(["--run", str(run_dir), "--format", "ctranslate2", "--out", str(out)])
    return out


def test_exported_run_translates_text_as_the_savedmodel_module(
    ctranslate2_export, model, tokenizer
):
    module = TranslationModule(model, tokenizer, {"translate": Search()})
    translator = CTranslate2Translator(ctranslate2_export, module.limits)
    long_sentence = "Tom hat mir gesagt, dass er morgen nicht kommen kann, weil er krank ist. " * 3
    sentences = ["Guten Morgen.", "Ja.", "", "   ", long_sentence]
    expected = module.translate(tf.constant(sentences))["translations"].numpy()
    outputs = translator.translate(sentences)
    assert [output.text for output in outputs] == [text.decode("utf-8") for text in expected]
    assert {output.score for output in outputs} == {None}  # a SCONES model's: not softmax's


def test_the_readme_code_runs_in_a_fresh_process_and_translates_as_the_translator(
    ctranslate2_export,
):
    readme = (ctranslate2_export / "README.md").read_text(encoding="utf-8")
    code = readme.split("```python\n")[1].split("```")[0]
    assert "beam_size=1" in code
    printed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ctranslate2_export,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    positions = CTranslate2Info.read(ctranslate2_export).positions
    # The README's one output limit for a batch: every position, whatever the source's length.
    limits = RequestLimits(output=OutputLimits(max_length_a=0.0, max_length_b=float(positions)))
    translator = CTranslate2Translator(ctranslate2_export, limits)
    assert ast.literal_eval(printed) == [translator.translate(["Guten Morgen."])[0].text]


def test_int8_export_is_smaller_and_translates(run_dir, tmp_path):
    float32 = export_ctranslate2(tmp_path / "float32", run=run_dir)
    int8 = export_ctranslate2(tmp_path / "int8", run=run_dir, quantization="int8")
    assert int8["quantization"] == "int8"
    size = {name: (tmp_path / name / "model.bin").stat().st_size for name in ("float32", "int8")}
    assert size["int8"] < 0.5 * size["float32"]
    translation = CTranslate2Translator(int8["path"]).translate(["Guten Morgen."])[0]
    assert translation.text and float32["head"] == int8["head"]


def test_hard_moe_and_foreign_vocabularies_are_refused(run_dir, tmp_path):
    experts = tiny_model(VOCABULARY_SIZE, model_class=LatentExpertTransformer, num_experts=2)
    with pytest.raises(ExportError, match="mixture of experts does not convert"):
        write_ctranslate2(experts, run_dir / "spm.model", tmp_path / "experts")
    with pytest.raises(
        ExportError, match=f"{VOCABULARY_SIZE} entries, the model a vocabulary of 50"
    ):
        write_ctranslate2(tiny_model(50), run_dir / "spm.model", tmp_path / "foreign")
    assert not list(tmp_path.iterdir())


def export_fails(arguments: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        export_command.main(arguments)
    assert message in str(exit_info.value.code) + capsys.readouterr().err


def test_bad_exports_are_refused_before_anything_is_written(run_dir, tmp_path, capsys):
    out = tmp_path / "ct2"
    run = ["--run", str(run_dir), "--format", "ctranslate2", "--out", str(out)]
    export_fails([*run, "--quantization", "int4"], "one of float32, int8_float32, int8", capsys)
    export_fails(["--run", str(tmp_path / "none"), *run[2:]], "is not a folder", capsys)
    assert not out.exists()
    out.mkdir()
    (out / "model.bin").write_text("an earlier export")
    export_fails(run, "exists and is not empty", capsys)
    assert (out / "model.bin").read_text() == "an earlier export"
    savedmodel = ["--run", str(run_dir), "--out", str(tmp_path / "sm" / "1")]
    export_fails(
        [*savedmodel, "--quantization", "int8"], "a setting of --format ctranslate2", capsys
    )


def test_without_ctranslate2_the_export_says_what_to_install(
    run_dir, tmp_path, monkeypatch, capsys
):
    monkeypatch.setitem(sys.modules, "tfscones.serving.ctranslate2_export", None)
    arguments = ["--run", str(run_dir), "--format", "ctranslate2", "--out", str(tmp_path / "o")]
    export_fails(arguments, 'pip install "tfscones[ctranslate2]"', capsys)


def test_the_translator_refuses_what_is_not_an_export_and_limits_beyond_its_positions(
    ctranslate2_export, tmp_path
):
    with pytest.raises(FileNotFoundError, match="is not a CTranslate2 export of tfscones"):
        CTranslate2Translator(tmp_path)
    limits = RequestLimits(max_source_tokens=10_000, output=OutputLimits(32))
    with pytest.raises(ValueError, match="max_source_tokens must be a whole number in"):
        CTranslate2Translator(ctranslate2_export, limits)
    with pytest.raises(TypeError, match="not one string"):
        CTranslate2Translator(ctranslate2_export).translate("Guten Morgen.")


def test_the_translator_loads_on_a_thread_that_has_ended_when_loading_returns(monkeypatch):
    loads = []

    def translator(*arguments, **settings):
        loads.append((threading.current_thread(), arguments, settings))
        if settings["compute_type"] == "unknown":
            raise ValueError("unknown compute type")
        return "translator"

    monkeypatch.setattr(ctranslate2_translator.ctranslate2, "Translator", translator)
    assert ctranslate2_translator.load_translator("model", "int8", 2) == "translator"
    assert ctranslate2_translator.load_translator("model", "float32", 1, workers=3)
    thread, arguments, settings = loads[0]
    assert thread is not threading.current_thread() and not thread.is_alive()
    assert arguments == ("model",)
    assert settings == {"compute_type": "int8", "intra_threads": 2, "inter_threads": 1}
    assert loads[1][2] == {"compute_type": "float32", "intra_threads": 1, "inter_threads": 3}
    with pytest.raises(ValueError, match="unknown compute type"):
        ctranslate2_translator.load_translator("model", "unknown", 1)


@pytest.fixture(scope="module")
def translator(ctranslate2_export):
    return CTranslate2Translator(ctranslate2_export)


@pytest.mark.parametrize(
    "sentences",
    [["Hallo.", None], ["Hallo.", 3], "Hallo.", b"Hallo.", [["Hallo."]], ["\ud800"]],
    ids=["None", "int", "one string", "one bytes", "nested", "lone surrogate"],
)
def test_the_translator_refuses_sentences_in_the_words_of_the_librarys_translate(
    translator, model, tokenizer, sentences
):
    with pytest.raises((TypeError, ValueError)) as library:
        translate(model, tokenizer, sentences)
    with pytest.raises(library.type) as ours:
        translator.translate(sentences)
    assert str(ours.value) == str(library.value)


def test_the_translator_takes_what_the_librarys_translate_takes(translator, model, tokenizer):
    sentences = ["Guten Morgen.", "Ja."]
    expected = translator.translate(sentences)
    assert translator.translate(sentence for sentence in sentences) == expected
    assert translator.translate(tf.constant(sentences)) == expected
    assert translator.translate([sentences[0].encode(), sentences[1]]) == expected
    module = TranslationModule(model, tokenizer, {"translate": Search()})
    invalid = [b"Guten \xff Morgen", b"\xe2\x82 Ja"]
    served = module.translate(tf.constant(invalid))["translations"].numpy()
    assert [t.text for t in translator.translate(invalid)] == [t.decode() for t in served]


@pytest.mark.parametrize(
    "sources, error, message",
    [
        (
            [[VOCABULARY_SIZE]],
            ValueError,
            "sources[0][0] must be a whole number in [0, 400) (got 400)",
        ),
        ([[5], [6, -1]], ValueError, "sources[1][1] must be a whole number in [0, 400) (got -1)"),
        ([[5, 6.0]], ValueError, "sources[0][1] must be a whole number in [0, 400) (got 6.0)"),
        ([[True]], ValueError, "sources[0][0] must be a whole number in [0, 400) (got True)"),
        ([5, 6], TypeError, "sources[0] must be a sequence of ids, not int"),
        (["Hallo."], TypeError, "sources[0] must be a sequence of ids, not str"),
        (
            [[5], [5] * 40],
            ValueError,
            "sources[1] has 40 ids before its end: at most 31 (max_source_tokens is 32, EOS "
            "included)",
        ),
    ],
)
def test_decode_ids_checks_every_id_naming_its_sentence_and_position(
    translator, sources, error, message
):
    with pytest.raises(error) as refused:
        translator.decode_ids(sources)
    assert str(refused.value).startswith(message)


def test_decode_ids_reads_a_row_up_to_its_first_eos_or_pad_as_translate_ids(translator):
    expected = translator.decode_ids([[5, 6], [7]])
    assert translator.decode_ids([[5, 6, EOS_ID, 9], [7, 0, 0]]) == expected
    assert translator.decode_ids(np.array([[5, 6, 0], [7, EOS_ID, 0]])) == expected
    assert translator.decode_ids([[EOS_ID, 5], []]) == [([], None, None), ([], None, None)]


@pytest.mark.parametrize("threads", [-1, 1.5, True, 1025, None])
def test_threads_outside_their_range_are_refused_before_the_model_loads(
    threads, ctranslate2_export, monkeypatch
):
    monkeypatch.setattr(
        ctranslate2_translator.ctranslate2, "Translator", lambda *_, **__: pytest.fail("loaded")
    )
    message = f"threads must be a whole number in [0, 1024] (got {threads!r})"
    with pytest.raises(ValueError, match=re.escape(message)):
        CTranslate2Translator(ctranslate2_export, threads=threads)


def info_text(**changes) -> str:
    info = {
        "head": "SoftmaxHead()",
        "exact_searches": ["greedy", "beam", "sampling"],
        "positions": 32,
        "quantization": "float32",
    }
    return json.dumps({key: value for key, value in (info | changes).items() if value != "-"})


@pytest.mark.parametrize(
    "text, problem",
    [
        ("{not json", "not JSON (Expecting property name"),
        ("", "not JSON (Expecting value"),
        ("[]", "must hold a JSON object, not list"),
        (info_text(positions="-"), "positions is missing"),
        (info_text(positions="32"), "positions must be a whole number in [1, inf) (got '32')"),
        (info_text(positions=0), "positions must be a whole number in [1, inf) (got 0)"),
        (info_text(head=3), "head must be a string (got 3)"),
        (
            info_text(exact_searches=["greedy", "nucleus"]),
            "exact_searches must be a list of greedy, beam, sampling (got ['greedy', 'nucleus'])",
        ),
        (
            info_text(quantization="int4"),
            "quantization must be one of float32, int8_float32, int8 (got 'int4')",
        ),
        (info_text(vocabulary=400), "unknown field vocabulary"),
    ],
)
def test_a_damaged_info_file_is_named_with_the_field_that_is_wrong(text, problem, tmp_path):
    path = tmp_path / EXPORT_INFO
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        CTranslate2Info.read(tmp_path)
    assert str(refused.value).startswith(f"{path}: ")
    assert problem in str(refused.value)


def test_the_translator_names_the_damaged_files_of_its_export(ctranslate2_export, tmp_path):
    folder = tmp_path / "ct2"
    shutil.copytree(ctranslate2_export, folder)
    (folder / EXPORT_INFO).write_text(info_text(positions="-"), encoding="utf-8")
    with pytest.raises(
        ValueError, match=re.escape(f"{folder / EXPORT_INFO}: positions is missing")
    ):
        CTranslate2Translator(folder)
    shutil.copyfile(ctranslate2_export / EXPORT_INFO, folder / EXPORT_INFO)
    vocabulary = folder / "shared_vocabulary.json"
    vocabulary.write_text('["<pad>", "</s>"', encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{vocabulary}: not JSON")):
        CTranslate2Translator(folder)
    pieces = json.loads((ctranslate2_export / "shared_vocabulary.json").read_text("utf-8"))
    vocabulary.write_text(json.dumps(pieces[:-1]), encoding="utf-8")
    with pytest.raises(
        ValueError, match=f"{VOCABULARY_SIZE - 1} entries, .*sentencepiece.model {VOCABULARY_SIZE}"
    ):
        CTranslate2Translator(folder)
