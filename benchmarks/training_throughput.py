"""Training throughput (target tokens/s) and peak memory per output head, as ratios to softmax.

    python -m benchmarks.training_throughput                 # small preset, vocabulary 8,000
    python -m benchmarks.training_throughput --xla           # the same, compiled with XLA
    python -m benchmarks.training_throughput --preset tiny --steps 5 --rounds 2   # a quick look
    python -m benchmarks.training_throughput --head-metrics  # the metrics `tfscones train` adds

Each head trains the same `Seq2SeqTransformer` preset (softmax with cross-entropy, SCONES α=0.5,
entmax-1.5 with its Fenchel-Young loss) with Adam on the same batches of random token ids, every
position a real token. Timings are interleaved (one `fit` of `--steps` steps per head per round,
after a warm-up round, timed from the end of its first step to the end of its last) and the
median round is reported, so machine noise hits all heads alike.
Peak memory is the extra memory of one training step beyond the model, its optimizer state and
the batch, measured in a fresh process per head: on a GPU the allocator's peak; on a CPU the
resident set's high-water mark during the step minus the resident set before it, with TensorFlow's
memory pool and malloc's kept heaps turned off so that freed memory leaves the resident set
(`benchmarks.peak_memory`, which says what this does not see).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.peak_memory import fresh_process_environment, peak_extra_bytes  # noqa: E402
from tfscones.models import Seq2SeqTransformer  # noqa: E402

HEADS = {
    "softmax": ("softmax", {}, None),
    "scones(α=0.5)": ("sigmoid", {"alpha": 0.5}, 0.95),
    "entmax-1.5": ("entmax15", {}, 0.85),
}
BASELINE = "softmax"


def make_batch(batch_size: int, length: int, vocab: int) -> tuple[dict, tf.Tensor]:
    """Random source and target ids (no padding), the target shifted right behind BOS."""
    generator = tf.random.Generator.from_seed(0)
    source = generator.uniform([batch_size, length], 4, vocab, dtype=tf.int32)
    target = generator.uniform([batch_size, length], 4, vocab, dtype=tf.int32)
    target_in = tf.concat([tf.fill([batch_size, 1], 3), target[:, :-1]], axis=1)
    return {"source_ids": source, "target_in_ids": target_in}, target


def make_model(name: str, args) -> keras.Model:
    """The head's model, compiled with its loss (and its metrics under `--head-metrics`)."""
    head, loss_arguments, _ = HEADS[name]
    keras.utils.set_random_seed(0)
    model = Seq2SeqTransformer.from_preset(args.preset, vocabulary_size=args.vocab, head=head)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4),
        loss=model.head.loss(**loss_arguments),
        metrics=model.head.metrics() if args.head_metrics else None,
        jit_compile=args.jit_compile,
    )
    return model


class _StepEnds(keras.callbacks.Callback):
    """Records when each training batch of a `fit` ends."""

    def on_train_begin(self, logs=None):
        self.ends = []

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.perf_counter())


def step_seconds(model: keras.Model, batches: tf.data.Dataset, steps: int) -> float:
    """Seconds per training step in one `fit` of `steps` (≥ 2) steps, its first step left out.

    The time runs from the end of the first step to the end of the last, so it holds the steps
    and what `fit` does between them, but neither `fit`'s set-up (about 0.7 s a call for the
    small preset: its data iterator and callbacks) nor the first step, which is slow when
    another model ran last (oneDNN's primitives of this model were evicted from its cache).
    """
    if steps < 2:
        raise ValueError(f"step_seconds needs at least 2 steps, got {steps}")
    ends = _StepEnds()
    model.fit(batches, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=[ends])
    return (ends.ends[-1] - ends.ends[0]) / (steps - 1)


def time_all(args) -> dict[str, float]:
    """Median seconds per step of every head, interleaved across rounds."""
    inputs, targets = make_batch(args.batch, args.length, args.vocab)
    batches = tf.data.Dataset.from_tensors((inputs, targets)).repeat()
    models = {name: make_model(name, args) for name in HEADS}
    for model in models.values():
        step_seconds(model, batches, 2)
    samples = {name: [] for name in HEADS}
    for _ in range(args.rounds):
        for name, model in models.items():
            samples[name].append(step_seconds(model, batches, args.steps))
    return {name: statistics.median(values) for name, values in samples.items()}


def measure_peak_memory(name: str, args) -> int:
    inputs, targets = make_batch(args.batch, args.length, args.vocab)
    model = make_model(name, args)
    return peak_extra_bytes(lambda: model.train_on_batch(inputs, targets))


def peak_memory_in_fresh_process(name: str, argv: list[str]) -> float:
    """Peak extra bytes of one step in a fresh process; NaN (with its error shown) if it fails."""
    command = [sys.executable, "-m", "benchmarks.training_throughput", *argv, "--memory-of", name]
    finished = subprocess.run(
        command, capture_output=True, text=True, env=fresh_process_environment()
    )
    if finished.returncode != 0:
        print(f"memory of {name} failed:\n{finished.stderr[-2000:]}", file=sys.stderr)
        return float("nan")
    return json.loads(finished.stdout.strip().splitlines()[-1])["peak_bytes"]


def print_table(seconds: dict[str, float], memory: dict[str, float], tokens: int) -> None:
    header = f"{'head':<14} {'ms/step':>8} {'tokens/s':>9} {'×softmax':>9} {'MiB':>7} {'mem×':>6}"
    print(f"{header} {'target':>7}  verdict")
    for name, (_, _, target) in HEADS.items():
        throughput_ratio = seconds[BASELINE] / seconds[name]
        if target is None:
            target_text, verdict = "-", "baseline"
        else:
            target_text = f"≥{target:.2f}×"
            verdict = "meets" if throughput_ratio >= target else "MISSES"
        print(
            f"{name:<14} {seconds[name] * 1e3:>8.1f} {tokens / seconds[name]:>9.0f} "
            f"{throughput_ratio:>9.2f} {memory[name] / 2**20:>7.0f} "
            f"{memory[name] / memory[BASELINE]:>6.2f} {target_text:>7}  {verdict}"
        )


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--batch", type=int, default=64, help="sentences per step")
    parser.add_argument("--length", type=int, default=32, help="tokens per sentence")
    parser.add_argument("--steps", type=int, default=10, help="steps per timed fit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jit-compile", default="auto", choices=["auto", "true", "false"])
    parser.add_argument("--xla", action="store_true", help="the same as --jit-compile true")
    parser.add_argument(
        "--head-metrics",
        action="store_true",
        help="compile each head with its metrics, as `tfscones train` does (entmax: support size)",
    )
    parser.add_argument("--memory-of", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 2:
        parser.error(f"--steps must be at least 2 (a fit's first step is untimed): {args.steps}")
    args.jit_compile = {"auto": "auto", "true": True, "false": False}[args.jit_compile]
    if args.xla:
        args.jit_compile = True
    return args


def main() -> None:
    args = parse_arguments()
    if args.memory_of:
        print(json.dumps({"peak_bytes": measure_peak_memory(args.memory_of, args)}))
        return
    device = tf.config.list_physical_devices("GPU") or ["CPU"]
    tokens = args.batch * args.length
    print(
        f"device: {device[0]}, preset: {args.preset}, vocab: {args.vocab}, "
        f"{tokens} target tokens a step, jit_compile: {args.jit_compile}, "
        f"head metrics: {'yes' if args.head_metrics else 'no'}"
    )
    seconds = time_all(args)
    forwarded = [a for a in sys.argv[1:] if a != "--memory-of"]
    memory = {name: peak_memory_in_fresh_process(name, forwarded) for name in HEADS}
    print_table(seconds, memory, tokens)


if __name__ == "__main__":
    main()
