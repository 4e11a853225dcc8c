import math

import numpy as np
import pytest
import tensorflow as tf

from tests.harness import tiny_model
from tfscones.data.vocab_ids import BOS_ID, EOS_ID
from tfscones.evaluation.model_errors import (
    ScoreSummary,
    empty_string_rate,
    empty_translation_scores,
    length_ratio,
    score_summary,
    search_error_rate,
)

VOCAB = 20
SOURCES = [[5, 6, 7, 1], [8, 1], [9, 10, 11, 12, 13, 1], [4, 1], [14, 15, 1]]
NEG_INF = -np.inf


def stepwise_empty_scores(model, source_ids):
    """EOS's log score at the first step of the incremental decoder, one source at a time."""
    stepper, scores = model.stepper(), []
    for source in source_ids:
        source = tf.constant([source])
        encoder_outputs, padding_mask = stepper.encode(source)
        logits, _ = stepper.decode_step(
            tf.constant([BOS_ID]), encoder_outputs, padding_mask, stepper.initial_cache(1, 1), 0
        )
        scores.append(model.head.log_scores(logits)[0, EOS_ID].numpy())
    return np.array(scores)


@pytest.mark.parametrize("head", ["softmax", "sigmoid", "entmax15"])
def test_empty_translation_scores_are_eos_after_bos(head):
    model = tiny_model(VOCAB, head)
    expected = stepwise_empty_scores(model, SOURCES)
    ragged = tf.ragged.constant(SOURCES, dtype=tf.int32)
    scores = empty_translation_scores(model, ragged, batch_size=2)
    assert scores.shape == (len(SOURCES),) and scores.dtype == np.float32
    np.testing.assert_allclose(scores, expected, rtol=1e-5)
    # Dense ids with extra padding score the same.
    padded = ragged.to_tensor(shape=[len(SOURCES), 9]).numpy()
    np.testing.assert_allclose(empty_translation_scores(model, padded), expected, rtol=1e-5)


def test_sigmoid_empty_score_is_log_sigmoid_of_the_eos_logit():
    model = tiny_model(VOCAB, "sigmoid")
    source = np.array([[5, 6, 1]])
    logits = model({"source_ids": source, "target_in_ids": np.array([[BOS_ID]])}, training=False)
    z = float(logits[0, 0, EOS_ID])
    assert empty_translation_scores(model, source)[0] == pytest.approx(
        -math.log1p(math.exp(-z)), rel=1e-5
    )


def test_empty_translation_scores_reject_bad_arguments():
    model = tiny_model(VOCAB, "softmax")
    with pytest.raises(ValueError, match="batch_size"):
        empty_translation_scores(model, np.array([[5, 1]]), batch_size=0)
    with pytest.raises(ValueError, match="no sources"):
        empty_translation_scores(model, np.zeros([0, 3], np.int32))


def test_empty_string_rate_counts_strictly_higher_empty_scores():
    empty = [-1.0, -2.0, NEG_INF, NEG_INF, -3.0, -0.5]
    hypotheses = [-2.0, -2.0, -4.0, NEG_INF, NEG_INF, -0.25]
    # Higher: sentence 0 (-1 > -2) and 4 (-3 > -inf); a tie (1), -inf (2, 3) and lower (5) not.
    assert empty_string_rate(empty, hypotheses) == pytest.approx(2 / 6)
    assert empty_string_rate(np.full(3, NEG_INF), np.array([-5.0, -1.0, -9.0])) == 0.0


def test_search_error_rate_against_hand_counts():
    best = [-10.0, -10.0, -10.0, -0.5, -0.5, -2.0, NEG_INF]
    search = [-10.0, -10.0005, -10.002, -0.50005, -0.5002, NEG_INF, NEG_INF]
    # Allowed gap 1e-4 * max(1, |best|): 1e-3 for -10, 1e-4 for -0.5. Errors: -10.002 (gap
    # 2e-3), -0.5002 (2e-4) and -inf below -2; not -10.0005, -0.50005, or -inf below -inf.
    assert search_error_rate(search, best) == pytest.approx(3 / 7)
    assert search_error_rate(search, best, tolerance=0.0) == pytest.approx(5 / 7)
    assert search_error_rate(search, best, tolerance=1e-2) == pytest.approx(1 / 7)


def test_search_error_rate_rejects_scores_above_the_best():
    assert search_error_rate([-9.9995], [-10.0]) == 0.0  # within the tolerance
    with pytest.raises(ValueError, match=r"sentences \[1\]"):
        search_error_rate([-10.0, -9.99], [-10.0, -10.0])
    with pytest.raises(ValueError, match=r"sentences \[0\]"):
        search_error_rate([-50.0], [NEG_INF])
    for tolerance in (-1e-3, float("nan")):
        with pytest.raises(ValueError, match=r"tolerance must be a finite number in \[0, inf\)"):
            search_error_rate([-1.0], [-1.0], tolerance=tolerance)


@pytest.mark.parametrize(
    "first, second, message",
    [
        ([-1.0, -2.0], [-1.0], "differ in shape"),
        ([], [], "empty"),
        ([np.nan], [-1.0], "NaN"),
        ([-1.0], [np.inf], r"\+inf"),
    ],
)
def test_score_comparisons_reject_invalid_scores(first, second, message):
    with pytest.raises(ValueError, match=message):
        empty_string_rate(first, second)
    with pytest.raises(ValueError, match=message):
        search_error_rate(first, second)


def test_length_ratio_counts_tokens_as_bleu_does():
    # 13a splits off the full stop: "the cat sat." is 4 tokens, "hello" 1; the references
    # "the cat sat on the mat." and "hello world" are 7 and 2: 5 / 9.
    hypotheses = ["the cat sat.", "hello"]
    assert length_ratio(hypotheses, ["the cat sat on the mat.", "hello world"]) == 5 / 9
    # Several streams: each sentence's closest reference length (4 and 1): 5 / 5.
    streams = [["the cat sat on the mat.", "hello"], ["a cat sat .", "hello world"]]
    assert length_ratio(hypotheses, streams) == 1.0
    with pytest.raises(ValueError, match="no token"):
        length_ratio(["a"], [""])


def test_score_summary_sets_negative_infinity_apart():
    assert score_summary([-1.0, NEG_INF, -3.0, -5.0, NEG_INF]) == ScoreSummary(
        mean=-3.0, std=math.sqrt(8 / 3), num_finite=3, num_neg_inf=2
    )
    assert score_summary(np.array([-2.0])) == ScoreSummary(-2.0, 0.0, 1, 0)
    summary = score_summary([NEG_INF, NEG_INF])
    assert math.isnan(summary.mean) and math.isnan(summary.std)
    assert (summary.num_finite, summary.num_neg_inf) == (0, 2)
    with pytest.raises(ValueError, match="NaN"):
        score_summary([-1.0, np.nan])
    with pytest.raises(ValueError, match="empty"):
        score_summary([])
