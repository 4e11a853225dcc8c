"""Where a SavedModel's decoding time goes: per-op times of its signatures, grouped by piece.

    python -m benchmarks.decoding_profile --savedmodel exports/demo-softmax/1 \
        --sentences tfscones/data/demo/test.de --count 200 --batch-size 32 \
        --signature translate_beam

Loads the SavedModel into a TF1 `Session` (one thread, as the CTranslate2 comparison runs), runs
the signature over the sentences once untimed, once timed, and once with a full trace
(`RunOptions.FULL_TRACE`), whose step statistics hold the time of every op run, the ops of every
iteration of the decoding loop included. Ops are grouped by their name (the decoder's name
scopes) into the pieces of a decoding step; a table gives each piece's time and share of the
summed op time. The traced run is slower than the timed one (tracing costs time per op), so the
shares matter, not the absolute times; the gap between the summed op time and the wall time of
the untraced run is the executor's own per-op overhead.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401  (registers the SentencePiece ops)

from tfscones.data.text_lines import read_lines  # noqa: E402

# (piece, pattern on the op's name or type); the first match wins. Both the names of the
# keras-hub layers (the decoders before issue 14) and of `tfscones.models.stepping` match.
PIECES = (
    ("SentencePiece and text", r"Sentencepiece|Unicode|Substr|Ragged|StringJoin|Detokenize"),
    ("cache: reorder (beam gather)", r"while/(reorder_cache/|GatherV2_9$)"),
    (
        "cache: write, slice, stack",
        r"while/(cache_(slices|stack)/|strided_slice|stack|Reshape)|XlaDynamicUpdateSlice"
        r"|self_attention(_1)?/(concat|strided_slice|stack|SelectV2)",
    ),
    ("decoder: self-attention", r"while/decoder_(layer_\d+_1/self_attention_1|step_\d+/self_att)"),
    ("decoder: cross-attention", r"while/decoder_(layer_\d+_1/cross_attention_1|step_\d+/cross_)"),
    ("decoder: feed-forward, layer norms", r"while/(decoder_(layer|step)_\d+|decoder_final_norm)"),
    ("embedding and positions", r"while/(position_encoding|token_embedding|step_embedding)"),
    ("output projection", r"while/output_projection"),
    ("log-softmax", r"LogSoftmax"),
    ("top-k", r"TopKV2"),
    ("rest of the search loop", r"while"),
    ("encoder, cross-attention keys and values, set-up", r""),
)


def op_times(session, fetches, feeds) -> tuple[collections.Counter, collections.Counter]:
    """Microseconds and run counts of every op over `feeds`, from full traces."""
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    micros, runs = collections.Counter(), collections.Counter()
    for feed in feeds:
        metadata = tf.compat.v1.RunMetadata()
        session.run(fetches, feed, options=options, run_metadata=metadata)
        for device in metadata.step_stats.dev_stats:
            for node in device.node_stats:
                op_type = node.timeline_label.split("=")[-1].split("(")[0].strip()
                key = f"{node.node_name} {op_type}"
                micros[key] += node.all_end_rel_micros
                runs[key] += 1
    return micros, runs


def piece_of(name: str) -> str:
    return next(piece for piece, pattern in PIECES if re.search(pattern, name))


def print_profile(micros, runs, wall: float, sentences: int) -> None:
    pieces, piece_runs = collections.Counter(), collections.Counter()
    for name, value in micros.items():
        pieces[piece_of(name)] += value
        piece_runs[piece_of(name)] += runs[name]
    total = sum(pieces.values())
    print("\n| piece | ms (traced) | share | ops run |\n|---|---:|---:|---:|")
    for piece, value in pieces.most_common():
        share = 100 * value / total
        print(f"| {piece} | {value / 1e3:.0f} | {share:.0f}% | {piece_runs[piece]} |")
    print(f"| all ops | {total / 1e3:.0f} | 100% | {sum(runs.values())} |")
    print(f"\nuntraced wall time: {wall:.2f} s for {sentences} sentences")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--savedmodel", type=Path, required=True)
    parser.add_argument("--sentences", type=Path, required=True)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--signature", default="translate_beam")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--top", type=int, default=0, help="also list the N slowest ops")
    arguments = parser.parse_args(argv)
    lines = read_lines(arguments.sentences)[: arguments.count]
    tf.compat.v1.disable_eager_execution()
    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=arguments.threads,
        inter_op_parallelism_threads=arguments.threads,
    )
    with tf.compat.v1.Session(config=config) as session:
        meta_graph = tf.compat.v1.saved_model.load(session, ["serve"], str(arguments.savedmodel))
        signature = meta_graph.signature_def[arguments.signature]
        fetches = {key: value.name for key, value in signature.outputs.items()}
        source = signature.inputs["source"].name
        size = arguments.batch_size
        feeds = [{source: lines[i : i + size]} for i in range(0, len(lines), size)]
        for feed in feeds:
            session.run(fetches, feed)
        start = time.perf_counter()
        for feed in feeds:
            session.run(fetches, feed)
        wall = time.perf_counter() - start
        micros, runs = op_times(session, fetches, feeds)
    print(f"{arguments.savedmodel} {arguments.signature}, batch {size}, {len(lines)} sentences")
    print_profile(micros, runs, wall, len(lines))
    for name, value in micros.most_common(arguments.top):
        print(f"{value / 1e3:9.1f} ms {runs[name]:7d}x {name[-140:]}")


if __name__ == "__main__":
    main()
