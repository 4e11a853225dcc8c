"""The confidence of given translations: a reference-free quality estimate of any system's.

    tfscones score --run runs/demo-scones-a0.5 --source test.de --target system.en
    tfscones score --run RUN --source S --target T --tokens --output scores.tsv

One line of `--source` and one of `--target` make a pair; each pair gives one line out: the
confidence of the target as a translation of the source under the run's model (its
probability for softmax and entmax, its probability of being adequate for SCONES and tanh:
`tfscones.decoding.confidence`), with `--tokens` a tab and each token's as `token:value`
pairs, `</s>` last. A target longer than the model reads cannot be scored whole: `nan`. The
library's `tfscones.decoding.score_with_confidence` and the SavedModel's `score` signature give
the same numbers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import tensorflow as tf

from tfscones.commands.argument_types import positive_int
from tfscones.data.text_lines import TextLineError, read_lines, write_lines
from tfscones.data.tokenizer import load_tokenizer
from tfscones.decoding.confidence import score_with_confidence
from tfscones.models import load_model
from tfscones.models.loading import check_vocabulary_fits
from tfscones.run_folder import RunFolder
from tfscones.written_aside import check_writable


def parse_arguments(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="run folder with model.keras")
    parser.add_argument("--source", type=Path, required=True, help="source sentences")
    parser.add_argument("--target", type=Path, required=True, help="their translations")
    parser.add_argument("--output", type=Path, help="the confidences (default: stdout)")
    parser.add_argument(
        "--tokens", action="store_true", help="add each token's confidence, token:value"
    )
    parser.add_argument("--batch-size", type=positive_int, default=64)
    arguments = parser.parse_args(argv)
    run = RunFolder(arguments.run)
    for path in (run.model, run.tokenizer, arguments.source, arguments.target):
        if not path.is_file():
            parser.error(f"{path} does not exist")
    return arguments


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Entry point of `tfscones score`."""
    arguments = parse_arguments(argv, prog)
    run = RunFolder(arguments.run)
    try:
        check_writable(arguments.output, inputs=[arguments.source, arguments.target, run.model])
        sources, targets = read_lines(arguments.source), read_lines(arguments.target)
        if len(sources) != len(targets):
            raise ValueError(
                f"{arguments.source} has {len(sources):,} lines but {arguments.target} has "
                f"{len(targets):,}: one translation a source"
            )
        tokenizer = load_tokenizer(run.tokenizer)
        model = load_model(run.model)
        check_vocabulary_fits(tokenizer, model.vocabulary_size, run.tokenizer)
    except (OSError, TextLineError, ValueError, tf.errors.OpError) as error:
        raise SystemExit(f"score: error: {error}") from None
    confidences = score_with_confidence(model, tokenizer, sources, targets, arguments.batch_size)
    lines = [confidence.columns(arguments.tokens) for confidence in confidences]
    try:
        write_lines(arguments.output, lines)
    except OSError as error:
        raise SystemExit(f"score: error: cannot write {arguments.output}: {error}") from None
