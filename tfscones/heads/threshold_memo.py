"""The entmax thresholds a loss found, kept for a metric on the same logits to reuse.

In a Keras train or test step the compiled loss and then the compiled metrics receive the very
same `y_pred` tensor (eager, graph and XLA alike). The entmax loss finds each row's threshold τ
(Peters & Martins 2021, eq. 4), the costliest part of the loss; the support-size metric needs
the same τ, and finding it again cost a sixth of an entmax-1.5 training step. The loss records
τ here under its logits, and the metric looks it up before finding τ itself.
"""

from __future__ import annotations

import collections
import threading
import weakref

import tensorflow as tf


class ThresholdMemo:
    """The τ of the last few logits tensors, matched by identity and the mapping's settings.

    Entries hold their logits weakly, so a memo never keeps a batch of logits alive, and a
    match means the very tensor the loss saw: same graph, same values. Thresholds made while a
    graph is traced are held weakly too (their graph keeps them as long as it lives, and a memo
    must not keep old training graphs alive); eager ones, which nothing else holds, strongly.
    The newest `capacity` entries are kept, enough for the replicas a `tf.distribute` strategy
    traces in turn.

    Args:
        capacity: How many entries to keep.
    """

    def __init__(self, capacity: int = 16):
        self._entries = collections.deque(maxlen=capacity)
        self._lock = threading.Lock()

    def remember(self, logits: tf.Tensor, settings: tuple, tau: tf.Tensor) -> None:
        """Records the thresholds `tau` found for `logits` under `settings` (α, n_iter)."""
        held = (lambda: tau) if tf.executing_eagerly() else weakref.ref(tau)
        with self._lock:
            self._entries.append((weakref.ref(logits), settings, held))

    def find(self, logits: tf.Tensor, settings: tuple) -> tf.Tensor | None:
        """The thresholds recorded for this very `logits` tensor under `settings`, else None."""
        with self._lock:
            entries = list(self._entries)
        for reference, entry_settings, held in reversed(entries):
            if reference() is logits and entry_settings == settings:
                return held()
        return None


ENTMAX_THRESHOLDS = ThresholdMemo()
