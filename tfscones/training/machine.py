"""Which machine a run trained on, and how busy it was: for reading its wall time.

A run bounded by steps gives the same model on any machine; only its wall time depends on the
machine, and on what else ran beside it. `results.json` records both.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import tensorflow as tf


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), or what `platform` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def gpu_names() -> list[str]:
    """The names of the GPUs TensorFlow sees."""
    return [
        tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
        for gpu in tf.config.list_physical_devices("GPU")
    ]


def describe_machine() -> dict:
    """The CPU, its logical cores usable by this process, the GPUs and TensorFlow's version.

    Returns:
        `cpu`, `cores`, `gpus`, `tensorflow` and a one-line `description`.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpus = gpu_names()
    description = f"{cpu_name()}, {cores} core{'s' if cores != 1 else ''}"
    if gpus:
        description += ", " + ", ".join(gpus)
    return {
        "cpu": cpu_name(),
        "cores": cores,
        "gpus": gpus,
        "tensorflow": tf.__version__,
        "description": description,
    }


def load_average() -> float | None:
    """The one-minute load average (runnable processes); None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
