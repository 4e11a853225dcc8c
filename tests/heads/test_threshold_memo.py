import gc
import weakref

import tensorflow as tf

from tfscones.heads.threshold_memo import ThresholdMemo


def test_a_memo_finds_thresholds_only_for_the_very_tensor_and_settings():
    memo = ThresholdMemo(capacity=2)
    logits, tau = tf.constant([[1.0, 2.0]]), tf.constant([[0.5]])
    memo.remember(logits, (1.5, 50), tau)
    assert memo.find(logits, (1.5, 50)) is tau
    assert memo.find(tf.identity(logits), (1.5, 50)) is None  # equal values, another tensor
    assert memo.find(logits, (2.0, 50)) is None
    others = [tf.constant([[3.0]]), tf.constant([[4.0]])]
    for other in others:
        memo.remember(other, (1.5, 50), tau)
    assert memo.find(logits, (1.5, 50)) is None  # the oldest entry left at capacity


def test_a_memo_keeps_neither_logits_nor_traced_thresholds_alive():
    memo = ThresholdMemo()
    logits = tf.constant([[1.0, 2.0]])
    logits_ref = weakref.ref(logits)
    memo.remember(logits, (1.5, 50), tf.constant([[0.5]]))
    del logits
    gc.collect()
    assert logits_ref() is None

    graph_refs = []

    @tf.function
    def traced(z):
        tau = tf.reduce_max(z, axis=-1, keepdims=True)
        memo.remember(z, (1.5, 50), tau)
        graph_refs.append(weakref.ref(tau.graph))
        return tau

    traced(tf.constant([[1.0, 2.0]]))
    del traced
    gc.collect()
    assert graph_refs[0]() is None  # the memo did not keep the traced graph alive
