"""Exact search: states explored per second and per sentence, for each trained model.

    python -m benchmarks.exact_search --runs runs/multi30k-softmax runs/multi30k-scones-a0.2 \
        --sentences ../shared/data/multi30k-en-de/test_2016_flickr.en --count 50 --budget 5000

Runs `tfscones.decoding.exact_translate` on the first `--count` sentences of each run (64
searched side by side) and prints one row per run: states per second (the search's own time, its
initial beam-4 search included, the decoder step traced beforehand), the distribution of states
per sentence, and the fraction of sentences that reached the budget without proving their
translation optimal. A state is one expanded prefix and costs one cached decoder step (one
position, from its parent's keys and values), batched with the states of other prefixes and
sentences into steps of up to 512 rows; it no longer runs its whole prefix through the decoder.

The last column is the ceiling the CPU allows: a state's matrix products (`step_flops`: the
decoder layers' projections and feed-forward at one position, and the output projection; the
attention over the prefix and the source is left out, so the ceiling is generous) divided into
the rate of this machine's best matrix product of the output projection's shape
(`matmul_rate`, all threads, the benchmark's own measurement).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfscones.data import read_sentence_pairs  # noqa: E402
from tfscones.decoding import exact_translate  # noqa: E402
from tfscones.models import load_run  # noqa: E402


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, nargs="+", required=True)
    parser.add_argument("--sentences", type=Path, required=True, help="source sentences")
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--budget", type=int, default=5000, help="states per sentence")
    return parser.parse_args()


def step_flops(model) -> int:
    """Floating-point operations of one decoder step's matrix products, for one row.

    Per decoder layer: the self-attention's query, key, value and output projections, the
    cross-attention's query and output projections (its keys and values are computed once per
    sentence), and the two feed-forward layers; then the output projection. A multiply-add is
    two operations.
    """
    hidden, inner = model.hidden_dim, model.intermediate_dim
    per_layer = 6 * hidden * hidden + 2 * hidden * inner
    return 2 * (model.num_decoder_layers * per_layer + hidden * model.vocabulary_size)


def matmul_rate(model, rows: int = 256, repeats: int = 20) -> float:
    """Operations per second of `[rows, hidden] x [hidden, vocabulary]`, best of `repeats`."""
    inputs = tf.random.normal([rows, model.hidden_dim])
    kernel = tf.random.normal([model.hidden_dim, model.vocabulary_size])
    product = tf.function(tf.matmul)
    product(inputs, kernel).numpy()
    best = np.inf
    for _ in range(repeats):
        started = time.perf_counter()
        product(inputs, kernel).numpy()
        best = min(best, time.perf_counter() - started)
    return 2 * rows * model.hidden_dim * model.vocabulary_size / best


def main() -> None:
    arguments = parse_arguments()
    sentences = read_sentence_pairs(arguments.sentences, arguments.sentences)[0]
    sentences = sentences[: arguments.count]
    print(f"exact search, {len(sentences)} sentences, budget {arguments.budget:,} states")
    print(
        f"| {'run':<28} | states/s | median | p90 | p99 | max | budget hit | seconds "
        f"| ceiling states/s |\n|{'-' * 30}|---|---|---|---|---|---|---|---|"
    )
    for run in arguments.runs:
        model, tokenizer = load_run(run)
        exact_translate(model, tokenizer, sentences[:2], state_budget=10)  # Traces the step.
        started = time.perf_counter()
        results = [
            result
            for _, result in exact_translate(
                model, tokenizer, sentences, state_budget=arguments.budget
            )
        ]
        seconds = time.perf_counter() - started
        states = np.array([result.states for result in results])
        hit = np.mean([not result.complete for result in results])
        ceiling = matmul_rate(model) / step_flops(model)
        print(
            f"| {run.name:<28} | {states.sum() / seconds:.0f} | {np.median(states):.0f} "
            f"| {np.percentile(states, 90):.0f} | {np.percentile(states, 99):.0f} "
            f"| {states.max()} | {100 * hit:.0f}% | {seconds:.0f} | {ceiling:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
