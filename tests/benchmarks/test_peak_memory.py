"""`peak_extra_bytes` on a CPU reads a known allocation, eager and under XLA, as benchmarks do."""

import json
import subprocess
import sys
import textwrap

import pytest

from benchmarks.peak_memory import fresh_process_environment

SIZE = 200_000_000
"""Bytes each measured call allocates and touches."""

MEASURE = textwrap.dedent(
    f"""
    import json
    import tensorflow as tf
    from benchmarks.peak_memory import peak_extra_bytes

    ELEMENTS = {SIZE // 4}

    def eager():
        return float(tf.fill([ELEMENTS], 1.0)[-1])

    @tf.function(jit_compile=True)
    def xla_temporary(scale):
        matrix = tf.reshape(tf.range(ELEMENTS, dtype=tf.float32) * scale, [-1, 100])
        return tf.reduce_sum(tf.matmul(matrix, tf.ones([100, 2])))

    @tf.function(jit_compile=True)
    def xla_output(scale):
        return tf.range(ELEMENTS, dtype=tf.float32) * scale

    scale = tf.constant(1.0)
    print(json.dumps({{
        "eager": peak_extra_bytes(eager),
        "xla temporary": peak_extra_bytes(lambda: float(xla_temporary(scale))),
        "xla output": peak_extra_bytes(lambda: float(xla_output(scale)[-1])),
    }}))
    """
)


@pytest.fixture(scope="module")
def measured() -> dict[str, int]:
    command = [sys.executable, "-c", MEASURE]
    finished = subprocess.run(
        command, capture_output=True, text=True, check=True, env=fresh_process_environment()
    )
    return json.loads(finished.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("call", ["eager", "xla temporary", "xla output"])
def test_peak_extra_bytes_reads_a_known_allocation_in_a_fresh_process(measured, call):
    assert measured[call] == pytest.approx(SIZE, rel=0.15)
