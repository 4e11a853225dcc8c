import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfscones import heads, losses

LOGITS = tf.constant([[2.0, 1.0, -1.0, -30.0], [1e4, -1e4, 0.0, 3.0]])


def test_softmax_head_scores_are_log_softmax():
    head = heads.SoftmaxHead()
    np.testing.assert_allclose(head.log_scores(LOGITS), tf.nn.log_softmax(LOGITS), atol=1e-6)
    np.testing.assert_allclose(head.probabilities(LOGITS).numpy().sum(-1), 1.0, atol=1e-6)


def test_sigmoid_head_scores_are_log_sigmoid_and_exact_for_extreme_logits():
    head = heads.SigmoidHead()
    scores = head.log_scores(LOGITS).numpy()
    assert scores[0, 3] == pytest.approx(-30.0, rel=1e-6)
    assert scores[1, 1] == pytest.approx(-1e4)
    assert scores[1, 0] == 0.0
    assert scores[0, 0] == pytest.approx(-math.log1p(math.exp(-2.0)))
    # Unnormalised: several tokens can be near-certain at once.
    assert head.probabilities(tf.constant([9.0, 9.0, -9.0])).numpy().sum() > 1.9


@pytest.mark.parametrize("alpha", [2.0, 1.5, 1.3])
def test_entmax_head_scores_are_minus_infinity_exactly_at_zero_probability(alpha):
    head = heads.EntmaxHead(alpha)
    probabilities = head.probabilities(LOGITS).numpy()
    scores = head.log_scores(LOGITS).numpy()
    assert (probabilities == 0).any()
    np.testing.assert_array_equal(np.isneginf(scores), probabilities == 0)
    finite = probabilities > 0
    np.testing.assert_allclose(scores[finite], np.log(probabilities[finite]), atol=1e-5)


def test_heads_compute_in_float32():
    half = tf.cast(LOGITS[:1], tf.float16)
    for head in (heads.SoftmaxHead(), heads.SigmoidHead(), heads.EntmaxHead(1.5)):
        assert head.log_scores(half).dtype == tf.float32
        assert head.probabilities(half).dtype == tf.float32


def test_default_losses_follow_the_head():
    assert isinstance(heads.SoftmaxHead().loss(label_smoothing=0.1), losses.SequenceCrossEntropy)
    scones = heads.SigmoidHead().loss(alpha=0.5)
    assert isinstance(scones, losses.SconesLoss) and scones.alpha == 0.5
    assert isinstance(heads.EntmaxHead(2.0).loss(), losses.SparsemaxLoss)
    entmax = heads.EntmaxHead(1.3, n_iter=20).loss(label_smoothing=0.1)
    assert (entmax.alpha, entmax.n_iter, entmax.label_smoothing) == (1.3, 20, 0.1)


def test_sigmoid_output_bias_starts_at_minus_log_vocabulary():
    bias = heads.SigmoidHead().output_bias_initializer(32000)(shape=(4,))
    np.testing.assert_allclose(bias, -math.log(32000), rtol=1e-6)
    np.testing.assert_array_equal(heads.SoftmaxHead().output_bias_initializer(8)(shape=(4,)), 0)


@pytest.mark.parametrize(
    "identifier, expected",
    [
        ("softmax", heads.SoftmaxHead()),
        ("scones", heads.SigmoidHead()),
        ("sigmoid", heads.SigmoidHead()),
        ("sparsemax", heads.EntmaxHead(2.0)),
        ("entmax-1.5", heads.EntmaxHead(1.5)),
        ({"name": "entmax", "alpha": 1.2}, heads.EntmaxHead(1.2)),
        ({"name": "sparsemax", "n_iter": 10}, heads.EntmaxHead(2.0, n_iter=10)),
        (heads.serialize(heads.EntmaxHead(1.7)), heads.EntmaxHead(1.7)),
    ],
)
def test_get_builds_heads_from_names_and_configs(identifier, expected):
    assert heads.get(identifier) == expected


def test_get_rejects_unknown_heads_and_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown head 'tanhmax'.*sparsemax"):
        heads.get("tanhmax")
    with pytest.raises(ValueError, match="alpha must be a finite number > 1"):
        heads.get({"name": "entmax", "alpha": 0.9})


@pytest.mark.parametrize("head", [heads.SoftmaxHead(), heads.SigmoidHead(), heads.EntmaxHead(1.4)])
def test_keras_serialization_round_trip(head):
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(head))
    assert clone == head and repr(clone) == repr(head)
