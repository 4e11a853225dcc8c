"""TensorFlow's thread settings for a serving benchmark that compares engines thread for thread."""

from __future__ import annotations

import tensorflow as tf


def run_tensorflow_on_threads(threads: int) -> None:
    """Runs each TensorFlow op on `threads` threads, and one op at a time.

    A SavedModel then uses as many threads as another engine given `threads` (CTranslate2's
    `intra_threads`), none more for running independent ops side by side. Call it before
    TensorFlow runs anything.

    Args:
        threads: Threads per op, at least 1.
    """
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
