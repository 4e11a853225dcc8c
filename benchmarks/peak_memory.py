"""Peak extra memory of one call: the GPU allocator's peak, or the resident set's peak on a CPU.

On a CPU, TensorFlow reports no allocator statistics, so the peak is the kernel's high-water mark
of the resident set (`VmHWM`), reset just before the call (`/proc/self/clear_refs`), minus the
resident set then. That sees memory only when it has to be mapped in: memory that allocators keep
after a free is reused unseen. Two allocators keep it by default: TensorFlow's oneDNN CPU
allocator pools every block of 4 KiB or more (a BFC allocator that never returns memory, XLA's
buffers included), and glibc's malloc serves blocks up to its dynamic mmap threshold (up to
32 MiB) from heaps it keeps. `MEASUREMENT_ENVIRONMENT` sends TensorFlow to malloc and malloc's
blocks of 64 KiB or more to mmap, so that a free returns them. malloc reads it at start-up, so
measure in a fresh process started with `fresh_process_environment()`.

Not seen: memory allocated before the measured call and reused by it (a warm-up call runs
first), blocks under 64 KiB kept by malloc, and memory the call maps but never touches.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import tensorflow as tf

MEASUREMENT_ENVIRONMENT = {
    "TF_ONEDNN_USE_SYSTEM_ALLOCATOR": "1",
    "MALLOC_MMAP_THRESHOLD_": "65536",
    "MALLOC_TRIM_THRESHOLD_": "131072",
}
"""Settings under which freed memory leaves the resident set (they slow TensorFlow down)."""


def fresh_process_environment() -> dict[str, str]:
    """This process's environment with `MEASUREMENT_ENVIRONMENT`, for a measuring subprocess."""
    return {**os.environ, **MEASUREMENT_ENVIRONMENT}


def current_rss_bytes() -> int:
    """This process's resident set size."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """The high-water mark of this process's resident set since it was last reset."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def reset_peak_rss() -> None:
    """Sets the resident set's high-water mark to the current resident set (Linux 4.0+)."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def peak_extra_bytes(run: Callable[[], object]) -> int:
    """Extra bytes one call of `run` needs beyond what is allocated before it.

    `run` is called once to warm up (trace, compile, allocate what persists), then once measured:
    on a GPU by the allocator's peak after resetting it; on a CPU by the resident set's
    high-water mark during the call minus the resident set before it, right only in a fresh
    process started with `fresh_process_environment()` that holds nothing else (see the module).
    """
    run()
    if tf.config.list_physical_devices("GPU"):
        tf.config.experimental.reset_memory_stats("GPU:0")
        before = tf.config.experimental.get_memory_info("GPU:0")["current"]
        run()
        return tf.config.experimental.get_memory_info("GPU:0")["peak"] - before
    reset_peak_rss()
    before = current_rss_bytes()
    run()
    return peak_rss_bytes() - before
