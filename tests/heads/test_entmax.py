import math

import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tests.heads.cases import HEAD_LOGITS, SEQUENCE_LOGITS, SEQUENCE_TARGETS
from tfscones.heads import entmax
from tfscones.ops.entmax import entmax_bisect


@pytest.mark.parametrize("alpha", [2.0, 1.5, 1.3])
def test_entmax_head_scores_are_minus_infinity_exactly_at_zero_probability(alpha):
    head = entmax.EntmaxHead(alpha)
    probabilities = head.probabilities(HEAD_LOGITS).numpy()
    scores = head.log_scores(HEAD_LOGITS).numpy()
    assert (probabilities == 0).any()
    np.testing.assert_array_equal(np.isneginf(scores), probabilities == 0)
    finite = probabilities > 0
    np.testing.assert_allclose(scores[finite], np.log(probabilities[finite]), atol=1e-5)


def tsallis(p, alpha):
    p = np.asarray(p, np.float64)
    return (1.0 - np.sum(p[p > 0] ** alpha)) / (alpha * (alpha - 1.0))


def test_sparsemax_loss_matches_hand_computed_values():
    # z = (2, 1, -1): sparsemax is (1, 0, 0) with τ = 1. For gold y = 1 the classic form
    # -z_y + ½ Σ_{j∈S} (z_j² - τ²) + ½ gives -1 + ½(4 - 1) + ½ = 1.
    logits = np.array([[2.0, 1.0, -1.0]], np.float32)
    assert float(entmax.SparsemaxLoss()(np.array([1]), logits)) == pytest.approx(1.0)
    # With ε = 0.3, q = (0.1, 0.8, 0.1): (p - q)·z = 2 - 0.9 and H_2(q) = (1 - 0.66) / 2.
    smoothed = entmax.SparsemaxLoss(label_smoothing=0.3)(np.array([1]), logits)
    assert float(smoothed) == pytest.approx(1.1 - 0.17, abs=1e-6)


def test_entmax15_loss_matches_hand_computed_values():
    logits = np.array([[1.0, 0.0, -10.0]], np.float32)
    tau = (1.0 - np.sqrt(7.0)) / 4.0
    p = np.array([(0.5 - tau) ** 2, tau**2, 0.0])
    for gold, smoothing in [(0, 0.0), (1, 0.0), (2, 0.2)]:
        q = np.full(3, smoothing / 3)
        q[gold] += 1.0 - smoothing
        expected = (p - q) @ logits[0] + tsallis(p, 1.5) - tsallis(q, 1.5)
        loss = entmax.EntmaxLoss(alpha=1.5, label_smoothing=smoothing)
        assert float(loss(np.array([gold]), logits)) == pytest.approx(expected, abs=1e-5)


def test_entmax_bisection_loss_matches_sort_based_losses():
    for alpha, reference in [(1.5, entmax.EntmaxLoss(1.5)), (2.0, entmax.SparsemaxLoss())]:
        # A bisection-only α that is 1.5 or 2 up to rounding exercises the bisection path.
        bisect = entmax.EntmaxLoss(alpha=alpha + 1e-9, n_iter=80)
        np.testing.assert_allclose(
            bisect(SEQUENCE_TARGETS, SEQUENCE_LOGITS),
            reference(SEQUENCE_TARGETS, SEQUENCE_LOGITS),
            rtol=1e-4,
        )


@pytest.mark.parametrize("alpha, smoothing", [(1.5, 0.0), (2.0, 0.2), (1.3, 0.1)])
def test_fenchel_young_gradient_is_p_minus_q(alpha, smoothing):
    logits = tf.constant(SEQUENCE_LOGITS[1, 0][None])
    gold = int(SEQUENCE_TARGETS[1, 0])
    with tf.GradientTape() as tape:
        tape.watch(logits)
        value = entmax.EntmaxLoss(alpha, smoothing, n_iter=60)(np.array([gold]), logits)
    q = np.full(6, smoothing / 6)
    q[gold] += 1 - smoothing
    expected = entmax_bisect(logits, alpha, n_iter=60).numpy() - q
    np.testing.assert_allclose(tape.gradient(value, logits), expected, atol=1e-5)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 1.25])
@pytest.mark.parametrize("scale", [10.0, 0.01], ids=["partial-sort", "full-fallback"])
def test_entmax_loss_on_long_vocabularies_equals_the_definition(alpha, scale):
    logits = tf.constant(np.random.default_rng(3).normal(size=(2, 3, 300)) * scale, tf.float32)
    targets = np.array([[5, 7, 0], [299, 1, 2]])
    smoothing = 0.1
    p = entmax_bisect(logits, alpha, n_iter=80, top_k=None).numpy().astype(np.float64)
    q = np.full(p.shape, smoothing / 300)
    np.put_along_axis(q, targets[..., None], 1 - smoothing + smoothing / 300, axis=-1)

    def tsallis(distribution):
        return (1 - (distribution**alpha).sum(-1)) / (alpha * (alpha - 1))

    z = logits.numpy().astype(np.float64)
    per_token = ((p - q) * z).sum(-1) + tsallis(p) - tsallis(q)
    loss = entmax.EntmaxLoss(alpha=alpha, label_smoothing=smoothing, n_iter=80)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        value = loss(targets, logits)
    np.testing.assert_allclose(value, per_token[targets != 0].mean(), rtol=1e-4, atol=1e-5)
    expected_gradient = (p - q) * (targets != 0)[..., None] / (targets != 0).sum()
    np.testing.assert_allclose(tape.gradient(value, logits), expected_gradient, atol=1e-6)


def sort_based_entmax_in_float64(logits, alpha):
    """Sparsemax or entmax-1.5 by the sort-based algorithms (Peters et al. 2019, Alg. 2)."""
    scaled, tau = harness.sort_based_entmax_threshold(logits, alpha)
    return np.maximum(scaled - tau, 0.0) ** (1.0 / (alpha - 1.0))


@pytest.mark.parametrize("alpha", [1.5, 2.0])
@pytest.mark.parametrize("masked", [False, True], ids=["finite", "masked"])
def test_compiled_loss_on_a_long_vocabulary_equals_the_definition(alpha, masked):
    # 3,000 logits: the thresholds come from the 1,024 candidates of `entmax_statistics`; with a
    # masked logit the loss takes its masking branch.
    logits = np.random.default_rng(4).normal(size=(2, 3, 3000)).astype(np.float32) * 3
    if masked:
        logits[0, 1, 17] = -math.inf
    targets = np.array([[5, 7, 0], [2999, 1, 2]])
    p = sort_based_entmax_in_float64(logits, alpha)
    q = np.zeros(p.shape)
    np.put_along_axis(q, targets[..., None], 1.0, axis=-1)
    z = np.where(np.isinf(logits), 0.0, logits).astype(np.float64)  # 0 · -inf is 0 here
    per_token = ((p - q) * z).sum(-1) + (1 - (p**alpha).sum(-1)) / (alpha * (alpha - 1))
    loss = entmax.EntmaxLoss(alpha=alpha)

    def value_and_gradient(logits):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            value = loss(targets, logits)
        return value, tape.gradient(value, logits)

    expected_gradient = (p - q) * (targets != 0)[..., None] / (targets != 0).sum()
    for jit_compile in (False, True):
        compiled = tf.function(value_and_gradient, jit_compile=jit_compile)
        value, gradient = compiled(tf.constant(logits))
        np.testing.assert_allclose(value, per_token[targets != 0].mean(), rtol=1e-5)
        np.testing.assert_allclose(gradient, expected_gradient, atol=1e-7)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 1.25])
def test_entmax_loss_with_masked_logits_is_the_loss_over_the_other_tokens(alpha):
    logits = tf.constant([[1.0, -math.inf, 0.5, 2.0, -math.inf], [0.3, 0.1, -math.inf, 0.2, 0.0]])
    kept = [[0, 2, 3], [0, 1, 3, 4]]
    targets = tf.constant([3, 1])
    with tf.GradientTape() as tape:
        tape.watch(logits)
        loss = entmax.entmax_token_loss(targets, logits, alpha)
    gradient = tape.gradient(loss, logits).numpy()
    for row, columns in enumerate(kept):
        sub_target = tf.constant([columns.index(int(targets[row]))])
        sub_logits = tf.gather(logits[row : row + 1], columns, axis=1)
        expected = entmax.entmax_token_loss(sub_target, sub_logits, alpha)
        np.testing.assert_allclose(loss[row], expected[0], rtol=1e-5)
    assert np.all(np.isfinite(gradient)) and gradient[0, 1] == 0 and gradient[1, 2] == 0


def test_entmax_loss_is_infinite_for_a_masked_gold_token_or_smoothing_onto_one():
    logits = tf.constant([[1.0, -math.inf, 0.5], [1.0, -math.inf, 0.5]])
    loss = entmax.entmax_token_loss(tf.constant([1, 0]), logits, 1.5)
    assert loss[0] == math.inf and np.isfinite(loss[1])
    smoothed = entmax.entmax_token_loss(tf.constant([1, 0]), logits, 1.5, label_smoothing=0.1)
    assert np.all(smoothed == math.inf)


def test_entmax_support_size_counts_non_zero_probabilities():
    logits = np.array([[[2.0, 1.0, -1.0], [0.5, 0.3, 0.1]], [[0.0, 0.0, 0.0], [9.0, 0.0, 0.0]]])
    metric = entmax.EntmaxSupportSize(alpha=2.0)
    metric.update_state(np.array([[1, 2], [1, 0]]), logits)  # sparsemax supports 1, 3, 3; pad
    assert float(metric.result()) == pytest.approx(7 / 3)


def bisection_threshold_in_float64(scaled, alpha):
    """τ `[..., 1]` solving Σ [x - τ]_+^(1/(α-1)) = 1 (Peters & Martins 2021, eq. 4), bisected."""
    low = scaled.max(-1, keepdims=True) - 1.0
    width = 1.0
    for _ in range(80):
        width /= 2
        middle = low + width
        mass = (np.maximum(scaled - middle, 0.0) ** (1.0 / (alpha - 1.0))).sum(-1, keepdims=True)
        low = np.where(mass >= 1.0, middle, low)
    return low


@pytest.mark.parametrize("alpha", [2.0, 1.5, 1.3])
def test_entmax_support_size_on_long_and_masked_rows_equals_the_definition(alpha):
    # 3,000 logits (the candidate path for α ∈ {1.5, 2}), one masked logit, padded positions.
    logits = np.random.default_rng(5).normal(size=(2, 3, 3000)).astype(np.float32) * 3
    logits[1, 0, :40] = -math.inf
    targets = np.array([[5, 7, 0], [2999, 1, 2]])
    scaled = (alpha - 1.0) * logits.astype(np.float64)
    expected = (scaled > bisection_threshold_in_float64(scaled, alpha)).sum(-1)
    expected = expected[targets != 0].mean()
    metric = entmax.EntmaxSupportSize(alpha=alpha)
    metric.update_state(targets, tf.constant(logits))
    assert float(metric.result()) == pytest.approx(expected)


@pytest.mark.parametrize("mode", ["eager", "graph", "xla"])
def test_support_size_metric_counts_with_the_thresholds_its_loss_found(mode, monkeypatch):
    searches = []
    search = entmax.entmax_ops.entmax_statistics

    def counted_search(*args):
        searches.append(args[1:])
        return search(*args)

    monkeypatch.setattr(entmax.entmax_ops, "entmax_statistics", counted_search)
    logits = tf.constant(np.random.default_rng(6).normal(size=(2, 3, 3000)).astype(np.float32))
    targets = tf.constant([[5, 7, 0], [2999, 1, 2]])
    loss, shared, other_alpha = (
        entmax.EntmaxLoss(alpha=1.5),
        entmax.EntmaxSupportSize(alpha=1.5),
        entmax.EntmaxSupportSize(alpha=2.0),
    )

    def step(logits):
        logits = tf.identity(logits)  # a tensor of the step, as a model's output is
        value = loss(targets, logits)
        shared.update_state(targets, logits)
        other_alpha.update_state(targets, tf.identity(logits))
        return value

    if mode == "eager":
        step(logits)
    else:
        tf.function(step, jit_compile=mode == "xla")(logits)
    assert searches == [(1.5, 50), (2.0, 50)]  # the loss's, and the other α's own
    alone = entmax.EntmaxSupportSize(alpha=1.5)
    alone.update_state(targets, logits)
    assert float(shared.result()) == pytest.approx(float(alone.result()), rel=1e-6)
