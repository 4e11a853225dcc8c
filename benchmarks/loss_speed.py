"""Forward+backward time and peak memory of each loss, as ratios to softmax cross-entropy.

    python -m benchmarks.loss_speed                 # 4,096 target tokens, vocabularies 8K and 32K
    python -m benchmarks.loss_speed --xla           # the same, compiled with XLA
    python -m benchmarks.loss_speed --tokens 1024 --vocab 8192 --repeats 5   # a quick look

Every loss runs on the same logits [tokens, vocab] and targets, as a `tf.function` computing the
loss and its gradient with respect to the logits. Timings are interleaved (one run of each loss
per round, 30 rounds, the median reported with the 10th to 90th percentiles) so that machine noise
hits all losses alike. On a 2-core CPU under XLA one loss's time is often bimodal from call to
call (the same call on the same logits), so a median of fewer rounds moves by tens of per cent.

Peak memory is the extra memory one forward+backward step needs beyond its inputs: on a GPU the
allocator's peak (`tf.config.experimental.get_memory_info`) after resetting it; on a CPU, where
TensorFlow reports no allocator statistics, the resident set's high-water mark during a step in a
fresh process running only that loss, minus the resident set just before that step, with
TensorFlow's memory pool and malloc's kept heaps turned off so that freed memory leaves the
resident set (`benchmarks.peak_memory`, which says what this does not see). Without XLA the
CPU peak depends on which independent ops TensorFlow's executor runs at once on its inter-op
threads, so it varies between runs by up to one gradient-sized tensor: the SCONES loss at 4,096 x
8,192 reads 2.0 to 3.1 gradients, and 2.0, as cross-entropy, with one inter-op thread.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from benchmarks.peak_memory import fresh_process_environment, peak_extra_bytes  # noqa: E402
from tfscones import heads  # noqa: E402

LOSSES = {
    "cross-entropy": (heads.SequenceCrossEntropy, {}, None),
    "scones(α=0.5)": (heads.SconesLoss, {"alpha": 0.5}, 1.1),
    "sparsemax": (heads.SparsemaxLoss, {}, 2.0),
    "entmax-1.5": (heads.EntmaxLoss, {"alpha": 1.5}, 2.0),
    "entmax-1.25 (bisection)": (heads.EntmaxLoss, {"alpha": 1.25}, None),
}
BASELINE = "cross-entropy"
XLA_TARGETS = {"scones(α=0.5)": 1.05, "entmax-1.5": 1.5}
"""Targets under XLA, where cross-entropy is one fused kernel (issue 14)."""


def make_inputs(tokens: int, vocab: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Logits shaped like a trained model's (a few large, most small) and random targets."""
    generator = tf.random.Generator.from_seed(0)
    logits = generator.normal([tokens, vocab], stddev=2.0)
    targets = generator.uniform([tokens], 1, vocab, dtype=tf.int32)
    return logits, targets


def make_step(name: str, xla: bool):
    """A compiled function returning (loss, gradient wrt the logits)."""
    loss_class, arguments, _ = LOSSES[name]
    loss = loss_class(**arguments)

    @tf.function(jit_compile=xla)
    def step(logits, targets):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            value = loss(targets, logits)
        return value, tape.gradient(value, logits)

    return step


def run_once(step, logits, targets) -> float:
    """Seconds of one forward+backward, waiting for the gradient without copying it out.

    Fetching one element waits for the whole gradient; fetching all of it (`numpy()`) would
    add a copy of `[tokens, vocab]` floats (512 MB at 4,096 x 32,768) to every loss's time,
    into fresh pages, whose cost varies from call to call by more than the losses differ.
    """
    start = time.perf_counter()
    value, gradient = step(logits, targets)
    float(value)
    float(gradient[-1, -1])
    return time.perf_counter() - start


def time_all(tokens: int, vocab: int, repeats: int, xla: bool) -> dict[str, list[float]]:
    """Seconds of every loss's forward+backward in each round, the losses interleaved."""
    logits, targets = make_inputs(tokens, vocab)
    steps = {name: make_step(name, xla) for name in LOSSES}
    for step in steps.values():
        run_once(step, logits, targets)
    samples = {name: [] for name in LOSSES}
    for _ in range(repeats):
        for name, step in steps.items():
            samples[name].append(run_once(step, logits, targets))
    return samples


def measure_peak_memory(name: str, tokens: int, vocab: int, xla: bool) -> int:
    """Extra bytes one forward+backward step of `name` needs, in this process."""
    logits, targets = make_inputs(tokens, vocab)
    step = make_step(name, xla)
    return peak_extra_bytes(lambda: run_once(step, logits, targets))


def peak_memory_in_fresh_process(name: str, tokens: int, vocab: int, xla: bool) -> float:
    """Peak extra bytes of one step in a fresh process; NaN (with its error shown) if it fails."""
    command = [sys.executable, "-m", "benchmarks.loss_speed", "--memory-of", name]
    command += ["--tokens", str(tokens), "--vocab", str(vocab)] + (["--xla"] if xla else [])
    finished = subprocess.run(
        command, capture_output=True, text=True, env=fresh_process_environment()
    )
    if finished.returncode != 0:
        print(f"memory of {name} at {vocab} failed:\n{finished.stderr[-2000:]}", file=sys.stderr)
        return math.nan
    return json.loads(finished.stdout.strip().splitlines()[-1])["peak_bytes"]


def print_header() -> None:
    header = f"{'vocab':>6} {'loss':<24} {'ms':>9} {'p10-p90 ms':>13} {'time×CE':>8} "
    header += f"{'MiB':>8} {'mem×CE':>7} "
    print(header + f"{'target':>7}  verdict", flush=True)


def print_rows(rows: list[dict]) -> None:
    for row in rows:
        target = row["target"]
        if target is None:
            verdict, target_text = "reported", "-"
        else:
            met = row["time_ratio"] <= target
            verdict, target_text = ("meets" if met else "MISSES"), f"≤{target}×"
        print(
            f"{row['vocab']:>6} {row['loss']:<24} {row['seconds'] * 1e3:>9.1f} "
            f"{row['low'] * 1e3:>6.1f}-{row['high'] * 1e3:<6.1f} "
            f"{row['time_ratio']:>8.2f} {row['peak_bytes'] / 2**20:>8.0f} "
            f"{row['memory_ratio']:>7.2f} {target_text:>7}  {verdict}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--vocab", type=int, nargs="+", default=[8192, 32768])
    parser.add_argument("--repeats", type=int, default=30, help="interleaved rounds")
    parser.add_argument("--xla", action="store_true", help="compile with jit_compile=True")
    parser.add_argument("--memory-of", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_of:
        peak = measure_peak_memory(args.memory_of, args.tokens, args.vocab[0], args.xla)
        print(json.dumps({"peak_bytes": peak}))
        return
    device = tf.config.list_physical_devices("GPU") or ["CPU"]
    print(f"device: {device[0]}, tokens: {args.tokens}, xla: {args.xla}, repeats: {args.repeats}")
    print_header()
    for vocab in args.vocab:
        samples = time_all(args.tokens, vocab, args.repeats, args.xla)
        seconds = {name: statistics.median(values) for name, values in samples.items()}
        memory = {
            name: peak_memory_in_fresh_process(name, args.tokens, vocab, args.xla)
            for name in LOSSES
        }
        rows = []
        for name, (_, _, target) in LOSSES.items():
            if args.xla:
                target = XLA_TARGETS.get(name, target)
            rows.append(
                {
                    "vocab": vocab,
                    "loss": name,
                    "seconds": seconds[name],
                    "low": float(np.percentile(samples[name], 10)),
                    "high": float(np.percentile(samples[name], 90)),
                    "time_ratio": seconds[name] / seconds[BASELINE],
                    "peak_bytes": memory[name],
                    "memory_ratio": memory[name] / max(memory[BASELINE], 1),
                    "target": target,
                }
            )
        print_rows(rows)


if __name__ == "__main__":
    main()
