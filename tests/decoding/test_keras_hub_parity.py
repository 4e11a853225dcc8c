"""Our greedy search against keras-hub's `GreedySampler` driving the same model (an independent
implementation), which also checks the adapter the decoding benchmark compares against."""

import numpy as np
import tensorflow as tf

from benchmarks.keras_hub_samplers import keras_hub_decode
from tests import harness
from tfscones.decoding import greedy_decode

VOCAB = 24
WIDTH = 10
SOURCE = tf.constant(
    [[5, 6, 7, 8, 9, 1, 0], [10, 1, 0, 0, 0, 0, 0], [11, 12, 13, 14, 15, 16, 1]], tf.int32
)


def test_greedy_search_equals_keras_hub_greedy_sampler():
    model = harness.tiny_model(VOCAB, "softmax", max_sequence_length=WIDTH, eos_bias=2.5)
    ours = greedy_decode(model, SOURCE, max_length_a=0.0, max_length_b=WIDTH)
    theirs = keras_hub_decode(model, SOURCE, WIDTH, beam_size=1).numpy()[:, 1:]
    lengths = ours.lengths.numpy()
    assert len(set(lengths)) > 1, "sentences should end at different steps"
    for row, length in enumerate(lengths):
        np.testing.assert_array_equal(ours.ids[row, :length].numpy(), theirs[row, :length])
