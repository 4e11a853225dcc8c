import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfscones import losses
from tfscones.activations import entmax_bisect


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
    """Seed 001, Figure 10, line by line in NumPy (including its 1e-30 clamp)."""
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


SEQUENCE_LOGITS = np.random.default_rng(0).normal(size=(2, 4, 6)).astype(np.float32) * 3
SEQUENCE_TARGETS = np.array([[2, 5, 1, 0], [4, 1, 0, 0]])


@pytest.mark.parametrize("alpha, smoothing", [(1.0, 0.0), (0.5, 0.0), (0.2, 0.1), (0.7, 0.3)])
def test_scones_matches_the_equations_by_hand_with_padding(alpha, smoothing):
    per_token = [
        scones_by_hand(SEQUENCE_LOGITS[b, t].tolist(), SEQUENCE_TARGETS[b, t], alpha, smoothing)
        for b in range(2)
        for t in range(4)
        if SEQUENCE_TARGETS[b, t] != 0
    ]
    loss = losses.SconesLoss(alpha=alpha, label_smoothing=smoothing)
    np.testing.assert_allclose(loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS), np.mean(per_token), 1e-5)


@pytest.mark.parametrize("alpha, smoothing", [(1.0, 0.0), (0.5, 0.2), (0.3, 1.0)])
def test_scones_equals_the_jax_listing_where_its_clamp_is_inactive(alpha, smoothing):
    loss = losses.SconesLoss(alpha=alpha, label_smoothing=smoothing)
    expected = jax_listing_in_numpy(
        SEQUENCE_LOGITS.astype(np.float64), SEQUENCE_TARGETS, smoothing, alpha
    )
    np.testing.assert_allclose(loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS), expected, rtol=1e-5)


def test_scones_is_exact_where_the_jax_clamp_is_active():
    # σ(100) rounds to 1, so the listing clamps log(1 - σ) at log(1e-30) ≈ -69.1; the true
    # value, and ours, is -100 (up to e^-100).
    logits = np.array([[[0.0, 0.0, 100.0]]])
    targets = np.array([[1]])
    ours = float(losses.SconesLoss()(targets, logits))
    assert ours == pytest.approx(2 * math.log(2) + 100.0, rel=1e-6)
    assert jax_listing_in_numpy(logits, targets, 0.0, 1.0) == pytest.approx(
        2 * math.log(2) + 30 * math.log(10), rel=1e-6
    )


def tsallis(p, alpha):
    p = np.asarray(p, np.float64)
    return (1.0 - np.sum(p[p > 0] ** alpha)) / (alpha * (alpha - 1.0))


def test_sparsemax_loss_matches_hand_computed_values():
    # z = (2, 1, -1): sparsemax is (1, 0, 0) with τ = 1. For gold y = 1 the classic form
    # -z_y + ½ Σ_{j∈S} (z_j² - τ²) + ½ gives -1 + ½(4 - 1) + ½ = 1.
    logits = np.array([[2.0, 1.0, -1.0]], np.float32)
    assert float(losses.SparsemaxLoss()(np.array([1]), logits)) == pytest.approx(1.0)
    # With ε = 0.3, q = (0.1, 0.8, 0.1): (p - q)·z = 2 - 0.9 and H_2(q) = (1 - 0.66) / 2.
    smoothed = losses.SparsemaxLoss(label_smoothing=0.3)(np.array([1]), logits)
    assert float(smoothed) == pytest.approx(1.1 - 0.17, abs=1e-6)


def test_entmax15_loss_matches_hand_computed_values():
    logits = np.array([[1.0, 0.0, -10.0]], np.float32)
    tau = (1.0 - np.sqrt(7.0)) / 4.0
    p = np.array([(0.5 - tau) ** 2, tau**2, 0.0])
    for gold, smoothing in [(0, 0.0), (1, 0.0), (2, 0.2)]:
        q = np.full(3, smoothing / 3)
        q[gold] += 1.0 - smoothing
        expected = (p - q) @ logits[0] + tsallis(p, 1.5) - tsallis(q, 1.5)
        loss = losses.EntmaxLoss(alpha=1.5, label_smoothing=smoothing)
        assert float(loss(np.array([gold]), logits)) == pytest.approx(expected, abs=1e-5)


def test_entmax_bisection_loss_matches_sort_based_losses():
    for alpha, reference in [(1.5, losses.EntmaxLoss(1.5)), (2.0, losses.SparsemaxLoss())]:
        # A bisection-only α that is 1.5 or 2 up to rounding exercises the bisection path.
        bisect = losses.EntmaxLoss(alpha=alpha + 1e-9, n_iter=80)
        np.testing.assert_allclose(
            bisect(SEQUENCE_TARGETS, SEQUENCE_LOGITS),
            reference(SEQUENCE_TARGETS, SEQUENCE_LOGITS),
            rtol=1e-4,
        )


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_matches_smoothed_target_by_hand(smoothing):
    log_probabilities = SEQUENCE_LOGITS - np.log(np.exp(SEQUENCE_LOGITS).sum(-1, keepdims=True))
    q = np.full(SEQUENCE_LOGITS.shape, smoothing / 6)
    np.put_along_axis(q, SEQUENCE_TARGETS[..., None], 1 - smoothing + smoothing / 6, axis=-1)
    per_token = -(q * log_probabilities).sum(-1)
    expected = per_token[SEQUENCE_TARGETS != 0].mean()
    loss = losses.SequenceCrossEntropy(label_smoothing=smoothing)
    np.testing.assert_allclose(loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS), expected, rtol=1e-5)


ALL_LOSSES = [
    losses.SconesLoss(alpha=0.5, label_smoothing=0.1),
    losses.EntmaxLoss(alpha=1.5, label_smoothing=0.1),
    losses.EntmaxLoss(alpha=1.25),
    losses.SparsemaxLoss(label_smoothing=0.05),
    losses.SequenceCrossEntropy(label_smoothing=0.1),
]
LOSS_IDS = ["scones", "entmax15", "entmax-bisect", "sparsemax", "cross-entropy"]


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=LOSS_IDS)
def test_gradient_equals_finite_differences(loss):
    logits = tf.constant(SEQUENCE_LOGITS[:1, :2] / 3)
    targets = tf.constant(SEQUENCE_TARGETS[:1, :2])
    theoretical, numerical = tf.test.compute_gradient(
        lambda z: loss(targets, z), [logits], delta=1e-3
    )
    np.testing.assert_allclose(theoretical[0], numerical[0], atol=5e-3)


@pytest.mark.parametrize("alpha, smoothing", [(1.5, 0.0), (2.0, 0.2), (1.3, 0.1)])
def test_fenchel_young_gradient_is_p_minus_q(alpha, smoothing):
    logits = tf.constant(SEQUENCE_LOGITS[1, 0][None])
    gold = int(SEQUENCE_TARGETS[1, 0])
    with tf.GradientTape() as tape:
        tape.watch(logits)
        value = losses.EntmaxLoss(alpha, smoothing, n_iter=60)(np.array([gold]), logits)
    q = np.full(6, smoothing / 6)
    q[gold] += 1 - smoothing
    expected = entmax_bisect(logits, alpha, n_iter=60).numpy() - q
    np.testing.assert_allclose(tape.gradient(value, logits), expected, atol=1e-5)


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=LOSS_IDS)
def test_extreme_logits_give_finite_loss_and_gradients(loss):
    logits = tf.constant(
        np.where(np.random.default_rng(1).random((2, 4, 6)) > 0.5, 1e4, -1e4), tf.float32
    )
    with tf.GradientTape() as tape:
        tape.watch(logits)
        value = loss(SEQUENCE_TARGETS, logits)
    gradient = tape.gradient(value, logits)
    assert np.isfinite(value.numpy())
    assert np.isfinite(gradient.numpy()).all()


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=LOSS_IDS)
def test_pads_get_no_loss_and_no_gradient(loss):
    logits = tf.constant(SEQUENCE_LOGITS)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        value = loss(SEQUENCE_TARGETS, logits)
    gradient = tape.gradient(value, logits).numpy()
    assert np.all(gradient[SEQUENCE_TARGETS == 0] == 0)
    # Changing the logits at pad positions changes nothing.
    noisy = SEQUENCE_LOGITS + 50.0 * (SEQUENCE_TARGETS == 0)[..., None]
    np.testing.assert_allclose(loss(SEQUENCE_TARGETS, noisy), value, rtol=1e-6)


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=LOSS_IDS)
def test_classification_shapes_keep_class_zero(loss):
    logits = SEQUENCE_LOGITS[0]  # [batch 4, classes 6]
    labels = np.array([0, 3, 0, 5])
    per_example = [float(loss(labels[i : i + 1], logits[i : i + 1])) for i in range(4)]
    assert float(loss(labels, logits)) == pytest.approx(np.mean(per_example), rel=1e-5)
    assert float(loss(labels[:, None], logits)) == pytest.approx(np.mean(per_example), rel=1e-5)
    assert per_example[0] > 0


def test_sample_weights_weight_tokens_within_the_non_pad_mean():
    loss = losses.SconesLoss()
    first_only = loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS, sample_weight=np.array([1.0, 0.0]))
    np.testing.assert_allclose(first_only, loss(SEQUENCE_TARGETS[:1], SEQUENCE_LOGITS[:1]), 1e-6)


def test_an_all_pad_batch_has_zero_loss():
    assert float(losses.SconesLoss()(np.zeros((2, 4), int), SEQUENCE_LOGITS)) == 0.0


def test_low_precision_logits_are_computed_in_float32():
    loss = losses.EntmaxLoss(1.5)
    half = loss(SEQUENCE_TARGETS, tf.constant(SEQUENCE_LOGITS, tf.float16))
    assert half.dtype == tf.float32
    np.testing.assert_allclose(half, loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS), rtol=1e-2)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: losses.SconesLoss(alpha=0.0), "SCONES alpha must be > 0"),
        (lambda: losses.SconesLoss(alpha=-1.0), "SCONES alpha must be > 0"),
        (lambda: losses.SconesLoss(label_smoothing=1.5), r"label_smoothing must lie in \[0, 1\]"),
        (lambda: losses.EntmaxLoss(label_smoothing=-0.1), r"label_smoothing must lie in \[0, 1\]"),
        (lambda: losses.EntmaxLoss(alpha=1.0), "alpha must be a finite number > 1"),
        (lambda: losses.SequenceCrossEntropy(label_smoothing=2), "label_smoothing"),
    ],
)
def test_bad_arguments_are_named_with_their_range(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=LOSS_IDS)
def test_bad_targets_are_rejected(loss):
    with pytest.raises(ValueError, match="do not match logits of shape"):
        loss(np.ones((2, 5), int), SEQUENCE_LOGITS)
    with pytest.raises(tf.errors.InvalidArgumentError, match="non-integer"):
        loss(np.full((2, 4), 1.5), SEQUENCE_LOGITS)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"must lie in \[0, vocab_size\)"):
        loss(np.full((2, 4), 6), SEQUENCE_LOGITS)


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=LOSS_IDS)
@pytest.mark.parametrize("bad_target", [6, -1, 2.5])
def test_bad_targets_give_nan_loss_and_gradients_under_xla(loss, bad_target):
    """XLA drops the assertions; the loss must then be NaN, never a finite wrong value."""
    targets = SEQUENCE_TARGETS.astype(np.float32)
    targets[0, 1] = bad_target
    logits = tf.constant(SEQUENCE_LOGITS)

    @tf.function(jit_compile=True)
    def loss_and_gradient(targets, logits):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            value = loss(targets, logits)
        return value, tape.gradient(value, logits)

    value, gradient = loss_and_gradient(tf.constant(targets), logits)
    assert math.isnan(float(value))
    assert np.isnan(gradient.numpy()).all()
    good_value, good_gradient = loss_and_gradient(tf.constant(SEQUENCE_TARGETS, tf.float32), logits)
    assert np.isfinite(float(good_value)) and np.isfinite(good_gradient.numpy()).all()
    np.testing.assert_allclose(float(good_value), float(loss(SEQUENCE_TARGETS, logits)), 1e-5)


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=LOSS_IDS)
def test_config_round_trip(loss):
    config = keras.saving.serialize_keras_object(loss)
    clone = keras.saving.deserialize_keras_object(config)
    assert type(clone) is type(loss)
    assert clone.get_config() == loss.get_config()
    np.testing.assert_allclose(
        clone(SEQUENCE_TARGETS, SEQUENCE_LOGITS), loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS)
    )


def copy_task(vocab_size=12, length=5, examples=64):
    tokens = np.random.default_rng(2).integers(1, vocab_size, size=(examples, length))
    tokens[:, -1] = 0  # a pad position in every sequence
    return tokens, tokens


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=LOSS_IDS)
def test_a_tiny_model_trains_and_survives_saving(loss, tmp_path):
    inputs, targets = copy_task()
    model = keras.Sequential(
        [keras.Input((5,), dtype="int32"), keras.layers.Embedding(12, 16), keras.layers.Dense(12)]
    )
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=loss)
    history = model.fit(inputs, targets, epochs=8, batch_size=16, verbose=0).history["loss"]
    assert history[-1] < 0.8 * history[0]
    predictions = model.predict(inputs, verbose=0).argmax(-1)
    assert (predictions == targets)[targets != 0].mean() > 0.95
    path = tmp_path / "model.keras"
    model.save(path)
    restored = keras.models.load_model(path)
    assert restored.loss.get_config() == loss.get_config()
    np.testing.assert_allclose(
        restored.evaluate(inputs, targets, verbose=0),
        model.evaluate(inputs, targets, verbose=0),
        rtol=1e-5,
    )


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
    loss = losses.EntmaxLoss(alpha=alpha, label_smoothing=smoothing, n_iter=80)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        value = loss(targets, logits)
    np.testing.assert_allclose(value, per_token[targets != 0].mean(), rtol=1e-4, atol=1e-5)
    expected_gradient = (p - q) * (targets != 0)[..., None] / (targets != 0).sum()
    np.testing.assert_allclose(tape.gradient(value, logits), expected_gradient, atol=1e-6)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 1.25])
def test_entmax_loss_with_masked_logits_is_the_loss_over_the_other_tokens(alpha):
    logits = tf.constant([[1.0, -math.inf, 0.5, 2.0, -math.inf], [0.3, 0.1, -math.inf, 0.2, 0.0]])
    kept = [[0, 2, 3], [0, 1, 3, 4]]
    targets = tf.constant([3, 1])
    with tf.GradientTape() as tape:
        tape.watch(logits)
        loss = losses.entmax_token_loss(targets, logits, alpha)
    gradient = tape.gradient(loss, logits).numpy()
    for row, columns in enumerate(kept):
        sub_target = tf.constant([columns.index(int(targets[row]))])
        sub_logits = tf.gather(logits[row : row + 1], columns, axis=1)
        expected = losses.entmax_token_loss(sub_target, sub_logits, alpha)
        np.testing.assert_allclose(loss[row], expected[0], rtol=1e-5)
    assert np.all(np.isfinite(gradient)) and gradient[0, 1] == 0 and gradient[1, 2] == 0


def test_entmax_loss_is_infinite_for_a_masked_gold_token_or_smoothing_onto_one():
    logits = tf.constant([[1.0, -math.inf, 0.5], [1.0, -math.inf, 0.5]])
    loss = losses.entmax_token_loss(tf.constant([1, 0]), logits, 1.5)
    assert loss[0] == math.inf and np.isfinite(loss[1])
    smoothed = losses.entmax_token_loss(tf.constant([1, 0]), logits, 1.5, label_smoothing=0.1)
    assert np.all(smoothed == math.inf)


@pytest.mark.parametrize("bad", [math.inf, math.nan])
def test_entmax_loss_refuses_positive_infinite_and_nan_logits(bad):
    logits = tf.constant([[1.0, bad, 0.5]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="got \\+inf or NaN"):
        losses.SparsemaxLoss()(tf.constant([[0]]), logits[:, tf.newaxis, :])
    xla = tf.function(lambda z: losses.entmax_token_loss(tf.constant([0]), z), jit_compile=True)
    assert np.isnan(xla(logits).numpy()[0])  # XLA drops the assert: NaN, never a finite value


@pytest.mark.parametrize(
    "loss", [losses.SconesLoss(0.5), losses.SequenceCrossEntropy(), losses.SparsemaxLoss()]
)
def test_sample_weight_of_the_wrong_shape_is_refused(loss):
    targets = tf.constant([[1, 2, 0], [3, 1, 2], [2, 2, 1]])  # batch 3 = length 3
    logits = tf.random.normal([3, 3, 5])
    per_example = loss(targets, logits, sample_weight=tf.constant([1.0, 0.0, 2.0]))
    per_token = loss(targets, logits, sample_weight=tf.constant([[1.0, 0.0, 2.0]] * 3))
    assert np.isfinite(per_example) and np.isfinite(per_token)
    for bad in ([[1.0, 2.0]] * 3, [[[1.0, 2.0, 3.0]]] * 3, [1.0, 2.0]):
        with pytest.raises(ValueError, match="does not fit targets of shape"):
            loss(targets, logits, sample_weight=tf.constant(bad))
