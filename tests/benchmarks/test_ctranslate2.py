"""The CTranslate2 converter: a converted model decodes as our decoders and SavedModel do.

CTranslate2 is an optional extra (`pip install ".[ctranslate2]"`, also in `.[test]`); without
it these tests are skipped.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip(
    "ctranslate2", reason='ctranslate2 is not installed (pip install ".[ctranslate2]")'
)

from benchmarks.ctranslate2_convert import (  # noqa: E402
    Seq2SeqTransformerConverter,
    convert_run,
)
from benchmarks.ctranslate2_decoder import CTranslate2Decoder  # noqa: E402
from benchmarks.ctranslate2_speed import parse_arguments, seconds_per_pass  # noqa: E402
from tests.harness import tiny_model  # noqa: E402
from tfscones.data import Tokenizer, train_sentencepiece  # noqa: E402
from tfscones.data.demo import demo_file  # noqa: E402
from tfscones.data.vocab_ids import EOS_ID  # noqa: E402
from tfscones.decoding import beam_search, greedy_decode  # noqa: E402
from tfscones.models import LatentExpertTransformer  # noqa: E402
from tfscones.serving import RequestLimits, TranslationModule  # noqa: E402

VOCABULARY_SIZE = 50
MAX_LENGTH = 24
PIECES = ["<pad>", "</s>", "<unk>", "<s>"] + [f"w{i}" for i in range(4, VOCABULARY_SIZE)]
# Source lengths (EOS included) whose output limits, min(floor(1.5 n + 10), 24), are 13, 14, 20
# and the cap 24; an untrained model rarely ends early, so most outputs stop at their limit.
# (A source of EOS alone is never decoded: it translates to the empty string.)
SOURCE_LENGTHS = (2, 3, 7, 12)
# CTranslate2's log-softmax is approximate: a sentence's score is up to about 3e-5 off the exact
# value (benchmarks.ctranslate2_speed); the logits agree to 1e-5.
SCORE_TOLERANCE = 5e-5
MODELS = {
    "post-norm, untied": {"normalize_first": False, "tie_embeddings": False},
    "pre-norm, tied": {"normalize_first": True, "tie_embeddings": True},
    # With EOS this likely, greedy search ends one source early, two at once (so EOS may come
    # first) and runs one to its limit.
    "pre-norm, tied, EOS likely": {
        "normalize_first": True,
        "tie_embeddings": True,
        "eos_bias": 3.8,
    },
}


def limits(max_length: int) -> RequestLimits:
    return RequestLimits(
        max_batch_size=64,
        max_source_tokens=max_length,
        max_output_tokens=max_length,
        max_source_characters=32 * max_length,
        max_length_a=1.5,
        max_length_b=10.0,
    )


def random_sources() -> list[list[int]]:
    generator = np.random.default_rng(5)
    return [
        [*generator.integers(4, VOCABULARY_SIZE, length - 1).tolist(), EOS_ID]
        for length in SOURCE_LENGTHS
    ]


def our_hypotheses(model, sources, beam_size):
    """Our decoder's `(ids, score)` of each source, decoded alone."""
    hypotheses = []
    for source in sources:
        source_ids = tf.constant([source], tf.int32)
        if beam_size == 1:
            output = greedy_decode(model, source_ids)
            ids, length, score = output.ids[0], output.lengths[0], output.scores[0]
        else:
            output = beam_search(model, source_ids, beam_size=beam_size)
            ids, length, score = output.ids[0, 0], output.lengths[0, 0], output.log_scores[0, 0]
        hypotheses.append((ids[: int(length)].numpy().tolist(), float(score)))
    return hypotheses


@pytest.fixture(scope="module", params=list(MODELS), ids=list(MODELS))
def converted(request, tmp_path_factory):
    """`(model, CTranslate2Decoder)` of one tiny softmax model."""
    keras.utils.set_random_seed(1234)
    model = tiny_model(VOCABULARY_SIZE, max_sequence_length=MAX_LENGTH, **MODELS[request.param])
    folder = tmp_path_factory.mktemp("ct2") / "model"
    Seq2SeqTransformerConverter(model, PIECES).convert(str(folder))
    return model, CTranslate2Decoder(folder, limits(MAX_LENGTH))


@pytest.mark.parametrize("beam_size", [1, 4], ids=["greedy", "beam4"])
def test_ctranslate2_decodes_as_our_decoders(converted, beam_size):
    model, decoder = converted
    sources = random_sources()
    expected = our_hypotheses(model, sources, beam_size)
    outputs = [decoder.decode_ids([source], beam_size)[0] for source in sources]
    assert [ids for ids, _ in expected] == [hypothesis.ids for hypothesis in outputs]
    np.testing.assert_allclose(
        [hypothesis.score for hypothesis in outputs],
        [score for _, score in expected],
        rtol=1e-6,
        atol=SCORE_TOLERANCE,
    )


@pytest.fixture(scope="module")
def softmax_run(tmp_path_factory):
    """A run folder: a SentencePiece model of the demo dev set and an untrained tiny model."""
    folder = tmp_path_factory.mktemp("run")
    train_sentencepiece(
        [demo_file("dev", "de"), demo_file("dev", "en")], folder / "spm", vocab_size=300
    )
    model = tiny_model(300, max_sequence_length=MAX_LENGTH, normalize_first=True, eos_bias=1.5)
    model.save(folder / "model.keras")
    return folder, model


def test_converted_run_translates_text_as_the_translation_module(softmax_run, tmp_path):
    folder, model = softmax_run
    convert_run(folder, tmp_path / "ct2")
    tokenizer = Tokenizer.from_file(folder / "spm.model")
    module = TranslationModule(model, tokenizer, beam_size=1, num_hypotheses=1)
    decoder = CTranslate2Decoder(tmp_path / "ct2", module.limits, folder / "spm.model")
    long_sentence = "Tom hat mir gesagt, dass er morgen nicht kommen kann, weil er krank ist. " * 3
    sentences = ["Guten Morgen.", "Ja.", "", long_sentence]
    expected = module.translate(tf.constant(sentences))
    outputs = [decoder.translate([sentence], beam_size=1)[0] for sentence in sentences]
    assert [text for text, _ in outputs] == [
        text.decode("utf-8") for text in expected["translations"].numpy()
    ]
    np.testing.assert_allclose(
        [score for _, score in outputs], expected["scores"].numpy(), rtol=1e-6, atol=SCORE_TOLERANCE
    )


def test_only_softmax_models_convert():
    with pytest.raises(ValueError, match="softmax"):
        Seq2SeqTransformerConverter(tiny_model(VOCABULARY_SIZE, head="sigmoid"), PIECES)
    experts = tiny_model(VOCABULARY_SIZE, model_class=LatentExpertTransformer, num_experts=2)
    with pytest.raises(TypeError, match="LatentExpertTransformer"):
        Seq2SeqTransformerConverter(experts, PIECES)
    with pytest.raises(ValueError, match="pieces"):
        Seq2SeqTransformerConverter(tiny_model(VOCABULARY_SIZE), PIECES[:-1])


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


def test_batch_sizes_below_one_are_refused(softmax_run, capsys):
    folder, _ = softmax_run
    arguments = ["--run", str(folder), "--sentences", str(folder / "spm.model")]
    with pytest.raises(SystemExit):
        parse_arguments([*arguments, "--batch-sizes", "4", "0"])
    assert "--batch-sizes must be at least 1" in capsys.readouterr().err
