import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tests.heads.cases import SEQUENCE_LOGITS, SEQUENCE_TARGETS, copy_task
from tfscones import heads

# Each registered head's loss, label smoothing on.
LOSSES = {
    name: head.loss(label_smoothing=0.1) for name, head in harness.EVERY_HEAD_AND_BISECTION.items()
}
ALL_LOSSES = list(LOSSES.values())
LOSS_IDS = list(LOSSES)


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=LOSS_IDS)
def test_gradient_equals_finite_differences(loss):
    logits = tf.constant(SEQUENCE_LOGITS[:1, :2] / 3)
    targets = tf.constant(SEQUENCE_TARGETS[:1, :2])
    theoretical, numerical = tf.test.compute_gradient(
        lambda z: loss(targets, z), [logits], delta=1e-3
    )
    np.testing.assert_allclose(theoretical[0], numerical[0], atol=5e-3)


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
    loss = heads.SconesLoss()
    first_only = loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS, sample_weight=np.array([1.0, 0.0]))
    np.testing.assert_allclose(first_only, loss(SEQUENCE_TARGETS[:1], SEQUENCE_LOGITS[:1]), 1e-6)


def test_an_all_pad_batch_has_zero_loss():
    assert float(heads.SconesLoss()(np.zeros((2, 4), int), SEQUENCE_LOGITS)) == 0.0


def test_low_precision_logits_are_computed_in_float32():
    loss = heads.EntmaxLoss(1.5)
    half = loss(SEQUENCE_TARGETS, tf.constant(SEQUENCE_LOGITS, tf.float16))
    assert half.dtype == tf.float32
    np.testing.assert_allclose(half, loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS), rtol=1e-2)


SCONES_ALPHA = r"SCONES alpha must be a finite number in \(0, inf\) \(got {}\)"
SMOOTHING = r"label_smoothing must be a finite number in \[0, 1\) \(got {}\)"


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: heads.SconesLoss(alpha=0.0), SCONES_ALPHA.format("0.0")),
        (lambda: heads.SconesLoss(alpha=-1.0), SCONES_ALPHA.format("-1.0")),
        (lambda: heads.SconesLoss(alpha=math.inf), SCONES_ALPHA.format("inf")),
        (lambda: heads.SconesLoss(alpha=math.nan), SCONES_ALPHA.format("nan")),
        (lambda: heads.SconesLoss(alpha="0.5"), SCONES_ALPHA.format("'0.5'")),
        (lambda: heads.SconesLoss(label_smoothing=1.5), SMOOTHING.format("1.5")),
        (lambda: heads.SconesLoss(label_smoothing=1.0), SMOOTHING.format("1.0")),
        (lambda: heads.EntmaxLoss(label_smoothing=-0.1), SMOOTHING.format("-0.1")),
        (lambda: heads.EntmaxLoss(alpha=1.0), r"alpha must be a finite number in \(1, inf\)"),
        (lambda: heads.EntmaxLoss(1.3, n_iter=0), r"n_iter must be a whole number in \[1, 1000\]"),
        (lambda: heads.EntmaxLoss(1.3, n_iter=2.5), r"n_iter must be a whole number"),
        (lambda: heads.EntmaxHead(1.3, n_iter=-1), r"n_iter must be a whole number"),
        (lambda: heads.SparsemaxLoss(alpha=1.5), r"alpha 2 \(got alpha=1.5\); use EntmaxLoss"),
        (lambda: heads.SequenceCrossEntropy(label_smoothing=2), SMOOTHING.format("2")),
        (lambda: heads.SequenceCrossEntropy(label_smoothing=True), SMOOTHING.format("True")),
        (lambda: heads.TanhSconesLoss(alpha=0.0), SCONES_ALPHA.format("0.0")),
        (lambda: heads.TanhSconesLoss(label_smoothing=-1), SMOOTHING.format("-1")),
    ],
)
def test_bad_arguments_are_named_with_their_range(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_sparsemax_loss_takes_its_own_config_back():
    loss = heads.SparsemaxLoss(label_smoothing=0.1)
    clone = heads.SparsemaxLoss.from_config(loss.get_config())
    assert (clone.alpha, clone.label_smoothing) == (2.0, 0.1)


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=LOSS_IDS)
@pytest.mark.parametrize("bad_weight", [-1.0, math.inf, math.nan])
def test_bad_sample_weights_are_refused_and_nan_under_xla(loss, bad_weight):
    weights = np.ones(2, np.float32)
    weights[1] = bad_weight
    with pytest.raises(tf.errors.InvalidArgumentError, match="finite and non-negative"):
        loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS, sample_weight=weights)
    xla = tf.function(
        lambda w: loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS, sample_weight=w), jit_compile=True
    )
    assert math.isnan(float(xla(tf.constant(weights))))


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


@pytest.mark.parametrize(
    "loss",
    [
        heads.SconesLoss(0.5),
        heads.SequenceCrossEntropy(),
        heads.SparsemaxLoss(),
        heads.TanhSconesLoss(0.5),
    ],
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


@pytest.mark.parametrize("loss", ALL_LOSSES, ids=LOSS_IDS)
def test_string_targets_are_refused_as_untokenised_text(loss):
    with pytest.raises(ValueError, match="targets must be integer token ids .*got dtype string"):
        loss(np.array([["a", "b", "c", "d"], ["e", "f", "g", "h"]]), SEQUENCE_LOGITS)
