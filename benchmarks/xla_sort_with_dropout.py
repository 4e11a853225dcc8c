"""Why the entmax losses never sort under XLA: a sort slows dropout down in the same computation.

    python -m benchmarks.xla_sort_with_dropout

A two-layer model (dropout, 256 units, dropout, 8,000 logits) trains under XLA
(`jit_compile=True`) with cross-entropy, and again with a sort of eight logits per row added to
the loss (multiplied by zero, so the model and its gradients are unchanged). On the CPU of this
project's development machine (TensorFlow 2.21), the sort makes XLA compile each dropout mask's
random numbers (`StatelessRandomUniformV2`, Philox) into loop fusions that recompute the key
derivation for every element, tens of times slower; without dropout the sort costs nothing. A
`tf.math.top_k` does the same, since XLA lowers it to a sort. This is why
`tfscones.ops.entmax` finds sparsemax and entmax-1.5 thresholds without sort or top-k.

Each configuration is timed over `--steps` steps after a warm-up epoch, interleaved over
`--rounds` rounds; the median is printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

ROWS, WIDTH, VOCABULARY = 2048, 256, 8000


def make_model(dropout: float, with_sort: bool) -> keras.Model:
    """The two-layer model, compiled with XLA, its loss holding a sort or not."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input([WIDTH]),
            keras.layers.Dropout(dropout),
            keras.layers.Dense(WIDTH),
            keras.layers.Dropout(dropout),
            keras.layers.Dense(VOCABULARY),
        ]
    )

    def loss(targets, logits):
        value = keras.losses.sparse_categorical_crossentropy(targets, logits, from_logits=True)
        if with_sort:
            sorted_logits = tf.sort(tf.stop_gradient(logits[:, :8]), axis=-1)
            value += 0.0 * tf.reduce_sum(sorted_logits, axis=-1)
        return value

    model.compile(optimizer="adam", loss=loss, jit_compile=True)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    inputs = tf.random.stateless_normal([ROWS, WIDTH], seed=[0, 1])
    targets = tf.random.stateless_uniform([ROWS], [0, 2], 0, VOCABULARY, tf.int32)
    configurations = [(dropout, sort) for dropout in (0.0, 0.1) for sort in (False, True)]
    models = {key: make_model(*key) for key in configurations}
    for model in models.values():
        model.fit(inputs, targets, batch_size=ROWS, epochs=1, verbose=0)
    samples = {key: [] for key in configurations}
    for _ in range(args.rounds):
        for key, model in models.items():
            start = time.perf_counter()
            model.fit(inputs, targets, batch_size=ROWS, epochs=args.steps, verbose=0)
            samples[key].append((time.perf_counter() - start) / args.steps)
    print(f"{'dropout':>7} {'sort in loss':>12} {'ms/step':>8} {'× no sort':>9}")
    for dropout, sort in configurations:
        seconds = statistics.median(samples[dropout, sort])
        ratio = seconds / statistics.median(samples[dropout, False])
        print(f"{dropout:>7} {'yes' if sort else 'no':>12} {seconds * 1e3:>8.0f} {ratio:>9.2f}")


if __name__ == "__main__":
    main()
