"""Peak extra memory of one call: the GPU allocator's peak, or the sampled resident set on a CPU."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

import tensorflow as tf

SAMPLE_SECONDS = 0.0005


def current_rss_bytes() -> int:
    """This process's resident set size."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_extra_bytes(run: Callable[[], object]) -> int:
    """Extra bytes one call of `run` needs beyond what is allocated before it.

    `run` is called once to warm up (trace, compile, allocate what persists), then once measured:
    on a GPU by the allocator's peak after resetting it; on a CPU, where TensorFlow reports no
    allocator statistics, by the resident set sampled every 0.5 ms during the call, minus the
    resident set just before it. Run it in a fresh process that holds nothing else.
    """
    run()
    if tf.config.list_physical_devices("GPU"):
        tf.config.experimental.reset_memory_stats("GPU:0")
        before = tf.config.experimental.get_memory_info("GPU:0")["current"]
        run()
        return tf.config.experimental.get_memory_info("GPU:0")["peak"] - before
    before = current_rss_bytes()
    peak = before
    running = threading.Event()
    running.set()

    def sample():
        nonlocal peak
        while running.is_set():
            peak = max(peak, current_rss_bytes())
            time.sleep(SAMPLE_SECONDS)

    sampler = threading.Thread(target=sample)
    sampler.start()
    run()
    running.clear()
    sampler.join()
    return peak - before
