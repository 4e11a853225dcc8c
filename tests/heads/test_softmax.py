import numpy as np
import pytest
import tensorflow as tf

from tests.heads.cases import HEAD_LOGITS, SEQUENCE_LOGITS, SEQUENCE_TARGETS
from tfscones.heads import softmax


def test_softmax_head_scores_are_log_softmax():
    head = softmax.SoftmaxHead()
    np.testing.assert_allclose(
        head.log_scores(HEAD_LOGITS), tf.nn.log_softmax(HEAD_LOGITS), atol=1e-6
    )
    np.testing.assert_allclose(head.probabilities(HEAD_LOGITS).numpy().sum(-1), 1.0, atol=1e-6)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_matches_smoothed_target_by_hand(smoothing):
    log_probabilities = SEQUENCE_LOGITS - np.log(np.exp(SEQUENCE_LOGITS).sum(-1, keepdims=True))
    q = np.full(SEQUENCE_LOGITS.shape, smoothing / 6)
    np.put_along_axis(q, SEQUENCE_TARGETS[..., None], 1 - smoothing + smoothing / 6, axis=-1)
    per_token = -(q * log_probabilities).sum(-1)
    expected = per_token[SEQUENCE_TARGETS != 0].mean()
    loss = softmax.SequenceCrossEntropy(label_smoothing=smoothing)
    np.testing.assert_allclose(loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS), expected, rtol=1e-5)


def test_softmax_output_bias_starts_at_zero():
    bias = softmax.SoftmaxHead().output_bias_initializer(8)(shape=(4,))
    np.testing.assert_array_equal(bias, 0)
