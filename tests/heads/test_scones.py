import math

import numpy as np
import pytest
import tensorflow as tf

from tests.heads.cases import HEAD_LOGITS, SEQUENCE_LOGITS, SEQUENCE_TARGETS
from tfscones.heads import scones


def log_sigmoid(z):
    return -math.log1p(math.exp(-z)) if z >= 0 else z - math.log1p(math.exp(z))


def scones_by_hand(logits, gold, alpha, smoothing):
    """SCONES eq. 6 with eq. 11-12, written with log σ exactly as the paper states them."""
    positive = -(1 - smoothing) * log_sigmoid(logits[gold]) - smoothing * log_sigmoid(-logits[gold])
    negative = sum(
        -(1 - smoothing) * log_sigmoid(-z) - smoothing * log_sigmoid(z)
        for w, z in enumerate(logits)
        if w != gold
    )
    return positive + alpha * negative


def jax_listing_in_numpy(logits, targets, smoothing, alpha):
    """Stahlberg & Kumar (2022), Figure 10 (the JAX listing), line by line, 1e-30 clamp too."""
    true_logprob = -np.logaddexp(0.0, -logits)
    false_logprob = np.log(np.maximum(1.0 - np.exp(true_logprob), 1.0e-30))
    tgt_true_logprob = np.take_along_axis(true_logprob, targets[..., None], -1)[..., 0]
    tgt_false_logprob = np.take_along_axis(false_logprob, targets[..., None], -1)[..., 0]
    tgt_true_xent = -(1.0 - smoothing) * tgt_true_logprob - smoothing * tgt_false_logprob
    tgt_false_xent = -(1.0 - smoothing) * tgt_false_logprob - smoothing * tgt_true_logprob
    all_false_xent = -(1.0 - smoothing) * false_logprob - smoothing * true_logprob
    loss = alpha * (np.sum(all_false_xent, axis=-1) - tgt_false_xent) + tgt_true_xent
    weights = np.where(targets > 0, 1, 0).astype(np.float64)
    return (loss * weights / weights.sum()).sum()


def test_sigmoid_head_scores_are_log_sigmoid_and_exact_for_extreme_logits():
    head = scones.SigmoidHead()
    scores = head.log_scores(HEAD_LOGITS).numpy()
    assert scores[0, 3] == pytest.approx(-30.0, rel=1e-6)
    assert scores[1, 1] == pytest.approx(-1e4)
    assert scores[1, 0] == 0.0
    assert scores[0, 0] == pytest.approx(-math.log1p(math.exp(-2.0)))
    # Unnormalised: several tokens can be near-certain at once.
    assert head.probabilities(tf.constant([9.0, 9.0, -9.0])).numpy().sum() > 1.9


def test_sigmoid_output_bias_starts_at_minus_log_vocabulary():
    bias = scones.SigmoidHead().output_bias_initializer(32000)(shape=(4,))
    np.testing.assert_allclose(bias, -math.log(32000), rtol=1e-6)


@pytest.mark.parametrize("alpha, smoothing", [(1.0, 0.0), (0.5, 0.0), (0.2, 0.1), (0.7, 0.3)])
def test_scones_matches_the_equations_by_hand_with_padding(alpha, smoothing):
    per_token = [
        scones_by_hand(SEQUENCE_LOGITS[b, t].tolist(), SEQUENCE_TARGETS[b, t], alpha, smoothing)
        for b in range(2)
        for t in range(4)
        if SEQUENCE_TARGETS[b, t] != 0
    ]
    loss = scones.SconesLoss(alpha=alpha, label_smoothing=smoothing)
    np.testing.assert_allclose(loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS), np.mean(per_token), 1e-5)


@pytest.mark.parametrize("alpha, smoothing", [(1.0, 0.0), (0.5, 0.2), (0.3, 0.9)])
def test_scones_equals_the_jax_listing_where_its_clamp_is_inactive(alpha, smoothing):
    loss = scones.SconesLoss(alpha=alpha, label_smoothing=smoothing)
    expected = jax_listing_in_numpy(
        SEQUENCE_LOGITS.astype(np.float64), SEQUENCE_TARGETS, smoothing, alpha
    )
    np.testing.assert_allclose(loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS), expected, rtol=1e-5)


def test_scones_is_exact_where_the_jax_clamp_is_active():
    # σ(100) rounds to 1, so the listing clamps log(1 - σ) at log(1e-30) ≈ -69.1; the true
    # value, and ours, is -100 (up to e^-100).
    logits = np.array([[[0.0, 0.0, 100.0]]])
    targets = np.array([[1]])
    ours = float(scones.SconesLoss()(targets, logits))
    assert ours == pytest.approx(2 * math.log(2) + 100.0, rel=1e-6)
    assert jax_listing_in_numpy(logits, targets, 0.0, 1.0) == pytest.approx(
        2 * math.log(2) + 30 * math.log(10), rel=1e-6
    )


METRIC_LOGITS = np.random.default_rng(0).normal(size=(2, 3, 5)).astype(np.float32) * 2
METRIC_TARGETS = np.array([[4, 2, 0], [1, 0, 0]])


def softplus(z):
    return np.logaddexp(0.0, z)


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_scones_terms_are_averaged_over_non_pad_tokens(smoothing):
    positives, negatives = [], []
    for b, t in zip(*np.nonzero(METRIC_TARGETS), strict=True):
        z, gold = METRIC_LOGITS[b, t].astype(np.float64), METRIC_TARGETS[b, t]
        positives.append((1 - smoothing) * softplus(-z[gold]) + smoothing * softplus(z[gold]))
        others = np.delete(z, gold)
        negatives.append(np.sum((1 - smoothing) * softplus(others) + smoothing * softplus(-others)))
    positive = scones.SconesPositiveTerm(label_smoothing=smoothing)
    negative = scones.SconesNegativeTerm(label_smoothing=smoothing)
    positive.update_state(METRIC_TARGETS, METRIC_LOGITS)
    negative.update_state(METRIC_TARGETS, METRIC_LOGITS)
    assert float(positive.result()) == pytest.approx(np.mean(positives), rel=1e-5)
    assert float(negative.result()) == pytest.approx(np.mean(negatives), rel=1e-5)
    alpha = 0.4
    loss = scones.SconesLoss(alpha=alpha, label_smoothing=smoothing)(METRIC_TARGETS, METRIC_LOGITS)
    assert float(loss) == pytest.approx(
        float(positive.result()) + alpha * float(negative.result()), rel=1e-5
    )


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_softplus_sum_equals_a_float64_sum_of_softplus(jit_compile):
    # 37 logits per row (two groups of 16 and a padded one), from -90 to 90, and -inf.
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(2, 3, 37)) * np.array([0.1, 4.0, 30.0])[:, np.newaxis]
    logits[0, 0, 5] = -np.inf
    logits[1, 2, :2] = [-90.0, 90.0]
    softplus_sum = tf.function(scones.softplus_sum, jit_compile=jit_compile)
    total = softplus_sum(tf.constant(logits, tf.float32))
    z = logits.astype(np.float32).astype(np.float64)
    expected = (np.maximum(z, 0) + np.log1p(np.exp(-np.abs(z)))).sum(-1)
    np.testing.assert_allclose(total, expected, rtol=2e-7, atol=4e-6)
