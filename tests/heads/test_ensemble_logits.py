"""`OutputHead.ensemble_logits`: logits whose probabilities are the mean of N models'."""

import math

import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tfscones import heads

HEADS = list(harness.EVERY_HEAD_AND_BISECTION.values())
HEAD_IDS = list(harness.EVERY_HEAD_AND_BISECTION)


def three_models_logits() -> np.ndarray:
    """Logits `[3 models, 3 rows, 7 tokens]`, random (entmax's rows have zeros)."""
    return np.random.default_rng(7).normal(size=(3, 3, 7)).astype(np.float32) * 4


EXTREME_LOGITS = np.array(
    [
        [1e4, -1e4, 30.0, -30.0, 0.0, 5.0, -5.0],
        [1e4, 1e4, 40.0, -90.0, 0.0, -5.0, 5.0],
        [-1e4, 1e4, 35.0, -60.0, 1.0, 0.0, 0.0],
    ],
    np.float32,
)[:, np.newaxis]
"""Three models' logits of one row `[3, 1, 7]`, as large as float32 logits get in practice."""


def mean_probabilities(head, logits) -> np.ndarray:
    return np.mean([head.probabilities(model).numpy() for model in logits], axis=0)


@pytest.mark.parametrize("head", HEADS, ids=HEAD_IDS)
def test_the_probabilities_of_the_result_are_the_mean_of_the_models(head):
    logits = three_models_logits()
    mean = mean_probabilities(head, logits)
    combined = head.ensemble_logits(tf.constant(logits))
    assert combined.dtype == tf.float32 and combined.shape == (3, 7)
    probabilities = head.probabilities(combined).numpy()
    np.testing.assert_allclose(probabilities, mean, atol=1e-6)
    # Zeros stay exactly zero (only entmax has any), and only they score -inf.
    np.testing.assert_array_equal(probabilities == 0.0, mean == 0.0)
    scores = head.log_scores(combined).numpy()
    np.testing.assert_array_equal(np.isneginf(scores), mean == 0.0)
    kept = mean > 0.0
    np.testing.assert_allclose(scores[kept], np.log(mean[kept]), atol=1e-5)
    # Greedy search takes the argmax of raw logits: it must be that of the mean probability.
    np.testing.assert_array_equal(combined.numpy().argmax(-1), mean.argmax(-1))


@pytest.mark.parametrize("head", HEADS, ids=HEAD_IDS)
def test_extreme_logits_give_finite_logits_in_the_same_order(head):
    combined = head.ensemble_logits(EXTREME_LOGITS).numpy()
    mean = mean_probabilities(head, EXTREME_LOGITS)
    assert np.isfinite(combined).all()
    scores = head.log_scores(combined).numpy()
    assert np.all(scores <= 0.0) and not np.isnan(scores).any()
    np.testing.assert_array_equal(combined.argmax(-1), mean.argmax(-1))
    if not isinstance(head, heads.EntmaxHead):  # (entmax of ±1e4 is not exact in float32)
        np.testing.assert_allclose(head.probabilities(combined).numpy(), mean, atol=1e-6)


@pytest.mark.parametrize("head", HEADS, ids=HEAD_IDS)
def test_one_model_gets_its_own_probabilities_back(head):
    logits = three_models_logits()[:1]
    probabilities = head.probabilities(head.ensemble_logits(logits)).numpy()
    np.testing.assert_allclose(probabilities, head.probabilities(logits[0]).numpy(), atol=1e-6)


@pytest.mark.parametrize("head", HEADS, ids=HEAD_IDS)
def test_half_precision_logits_combine_in_float32(head):
    half = tf.cast(three_models_logits()[:, :3], tf.float16)
    assert head.ensemble_logits(half).dtype == tf.float32


def test_softmax_ensemble_is_the_log_of_the_mean_distribution():
    # softmax([0, 0]) = [1/2, 1/2] and softmax([log 3, 0]) = [3/4, 1/4]: mean [5/8, 3/8].
    logits = tf.constant([[0.0, 0.0], [math.log(3.0), 0.0]])
    combined = heads.SoftmaxHead().ensemble_logits(logits).numpy()
    np.testing.assert_allclose(combined, np.log([5 / 8, 3 / 8]), rtol=1e-6)


def test_sigmoid_ensemble_is_the_logit_of_the_mean_probability():
    # σ(0) = 1/2 and σ(log 3) = 3/4: m = 5/8, logit(m) = log(5/3). Extreme logits: σ(±1e4)
    # average to 1/2 (logit 0); two 1e4 logits stay 1e4; σ(30) and σ(40) average to
    # 1 - (e^-30 + e^-40)/2, whose logit is 30 + log 2 - log(1 + e^-10), which float32 keeps.
    logits = tf.constant(
        [[0.0, 1e4, 1e4, -1e4, 30.0, -30.0], [math.log(3.0), -1e4, 1e4, -1e4, 40.0, -40.0]]
    )
    far = 30.0 + math.log(2.0) - math.log1p(math.exp(-10.0))
    expected = [math.log(5 / 3), 0.0, 1e4, -1e4, far, -far]
    np.testing.assert_allclose(
        heads.SigmoidHead().ensemble_logits(logits).numpy(), expected, rtol=1e-6, atol=1e-6
    )
    # The tanh head's probabilities are σ(2z): the same means at half the logits.
    np.testing.assert_allclose(
        heads.TanhHead().ensemble_logits(logits / 2.0).numpy(),
        np.array(expected) / 2.0,
        rtol=1e-6,
        atol=1e-6,
    )


def test_sparsemax_ensemble_keeps_tokens_no_model_gives_probability():
    # sparsemax([0.5, 0, -5]) = [3/4, 1/4, 0] (threshold -1/4) and its mirror [1/4, 3/4, 0]:
    # mean [1/2, 1/2, 0], whose logits at threshold 0 are p (and -1 for the zero).
    head = heads.EntmaxHead(alpha=2.0)
    combined = head.ensemble_logits(tf.constant([[0.5, 0.0, -5.0], [0.0, 0.5, -5.0]]))
    np.testing.assert_allclose(combined.numpy(), [0.5, 0.5, -1.0], atol=1e-7)
    np.testing.assert_allclose(head.probabilities(combined).numpy(), [0.5, 0.5, 0.0], atol=1e-7)
    scores = head.log_scores(combined).numpy()
    np.testing.assert_allclose(scores[:2], [-math.log(2.0)] * 2, atol=1e-6)
    assert scores[2] == -math.inf


def test_entmax15_ensemble_logits_are_twice_the_square_roots():
    # entmax-1.5 at threshold 0 is p_j = (z_j / 2)^2: [√3, 1, -2] gives [3/4, 1/4, 0] and its
    # mirror [1/4, 3/4, 0]; their mean [1/2, 1/2, 0] has logits 2√p, and -2 for the zero.
    head = heads.EntmaxHead(alpha=1.5)
    root = math.sqrt(3.0)
    logits = tf.constant([[root, 1.0, -2.0], [1.0, root, -2.0]])
    np.testing.assert_allclose(
        head.probabilities(logits).numpy(), [[0.75, 0.25, 0.0], [0.25, 0.75, 0.0]], atol=1e-6
    )
    combined = head.ensemble_logits(logits).numpy()
    np.testing.assert_allclose(combined, [2 * math.sqrt(0.5), 2 * math.sqrt(0.5), -2.0], atol=1e-6)
    np.testing.assert_allclose(head.probabilities(combined).numpy(), [0.5, 0.5, 0.0], atol=1e-6)
