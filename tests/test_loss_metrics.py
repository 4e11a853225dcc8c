import keras
import numpy as np
import pytest

from tfscones import loss_metrics, losses

LOGITS = np.random.default_rng(0).normal(size=(2, 3, 5)).astype(np.float32) * 2
TARGETS = np.array([[4, 2, 0], [1, 0, 0]])


def softplus(z):
    return np.logaddexp(0.0, z)


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_scones_terms_are_averaged_over_non_pad_tokens(smoothing):
    positives, negatives = [], []
    for b, t in zip(*np.nonzero(TARGETS), strict=True):
        z, gold = LOGITS[b, t].astype(np.float64), TARGETS[b, t]
        positives.append((1 - smoothing) * softplus(-z[gold]) + smoothing * softplus(z[gold]))
        others = np.delete(z, gold)
        negatives.append(np.sum((1 - smoothing) * softplus(others) + smoothing * softplus(-others)))
    positive = loss_metrics.SconesPositiveTerm(label_smoothing=smoothing)
    negative = loss_metrics.SconesNegativeTerm(label_smoothing=smoothing)
    positive.update_state(TARGETS, LOGITS)
    negative.update_state(TARGETS, LOGITS)
    assert float(positive.result()) == pytest.approx(np.mean(positives), rel=1e-5)
    assert float(negative.result()) == pytest.approx(np.mean(negatives), rel=1e-5)
    alpha = 0.4
    loss = losses.SconesLoss(alpha=alpha, label_smoothing=smoothing)(TARGETS, LOGITS)
    assert float(loss) == pytest.approx(
        float(positive.result()) + alpha * float(negative.result()), rel=1e-5
    )


def test_entmax_support_size_counts_non_zero_probabilities():
    logits = np.array([[[2.0, 1.0, -1.0], [0.5, 0.3, 0.1]], [[0.0, 0.0, 0.0], [9.0, 0.0, 0.0]]])
    metric = loss_metrics.EntmaxSupportSize(alpha=2.0)
    metric.update_state(np.array([[1, 2], [1, 0]]), logits)  # sparsemax supports 1, 3, 3; pad
    assert float(metric.result()) == pytest.approx(7 / 3)


def test_metrics_run_in_fit_and_round_trip_through_config():
    metrics = [
        loss_metrics.SconesPositiveTerm(),
        loss_metrics.SconesNegativeTerm(),
        loss_metrics.EntmaxSupportSize(alpha=1.5),
    ]
    for metric in metrics:
        clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(metric))
        assert clone.get_config() == metric.get_config()
    model = keras.Sequential(
        [keras.Input((3,), dtype="int32"), keras.layers.Embedding(5, 8), keras.layers.Dense(5)]
    )
    model.compile(optimizer="adam", loss=losses.SconesLoss(alpha=0.5), metrics=metrics)
    history = model.fit(TARGETS, TARGETS, epochs=2, verbose=0).history
    assert {"scones_positive", "scones_negative", "entmax_support_size"} <= set(history)
    assert all(np.isfinite(history["scones_negative"]))
