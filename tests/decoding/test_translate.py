import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tfscones.data.vocab_ids import EOS_ID
from tfscones.decoding import (
    OutputLimits,
    Search,
    compiled_search,
    source_ids_for_model,
    translate,
    translate_nbest,
)

SENTENCES = [
    "the big dog ran under the green tree",
    "",
    "a cat",
    "the small red cat sat on a blue mat under a big green tree",
    "dog",
    "the house",
]


def test_translate_with_a_copy_model_returns_each_source_in_order(tokenizer):
    model = harness.CopyModel(tokenizer.vocab_size, max_sequence_length=64)
    # Batches of 2 over sentences sorted by length: every batch mixes input positions.
    assert translate(model, tokenizer, SENTENCES, batch_size=2) == SENTENCES
    assert translate(model, tokenizer, tf.constant(SENTENCES), batch_size=4) == SENTENCES
    assert translate(model, tokenizer, SENTENCES, batch_size=4, jit_compile=True) == SENTENCES
    assert translate(model, tokenizer, []) == []


def test_long_sources_are_truncated_and_keep_their_eos(tokenizer):
    long_sentence = " ".join(["the big green tree"] * 6)
    pieces = tokenizer.tokenize(tf.constant(long_sentence)).numpy()
    assert len(pieces) > 12
    ids = source_ids_for_model(tokenizer, tf.constant([long_sentence, "a cat"]), 12)
    assert ids[0].numpy().tolist() == pieces[:11].tolist() + [EOS_ID]
    assert ids[1].numpy().tolist() == tokenizer.tokenize(tf.constant("a cat")).numpy().tolist() + [
        EOS_ID
    ]
    model = harness.CopyModel(tokenizer.vocab_size, max_sequence_length=12)
    (translation,) = translate(model, tokenizer, [long_sentence])
    assert translation == tokenizer.detokenize(pieces[:11]).numpy().decode()


def test_translate_with_a_tiny_transformer(tokenizer):
    model = harness.tiny_model(tokenizer.vocab_size, "sigmoid", max_sequence_length=16)
    translations = translate(model, tokenizer, SENTENCES, batch_size=4)
    assert len(translations) == len(SENTENCES)
    assert all(isinstance(text, str) for text in translations)
    # Batching, sorting and padding change nothing: each sentence alone gives the same output.
    alone = [translate(model, tokenizer, [sentence])[0] for sentence in SENTENCES]
    assert translations == alone
    # One trace for all those batch and source shapes.
    assert compiled_search(model).experimental_get_tracing_count() == 1
    # The translations are the detokenised greedy ids of the padded sources.
    source = source_ids_for_model(tokenizer, tf.constant(SENTENCES), 16).to_tensor()
    output = compiled_search(model)(source)
    expected = [text.decode() for text in tokenizer.detokenize(output.ids[:, 0]).numpy()]
    assert translations == expected
    assert len(set(np.asarray(expected))) > 1


def test_translate_rejects_bad_arguments(tokenizer):
    model = harness.CopyModel(tokenizer.vocab_size, max_sequence_length=8)
    with pytest.raises(ValueError, match="batch_size"):
        translate(model, tokenizer, ["a"], batch_size=0)
    with pytest.raises(ValueError, match="one-dimensional"):
        translate(model, tokenizer, tf.constant([["a"]]))
    with pytest.raises(TypeError, match="not one string .* write \\['Wie geht es dir\\?'\\]"):
        translate(model, tokenizer, "Wie geht es dir?")
    with pytest.raises(TypeError, match="not one string"):
        translate_nbest(model, tokenizer, b"bytes too")
    with pytest.raises(TypeError, match="must be strings; got NoneType, int"):
        translate(model, tokenizer, ["a", 3, None])
    with pytest.raises(TypeError, match="tensor of int32"):
        translate(model, tokenizer, tf.constant([1, 2]))
    with pytest.raises(ValueError, match=r"sentences\[1\] is not Unicode text: .* character 3"):
        translate(model, tokenizer, ["a", "abc\ud800"])


@pytest.mark.parametrize(
    "search",
    [
        Search("beam", beam_size=3, num_hypotheses=3),
        Search("diverse_beam", beam_size=4, num_groups=2, num_hypotheses=2),
        Search("sample", num_hypotheses=2, top_k=1),
    ],
)
def test_every_search_translates_with_a_copy_model(tokenizer, search):
    model = harness.CopyModel(tokenizer.vocab_size, max_sequence_length=64)
    assert translate(model, tokenizer, SENTENCES, batch_size=2, search=search) == SENTENCES
    nbest = translate_nbest(model, tokenizer, SENTENCES, batch_size=4, search=search)
    assert [hypotheses[0][0] for hypotheses in nbest] == SENTENCES
    for sentence, hypotheses in zip(SENTENCES, nbest, strict=True):
        if not sentence:  # an empty source has one translation, the empty one
            assert hypotheses == [("", 0.0)]
            continue
        assert len(hypotheses) == search.hypotheses(model)
        scores = [score for _, score in hypotheses]
        if search.method != "sample":
            assert scores == sorted(scores, reverse=True)


def test_nbest_matches_beam_search_on_a_tiny_transformer(tokenizer):
    model = harness.tiny_model(tokenizer.vocab_size, "softmax", max_sequence_length=16)
    search = Search("beam", beam_size=4, num_hypotheses=4)
    nbest = translate_nbest(model, tokenizer, SENTENCES[:3], search=search)
    source = source_ids_for_model(tokenizer, tf.constant(SENTENCES[:3]), 16).to_tensor()
    output = search.decode(model, source)
    for b, hypotheses in enumerate(nbest):
        filled = output.lengths[b] > 0  # an empty source fills one slot, with ""
        texts = tokenizer.detokenize(output.ids[b][filled]).numpy()
        assert [text for text, _ in hypotheses] == [text.decode() for text in texts]
        scores = output.scores[b][filled]
        np.testing.assert_allclose([score for _, score in hypotheses], scores, rtol=1e-5)


def test_search_rejects_bad_settings():
    with pytest.raises(ValueError, match="unknown search method 'topk'"):
        Search("topk")
    with pytest.raises(ValueError, match="num_hypotheses"):
        Search("beam", beam_size=2, num_hypotheses=3)
    with pytest.raises(ValueError, match="num_hypotheses must be a whole number"):
        Search("sample", num_hypotheses=0)
    with pytest.raises(ValueError, match="beam search has no setting top_k; its settings: beam_s"):
        Search("beam", top_k=3)


def test_a_search_refuses_a_model_it_cannot_decode_before_decoding(tokenizer):
    model = harness.CopyModel(tokenizer.vocab_size, max_sequence_length=8)
    with pytest.raises(ValueError, match="the experts search needs a model with latent experts"):
        Search("experts").decode(model, tf.constant([[5, EOS_ID]]))


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            {"method": "beam", "beam_size": 0},
            r"beam_size must be a whole number in \[1, 2147483647\]",
        ),
        ({"method": "beam", "length_penalty": -0.5}, "length_penalty must be a finite number"),
        (
            {"method": "beam", "length_penalty": float("nan")},
            "length_penalty must be a finite number",
        ),
        ({"method": "diverse_beam", "beam_size": 4, "num_groups": 3}, "multiple of num_groups"),
        ({"method": "diverse_beam", "diversity_strength": -1.0}, "diversity_strength"),
        (
            {"method": "sample", "temperature": 0.0},
            r"temperature must be a finite number in \[1e-30, 1e\+30\]",
        ),
        ({"method": "sample", "top_p": 0.0}, r"top_p must be a finite number in \(0, 1\]"),
        ({"method": "sample", "top_k": -2}, r"top_k must be a whole number in \[0, 2147483647\]"),
        ({"method": "diverse_beam", "beam_size": 2, "num_hypotheses": 3}, "hypotheses_per_group"),
        ({"method": "greedy", "beam_size": 4}, "greedy search has no setting beam_size"),
    ],
)
def test_search_refuses_every_setting_out_of_range_before_decoding(settings, message):
    with pytest.raises(ValueError, match=message):
        Search(**settings)


@pytest.mark.parametrize(
    "limits, message",
    [
        ({"max_length": 0}, r"max_length must be a whole number in \[1, inf\)"),
        ({"max_length_a": -1.0}, "max_length_a must be a finite number"),
        ({"max_length_b": float("inf")}, "max_length_b must be a finite number"),
    ],
)
def test_output_limits_refuse_lengths_out_of_range(limits, message):
    with pytest.raises(ValueError, match=message):
        OutputLimits(**limits)
