"""Translate a text file (or stdin) with a trained model, greedily.

    python -m training.translate --run runs/demo-scones-a0.5 < sentences.de
    python -m training.translate --model model.keras --spm spm.model --input in.de --output out.en

One sentence a line in, one translation a line out, in order. An empty input line gives an empty
output line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import keras

from tfscones.data import Tokenizer
from tfscones.decoding import translate


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="run folder holding model.keras and spm.model")
    parser.add_argument("--model", type=Path, help="a .keras model (default: RUN/model.keras)")
    parser.add_argument("--spm", type=Path, help="SentencePiece model (default: RUN/spm.model)")
    parser.add_argument("--input", type=Path, help="source sentences (default: stdin)")
    parser.add_argument("--output", type=Path, help="translations (default: stdout)")
    parser.add_argument("--batch-size", type=int, default=64)
    arguments = parser.parse_args(argv)
    if arguments.run is None and (arguments.model is None or arguments.spm is None):
        parser.error("give --run, or both --model and --spm")
    arguments.model = arguments.model or arguments.run / "model.keras"
    arguments.spm = arguments.spm or arguments.run / "spm.model"
    for path in (arguments.model, arguments.spm):
        if not path.is_file():
            parser.error(f"{path} does not exist")
    return arguments


def main(argv: list[str] | None = None) -> None:
    """Entry point of `python -m training.translate`."""
    arguments = parse_arguments(argv)
    model = keras.models.load_model(arguments.model)
    tokenizer = Tokenizer.from_file(arguments.spm)
    if arguments.input:
        sources = arguments.input.read_text(encoding="utf-8").splitlines()
    else:
        sources = sys.stdin.read().splitlines()
    translations = translate(model, tokenizer, sources, arguments.batch_size)
    text = "".join(line + "\n" for line in translations)
    if arguments.output:
        arguments.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
