"""Inputs shared by the head tests: logits, targets and a copy task."""

import numpy as np
import tensorflow as tf

HEAD_LOGITS = tf.constant([[2.0, 1.0, -1.0, -30.0], [1e4, -1e4, 0.0, 3.0]])


SEQUENCE_LOGITS = np.random.default_rng(0).normal(size=(2, 4, 6)).astype(np.float32) * 3
SEQUENCE_TARGETS = np.array([[2, 5, 1, 0], [4, 1, 0, 0]])


def copy_task(vocab_size=12, length=5, examples=64):
    tokens = np.random.default_rng(2).integers(1, vocab_size, size=(examples, length))
    tokens[:, -1] = 0  # a pad position in every sequence
    return tokens, tokens
