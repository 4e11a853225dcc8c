"""Confidences per translation and per token: each head's meaning, every path equal."""

import math

import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tfscones.data.symbol_vocab import SymbolTokenizer
from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID
from tfscones.decoding import (
    Search,
    compiled_search,
    score_with_confidence,
    source_ids_for_model,
    translate_nbest,
    translate_with_confidence,
)
from tfscones.decoding.confidence import EMPTY, EOS_LABEL, confidence_of
from tfscones.decoding.experts import decode_experts
from tfscones.decoding.scoring import teacher_forced
from tfscones.models import LatentExpertTransformer

from .test_translate import SENTENCES


def log_scores_by_hand(head: str, logits: np.ndarray) -> np.ndarray:
    """Each head's log scores in numpy, from its formula (float64)."""
    z = logits.astype(np.float64)
    if head == "softmax":
        return z - np.logaddexp.reduce(z, axis=-1, keepdims=True)
    if head == "sigmoid":
        return -np.logaddexp(0.0, -z)
    if head == "tanh":
        return -np.logaddexp(0.0, -2.0 * z)
    if head == "sparsemax":  # Martins & Astudillo 2016, the closed form
        ordered = -np.sort(-z, axis=-1)
        k = np.arange(1, z.shape[-1] + 1)
        cumulative = np.cumsum(ordered, -1)
        support = (1 + k * ordered > cumulative).sum(-1, keepdims=True)
        tau = (np.take_along_axis(cumulative, support - 1, -1) - 1) / support
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(z - tau, 0.0))
    raise ValueError(head)


def decoded_ids(model, tokenizer, sentences, search=None) -> list[list[int]]:
    """The first hypothesis's ids of each sentence, EOS included, from the compiled search."""
    source = source_ids_for_model(tokenizer, tf.constant(sentences), model.max_sequence_length)
    output = compiled_search(model, search)(source.to_tensor())
    ids, lengths = output.ids[:, 0].numpy(), output.lengths[:, 0].numpy()
    return [row[:length].tolist() for row, length in zip(ids, lengths, strict=True)]


HEADS = ("softmax", "sigmoid", "tanh", "sparsemax")


@pytest.mark.parametrize("head", HEADS)
def test_each_heads_confidence_is_the_product_of_its_token_probabilities(tokenizer, head):
    model = harness.tiny_model(tokenizer.vocab_size, head, max_sequence_length=16, eos_bias=1.0)
    sentences = SENTENCES[:4]
    results = translate_with_confidence(model, tokenizer, sentences, batch_size=3)
    source_ids = source_ids_for_model(tokenizer, tf.constant(sentences), 16).numpy()
    targets = decoded_ids(model, tokenizer, sentences)
    assert max(map(len, targets)) > 2  # some translations are more than one token and EOS
    for sentence, (_, confidence), source, target in zip(
        sentences, results, source_ids, targets, strict=True
    ):
        if not sentence:  # nothing to translate: the empty translation, certainly
            assert confidence == EMPTY
            continue
        target_in = [[BOS_ID, *target[:-1]]]
        logits = model(harness.model_inputs([source], target_in), training=False).numpy()[0]
        token_logs = log_scores_by_hand(head, logits)[np.arange(len(target)), target]
        assert confidence.tokens == pytest.approx(np.exp(token_logs), rel=1e-4, abs=1e-6)
        assert confidence.sentence == pytest.approx(math.exp(token_logs.sum()), rel=1e-4)
        assert confidence.normalised == pytest.approx(math.exp(token_logs.mean()), rel=1e-4)
        assert len(confidence.pieces) == len(target)
        assert (confidence.pieces[-1] == EOS_LABEL) == (target[-1] == EOS_ID)


WORDS = ["cat", "dog", "bird", "fish", "tree", "house", "", "garden"]


@pytest.fixture(scope="module")
def symbols():
    """A symbol vocabulary, whose translations tokenise back to the very tokens decoded."""
    return SymbolTokenizer.build(WORDS, [" ".join(word) for word in WORDS])


# Softmax and SCONES in the default run; every head, and beam search, in the slow one.
PATHS = [
    pytest.param(head, search, id=f"{head}-{name}", marks=() if fast else pytest.mark.slow)
    for head in HEADS
    for name, search in (("greedy", Search()), ("beam", Search("beam", beam_size=3)))
    for fast in [name == "greedy" and head in ("softmax", "sigmoid")]
]


@pytest.mark.parametrize(("head", "search"), PATHS)
def test_translate_score_and_the_search_give_one_confidence(symbols, head, search):
    model = harness.tiny_model(symbols.vocab_size, head, max_sequence_length=12, eos_bias=1.0)
    translated = translate_with_confidence(model, symbols, WORDS, search=search)
    searched = translate_nbest(model, symbols, WORDS, search=search)
    texts = [text for text, _ in translated]
    assert texts == [hypotheses[0][0] for hypotheses in searched]
    for (_, confidence), hypotheses in zip(translated, searched, strict=True):
        assert math.log(confidence.sentence) == pytest.approx(hypotheses[0][1], abs=1e-3)
    # `score` reads the same tokens (an empty source is not translated: the model's score of
    # its empty translation is not 0).
    scored = score_with_confidence(model, symbols, WORDS, texts)
    targets = decoded_ids(model, symbols, WORDS, search)
    compared = 0
    for word, (_, confidence), again, target in zip(
        WORDS, translated, scored, targets, strict=True
    ):
        if word and target[-1] == EOS_ID:  # one cut at the output limit is too long to score
            compared += 1
            assert len(again.tokens) == len(target)
            assert again.sentence == pytest.approx(confidence.sentence, rel=1e-4)
            assert again.tokens == pytest.approx(confidence.tokens, rel=1e-4, abs=1e-6)
    assert compared >= 3


SEARCHES = {
    "greedy": Search(),
    "beam": Search("beam", beam_size=3, num_hypotheses=3, length_penalty=0.6),
    "diverse_beam": Search("diverse_beam", beam_size=4, num_hypotheses=4, num_groups=2),
    "sample": Search("sample", num_hypotheses=3, temperature=2.0, seed=7),
}
SEARCH_CASES = [
    pytest.param(head, name, rows, jit, id=f"{head}-{name}-{rows}rows{'-xla' if jit else ''}")
    for head in ("softmax", "sigmoid", "sparsemax")
    for name in SEARCHES
    for rows, jit in ((1, False), (5, False), (5, True))
    if head == "sigmoid" or (rows, jit) == (5, False)
]


SOURCE_IDS = np.array(
    [[5, 6, 7, 1], [8, 1, 0, 0], [9, 10, 11, 1], [12, 13, 1, 0], [4, 1, 0, 0]], np.int32
)


def assert_token_log_scores_are_the_models(model, source_ids, output):
    """Each hypothesis's token log scores are its teacher-forced ones, 0 after its end."""
    ids = output.ids.numpy()
    hypotheses, width = ids.shape[1], ids.shape[2]
    sources = np.repeat(source_ids, hypotheses, axis=0)
    forced = teacher_forced(model, tf.constant(sources), tf.constant(ids.reshape(-1, width)))
    expected = forced.token_scores.numpy().reshape(ids.shape)
    found = output.token_log_scores.numpy()
    lengths = output.lengths.numpy()
    after_end = np.arange(width) >= lengths[..., np.newaxis]
    assert np.all(found[after_end] == 0.0)
    assert lengths.max() > 2  # some hypotheses are more than a token and EOS
    # An untrained model may choose PAD (0), which teacher forcing reads as padding.
    compared = ~after_end & (ids != PAD_ID)
    np.testing.assert_allclose(found[compared], expected[compared], rtol=1e-4, atol=1e-5)
    filled = lengths > 0  # a sparse head may leave a slot empty (score -inf)
    np.testing.assert_allclose(
        found.sum(-1)[filled], output.log_scores.numpy()[filled], rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize(("head", "name", "rows", "jit"), SEARCH_CASES)
def test_every_search_keeps_the_log_score_of_each_token_it_chose(head, name, rows, jit):
    model = harness.tiny_model(20, head, max_sequence_length=10, eos_bias=0.5)
    source_ids = SOURCE_IDS[:rows]
    output = compiled_search(model, SEARCHES[name], jit_compile=jit)(tf.constant(source_ids))
    assert_token_log_scores_are_the_models(model, source_ids, output)


def test_each_experts_hypotheses_keep_their_token_log_scores():
    model = harness.tiny_model(
        20, "sigmoid", max_sequence_length=10, model_class=LatentExpertTransformer, num_experts=2
    )
    source_ids = tf.constant([[5, 6, 7, 1], [8, 1, 0, 0]])
    output = decode_experts(model, source_ids, Search("beam", beam_size=2, num_hypotheses=2))
    assert output.token_log_scores.shape == output.ids.shape
    np.testing.assert_allclose(
        output.token_log_scores.numpy().sum(-1), output.log_scores.numpy(), rtol=1e-5
    )


def test_a_target_the_model_cannot_read_whole_gets_nan(tokenizer):
    model = harness.tiny_model(tokenizer.vocab_size, "sigmoid", max_sequence_length=6)
    long_target = " ".join(["the big green tree"] * 4)
    short, long = score_with_confidence(model, tokenizer, ["a cat", "a cat"], ["dog", long_target])
    assert 0 < short.sentence <= 1 and math.isnan(long.sentence) and math.isnan(long.normalised)
    assert score_with_confidence(model, tokenizer, [], []) == []
    with pytest.raises(ValueError, match="2 sources but 1 targets"):
        score_with_confidence(model, tokenizer, ["a", "b"], ["c"])


def test_confidence_of_hand_made_token_scores():
    confidence = confidence_of([math.log(0.5), math.log(0.8), -math.inf], ["a", "b", EOS_LABEL])
    assert confidence.sentence == 0.0 and confidence.tokens == pytest.approx((0.5, 0.8, 0.0))
    two = confidence_of([math.log(0.5), math.log(0.8)], ["a", EOS_LABEL])
    assert two.sentence == pytest.approx(0.4) and two.normalised == pytest.approx(math.sqrt(0.4))
    assert two.columns() == "0.4" and two.columns(tokens=True) == "0.4\ta:0.5000 </s>:0.8000"
