"""`tf.distribute` strategies by name, for programs whose configs say where to train."""

from __future__ import annotations

import json
import os

import tensorflow as tf

STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")


def make_strategy(name: str = "default", tpu: str | None = None) -> tf.distribute.Strategy:
    """Creates the distribution strategy a config names.

    Args:
        name: `default` (one device, no distribution), `mirrored` (all local GPUs, or the CPU),
            `multi_worker` (several machines, described by the `TF_CONFIG` environment
            variable), or `tpu`.
        tpu: TPU name or address for `tpu` (None: the TPU of this Cloud VM, or `TPU_NAME`).

    Returns:
        The strategy; build and compile models inside `strategy.scope()`.

    Raises:
        ValueError: If the name is unknown, or `multi_worker` is asked for without `TF_CONFIG`.
    """
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError(
                "strategy multi_worker needs the TF_CONFIG environment variable "
                '(for example {"cluster": {"worker": ["host1:port", "host2:port"]}, '
                '"task": {"type": "worker", "index": 0}}).'
            )
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"unknown strategy {name!r}; strategies: {', '.join(STRATEGIES)}.")


def worker_index() -> int:
    """This process's worker index in `TF_CONFIG` (0 without one): worker 0 is the chief."""
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    return int(task.get("index", 0)) if task.get("type", "worker") in ("worker", "chief") else 0
