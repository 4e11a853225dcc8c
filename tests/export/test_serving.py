"""TranslationModule in process: its signatures against the library's decoders, and its limits."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tests.export.conftest import BEAM_SIZE, NBEST
from tfscones.data.vocab_ids import BOS_ID, EOS_ID
from tfscones.decoding import (
    OutputLimits,
    Search,
    greedy_decode,
    score_texts,
    source_ids_for_model,
    translate,
    translate_nbest,
)
from tfscones.decoding.beam import beam_search
from tfscones.serving import RequestLimits, TranslationModule, standard_searches
from tfscones.serving.module import decoder_state_bytes

BEAM = 4


def texts(tensor) -> list[str]:
    return [value.decode("utf-8") for value in np.asarray(tensor).reshape(-1)]


def source_ids(module, sentences) -> tf.RaggedTensor:
    limit = module.limits.max_source_tokens
    return source_ids_for_model(module.tokenizer, tf.constant(sentences), limit)


def test_translate_equals_the_library_translate_and_greedy_decode(module, sentences):
    output = module.translate(tf.constant(sentences))

    assert texts(output["translations"]) == translate(module.model, module.tokenizer, sentences)
    greedy = greedy_decode(module.model, source_ids(module, sentences).to_tensor())
    np.testing.assert_allclose(output["scores"], greedy.scores, rtol=1e-5)


def beam_reference(module, sentences, num_hypotheses):
    output = beam_search(
        module.model,
        source_ids(module, sentences).to_tensor(),
        beam_size=BEAM_SIZE,
        num_hypotheses=num_hypotheses,
        max_length=module.limits.max_output_tokens,
    )
    return module.tokenizer.detokenize(output.ids).numpy(), output


def test_nbest_equals_the_library_beam_search(module, sentences):
    output = module.nbest(tf.constant(sentences))

    n = NBEST
    assert n > 1 and output["translations"].shape == [len(sentences), n]
    expected_texts, expected = beam_reference(module, sentences, n)
    np.testing.assert_array_equal(output["translations"].numpy(), expected_texts)
    np.testing.assert_allclose(output["scores"], expected.scores, rtol=1e-5)
    np.testing.assert_allclose(output["log_scores"], expected.log_scores, rtol=1e-5)
    scores = output["scores"].numpy()
    assert np.all(scores[:, :-1] >= scores[:, 1:])


def test_translate_beam_equals_the_library_beam_search_best(module, sentences):
    output = module.translate_beam(tf.constant(sentences))

    expected_texts, expected = beam_reference(module, sentences, 1)
    np.testing.assert_array_equal(output["translations"].numpy(), expected_texts[:, 0])
    np.testing.assert_allclose(output["scores"], expected.scores[:, 0], rtol=1e-5)


def test_translate_ids_equals_greedy_decode_and_ignores_ids_after_the_end(module, sentences):
    ids = source_ids(module, sentences)
    expected = greedy_decode(module.model, ids.to_tensor())
    # Whatever follows a row's EOS (a batching server pads with arbitrary ids) is ignored.
    width = module.limits.max_source_tokens
    assert int(tf.reduce_min(ids.row_lengths())) < width - 1
    padded = ids.to_tensor(default_value=7, shape=[None, width])
    output = module.translate_ids(padded)

    np.testing.assert_array_equal(output["ids"], expected.ids)
    np.testing.assert_array_equal(output["lengths"], expected.lengths)
    np.testing.assert_allclose(output["scores"], expected.scores, rtol=1e-5)


def test_translate_ids_rejects_ids_outside_the_vocabulary_and_overlong_rows(module):
    for ids, message in [
        ([[5, module.tokenizer.vocab_size, EOS_ID]], "vocabulary size"),
        ([[5, -1, EOS_ID]], ">= 0"),
        ([[5] * (module.limits.max_source_tokens + 1)], "max_source_tokens"),
    ]:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            module.translate_ids(tf.constant(ids, tf.int32))


def test_empty_and_blank_sources_translate_to_the_empty_string(module, sentences):
    """As in the library: one hypothesis, the empty one, score 0; other n-best slots -inf."""
    mixed = ["", sentences[0], "   ", sentences[1], "\t \u3000\n"]
    for name in ("translate", "translate_beam", "nbest"):
        output = getattr(module, name)(tf.constant(mixed))
        alone = getattr(module, name)(tf.constant(sentences[:2]))

        translations, scores = output["translations"].numpy(), output["scores"].numpy()
        assert np.all(translations[0::2] == b""), name
        scores = scores[0::2].reshape(3, -1)
        np.testing.assert_array_equal(scores[:, 0], 0.0)
        np.testing.assert_array_equal(scores[:, 1:], -np.inf)
        np.testing.assert_array_equal(output["log_scores"].numpy()[0::2].reshape(3, -1), scores)
        np.testing.assert_array_equal(translations[1::2], alone["translations"].numpy())


def test_invalid_utf8_translates_like_its_repaired_text(module):
    broken = [b"Guten \xff\xfe Morgen", b"Sch\xc3", b"\x80"]
    repaired = ["Guten \ufffd\ufffd Morgen", "Sch\ufffd", "\ufffd"]

    output = module.translate(tf.constant(broken))

    assert texts(output["translations"]) == texts(
        module.translate(tf.constant(repaired))["translations"]
    )
    assert texts(output["translations"])[0]


def test_long_sources_are_cut_to_the_token_limit(module, demo_sentences):
    limit = module.limits.max_source_tokens
    head = " ".join(demo_sentences("train", 40))
    assert len(module.tokenizer.tokenize(tf.constant(head))) > limit
    long_sources = [(head + " Hallo Welt" * 1000)[:10_000], head + " ö" * 5000, head]
    assert len(long_sources[0]) == 10_000

    output = module.translate(tf.constant(long_sources))

    translations = texts(output["translations"])
    assert len(set(translations)) == 1 and translations[0]
    cut = source_ids(module, [head])
    assert cut.row_lengths().numpy().tolist() == [limit]
    assert int(cut[0, -1]) == EOS_ID
    by_ids = module.translate_ids(cut.to_tensor())
    assert texts(module.tokenizer.detokenize(by_ids["ids"])) == translations[:1]


def test_a_request_over_the_batch_limit_is_rejected_with_the_limit_in_the_message(module):
    limit = module.limits.max_batch_size
    ok = module.translate(tf.constant(["Hallo."] * limit))
    assert ok["translations"].shape == [limit]

    too_many = tf.constant(["Hallo."] * (limit + 1))
    pattern = f"at most {limit} sentences.*max_batch_size"
    for name in ("translate", "translate_beam", "nbest"):
        with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
            getattr(module, name)(too_many)
    with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
        module.score(too_many, too_many)
    with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
        module.translate_ids(tf.ones([limit + 1, 3], tf.int32))


def test_an_empty_batch_gives_empty_outputs(module):
    empty = tf.constant([], tf.string)
    assert module.translate(empty)["translations"].shape == [0]
    assert module.nbest(empty)["translations"].shape == [0, NBEST]
    assert module.score(empty, empty)["scores"].shape == [0]
    assert module.translate_ids(tf.zeros([0, 4], tf.int32))["lengths"].shape == [0]


def step_by_step_scores(module, source, target):
    """Teacher-forced head log scores of `target` (cut, + EOS), one decode_step at a time."""
    stepper, tokenizer = module.model.stepper(), module.tokenizer
    encoder_outputs, mask = stepper.encode(source_ids(module, [source]).to_tensor())
    pieces = tokenizer.tokenize(tf.constant(target)).numpy().tolist()
    target_ids = pieces[: module.limits.max_output_tokens - 1] + [EOS_ID]
    cache = stepper.initial_cache(1, len(target_ids))
    scores, previous = [], BOS_ID
    for index, token in enumerate(target_ids):
        logits, cache = stepper.decode_step(
            tf.constant([previous]), encoder_outputs, mask, cache, index
        )
        scores.append(float(stepper.head.log_scores(logits)[0, token]))
        previous = token
    return np.array(scores)


def test_score_equals_step_by_step_teacher_forcing(module, sentences, targets):
    sources, targets = sentences[:3], targets[:3]
    output = module.score(tf.constant(sources), tf.constant(targets))

    for row, (source, target) in enumerate(zip(sources, targets, strict=True)):
        expected = step_by_step_scores(module, source, target)
        length = int(output["lengths"][row])
        assert length == len(expected)
        np.testing.assert_allclose(output["token_scores"][row, :length], expected, atol=1e-4)
        np.testing.assert_array_equal(output["token_scores"][row, length:], 0.0)
        if output["target_truncated"][row]:  # only its beginning was read: no score
            assert np.isnan(output["scores"][row])
        else:
            np.testing.assert_allclose(output["scores"][row], expected.sum(), atol=1e-3)
    # SCONES: each token's score is log P(z=1 | x, y<i), so it is below 0.
    assert np.all(output["token_scores"].numpy() <= 0.0)


def test_score_never_scores_a_cut_target_and_needs_one_target_per_source(module):
    limit = module.limits.max_output_tokens
    output = module.score(tf.constant(["Hallo.", "Hallo."]), tf.constant(["word " * 500, "Hi."]))
    assert np.isnan(output["scores"][0]) and np.isfinite(output["scores"][1])
    assert output["target_truncated"].numpy().tolist() == [True, False]
    assert output["source_truncated"].numpy().tolist() == [False, False]
    assert int(output["lengths"][0]) == limit

    with pytest.raises(tf.errors.InvalidArgumentError, match="as many targets as sources"):
        module.score(tf.constant(["a", "b"]), tf.constant(["a"]))


def test_the_library_scores_strings_as_the_signature_does(module, sentences, targets):
    sources = [*sentences[:4], "Hallo."]
    candidates = [*targets[:4], "word " * 500]  # the last is too long to score whole
    expected = module.score(tf.constant(sources), tf.constant(candidates))["scores"].numpy()
    scores = score_texts(module.model, module.tokenizer, sources, candidates, batch_size=2)
    assert np.isnan(scores[-1]) and np.isnan(expected[-1])
    np.testing.assert_allclose(scores[:-1], expected[:-1], rtol=1e-5, atol=1e-4)
    assert score_texts(module.model, module.tokenizer, [], []).shape == (0,)
    with pytest.raises(ValueError, match="2 sources but 1 targets"):
        score_texts(module.model, module.tokenizer, ["a", "b"], ["a"])
    with pytest.raises(TypeError, match="not a string"):
        score_texts(module.model, module.tokenizer, "a", "a")


def test_invalid_settings_are_rejected(model, tokenizer):
    with pytest.raises(ValueError, match=r"nbest must be a whole number in \[1, 2\] \(got 3\)"):
        standard_searches(beam_size=2, nbest=3)
    with pytest.raises(ValueError, match="max_batch_size"):
        RequestLimits(max_batch_size=0)
    with pytest.raises(ValueError, match="length_penalty"):
        standard_searches(length_penalty=-0.5)
    with pytest.raises(ValueError, match="max_length_a"):
        RequestLimits(output=OutputLimits(max_length_a=-1.0))
    with pytest.raises(ValueError, match="max_output_tokens must be a whole number in"):
        TranslationModule(model, tokenizer, limits=RequestLimits(output=OutputLimits(10**6)))
    with pytest.raises(ValueError, match="sets its own output limits"):
        TranslationModule(model, tokenizer, {"short": Search(limits=OutputLimits(5))})
    with pytest.raises(ValueError, match="cannot be called 'score'"):
        TranslationModule(model, tokenizer, {"score": Search()})
    with pytest.raises(ValueError, match="the experts search needs a model with latent experts"):
        TranslationModule(model, tokenizer, {"experts": Search("experts")})

    class OtherVocabulary:
        vocab_size = tokenizer.vocab_size + 1

    with pytest.raises(ValueError, match="same run"):
        TranslationModule(model, OtherVocabulary())


def test_limits_default_to_the_model(model, tokenizer):
    limits = TranslationModule(model, tokenizer).limits
    assert limits.max_source_tokens == limits.max_output_tokens == model.max_sequence_length
    assert limits.max_source_characters >= 8 * limits.max_source_tokens


def test_every_path_gives_an_empty_source_the_empty_translation(module, sentences):
    """The library, the command (which calls it) and the SavedModel agree on empty sources."""
    mixed = ["", sentences[0], "   ", "\t\u3000"]
    assert translate(module.model, module.tokenizer, mixed) == [
        "",
        translate(module.model, module.tokenizer, sentences[:1])[0],
        "",
        "",
    ]
    nbest = translate_nbest(
        module.model, module.tokenizer, mixed, search=Search("beam", beam_size=3, num_hypotheses=3)
    )
    assert nbest[0] == nbest[2] == nbest[3] == [("", 0.0)]
    assert len(nbest[1]) == 3

    real = source_ids(module, sentences[:1]).to_tensor()[0].numpy().tolist()
    rows = [[0] * len(real), [EOS_ID, *real[:-1]], real]
    output = module.translate_ids(tf.constant(rows, tf.int32))
    alone = module.translate_ids(tf.constant([real], tf.int32))
    for row in (0, 1):
        assert output["ids"][row, 0] == EOS_ID and not np.any(output["ids"][row, 1:])
        assert output["lengths"][row] == 1 and output["scores"][row] == 0.0
    np.testing.assert_array_equal(output["ids"][2], alone["ids"][0])


def test_every_text_signature_says_which_sources_it_cut(module, sentences):
    long = " ".join(sentences * 20)  # more pieces than max_source_tokens
    huge = "x" * (module.limits.max_source_characters + 1)  # more characters than allowed
    batch = tf.constant(["Ja.", long, huge])
    for name in ("translate", "translate_beam", "nbest"):
        cut = getattr(module, name)(batch)["source_truncated"].numpy().tolist()
        assert cut == [False, True, True], name
    assert module.score(batch, batch)["source_truncated"].numpy().tolist() == [False, True, True]


def test_settings_whose_full_request_exceeds_the_memory_budget_are_refused(model, tokenizer):
    one_sentence = decoder_state_bytes(
        model, BEAM, model.max_sequence_length, model.max_sequence_length
    )
    # 4 bytes x beams x (2 caches x layers x width x (source + output positions) + vocabulary)
    caches = 2 * model.num_decoder_layers * model.hidden_dim * 2 * model.max_sequence_length
    assert one_sentence == 4 * BEAM * (caches + model.vocabulary_size)

    budget = 10 * one_sentence
    searches = standard_searches(beam_size=BEAM)
    limits = RequestLimits(max_batch_size=10, max_request_bytes=budget)
    fits = TranslationModule(model, tokenizer, searches, limits)
    assert fits.limits.max_request_bytes == budget
    with pytest.raises(ValueError, match=r"a full request \(11 sentences x 4 beams .*GiB"):
        limits = dataclasses.replace(limits, max_batch_size=11)
        TranslationModule(model, tokenizer, searches, limits)
