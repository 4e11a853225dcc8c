"""Translate a text file (or stdin) with a trained model: greedy, beam, diverse beam or sampling.

    tfscones translate --run runs/demo-scones-a0.5 < sentences.de
    tfscones translate --run runs/demo-scones-a0.5 --beam 4 --input in.de
    tfscones translate --run RUN --beam 8 --nbest 4 --length-penalty 0.6 < in.de
    tfscones translate --run RUN --beam 4 --diverse-groups 2 --nbest 2 < in.de
    tfscones translate --run RUN --sample --top-p 0.9 --nbest 5 --seed 7 < in.de
    tfscones translate --model model.keras --spm spm.model --input in.de --output out.en

One sentence a line in (lines end at newlines only: `tfscones.data.text_lines`), one
translation a line out, in order (greedy search unless told
otherwise). With `--nbest N`, each sentence gives N lines `index<TAB>score<TAB>translation`,
best first (for sampling, in the order drawn), as in fairseq's n-best lists; the score is the sum
of the head's log-scores (divided by the length penalty, if any). An empty input line gives an
empty output line. A line longer than the model reads is translated from its first pieces, and
said so on stderr (each such line, then their count); `--long-lines error` stops instead,
before anything is translated.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import tensorflow as tf

from tfscones.commands.argument_types import non_negative_int, positive_int
from tfscones.data import Tokenizer
from tfscones.data.text_lines import TextLineError, check_writable, read_lines, write_lines
from tfscones.decoding import Search, translate, translate_nbest
from tfscones.decoding.translate import cut_sources
from tfscones.models import load_model
from tfscones.run_folder import RunFolder


def parse_arguments(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="run folder holding model.keras and spm.model")
    parser.add_argument("--model", type=Path, help="a .keras model (default: RUN/model.keras)")
    parser.add_argument("--spm", type=Path, help="SentencePiece model (default: RUN/spm.model)")
    parser.add_argument("--input", type=Path, help="source sentences (default: stdin)")
    parser.add_argument("--output", type=Path, help="translations (default: stdout)")
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument(
        "--long-lines",
        choices=("translate", "error"),
        default="translate",
        help="a line longer than the model reads: translate its first pieces and say so on "
        "stderr (default), or stop before translating",
    )
    search = parser.add_argument_group("search (greedy unless --beam or --sample)")
    search.add_argument(
        "--beam", type=non_negative_int, default=0, help="beam size (0: greedy search)"
    )
    search.add_argument(
        "--nbest", type=non_negative_int, default=0, help="print the N best hypotheses"
    )
    search.add_argument("--length-penalty", type=float, default=0.0, help="GNMT alpha")
    search.add_argument("--diverse-groups", type=int, default=0, help="diverse beam groups")
    search.add_argument("--diversity-strength", type=float, default=0.5)
    search.add_argument("--sample", action="store_true", help="sample instead of searching")
    search.add_argument("--temperature", type=float, default=1.0)
    search.add_argument("--top-k", type=int, default=0, help="sample among the k best (0: all)")
    search.add_argument("--top-p", type=float, default=1.0, help="nucleus mass (1: all)")
    search.add_argument("--seed", type=int, default=0, help="sampling seed")
    arguments = parser.parse_args(argv)
    try:
        arguments.search = search_from_arguments(arguments)
    except ValueError as error:
        parser.error(str(error))
    if arguments.run is None and (arguments.model is None or arguments.spm is None):
        parser.error("give --run, or both --model and --spm")
    arguments.model = arguments.model or RunFolder(arguments.run).model
    arguments.spm = arguments.spm or RunFolder(arguments.run).tokenizer
    for path in (arguments.model, arguments.spm):
        if not path.is_file():
            parser.error(f"{path} does not exist")
    return arguments


def search_from_arguments(arguments: argparse.Namespace) -> Search:
    """The `Search` the command-line flags describe.

    Raises:
        ValueError: If the flags contradict each other or a value is out of range.
    """
    if arguments.sample and arguments.beam:
        raise ValueError("--sample and --beam exclude each other")
    if arguments.diverse_groups and not arguments.beam:
        raise ValueError("--diverse-groups needs --beam (the beams are split into the groups)")
    count = max(arguments.nbest, 1)
    if arguments.sample:
        return Search(
            "sample",
            num_hypotheses=count,
            temperature=arguments.temperature,
            top_k=arguments.top_k,
            top_p=arguments.top_p,
            seed=arguments.seed,
        )
    if arguments.beam:
        return Search(
            "diverse_beam" if arguments.diverse_groups else "beam",
            beam_size=arguments.beam,
            num_hypotheses=count,
            length_penalty=arguments.length_penalty,
            num_groups=max(arguments.diverse_groups, 1),
            diversity_strength=arguments.diversity_strength,
        )
    if arguments.nbest > 1:
        raise ValueError("--nbest above 1 needs --beam or --sample")
    return Search()


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Entry point of `tfscones translate` and `python -m training.translate`."""
    arguments = parse_arguments(argv, prog)
    try:
        check_writable(arguments.output)
        sources = read_lines(arguments.input)
        tokenizer = Tokenizer.from_file(arguments.spm)
        model = load_model(arguments.model)
    except (OSError, TextLineError, ValueError, tf.errors.OpError) as error:
        raise SystemExit(f"translate: error: {error}") from None
    cut = cut_sources(tokenizer, sources, model.max_sequence_length)
    report_long_lines(cut, len(sources), model.max_sequence_length - 1, arguments.long_lines)
    search = {"search": arguments.search, "long_sources": "translate"}
    if arguments.nbest:
        nbest = translate_nbest(model, tokenizer, sources, arguments.batch_size, **search)
        lines = [
            f"{index}\t{score:.4f}\t{text}"
            for index, hypotheses in enumerate(nbest)
            for text, score in hypotheses
        ]
    else:
        lines = translate(model, tokenizer, sources, arguments.batch_size, **search)
    try:
        write_lines(arguments.output, lines)
    except OSError as error:
        raise SystemExit(f"translate: error: cannot write {arguments.output}: {error}") from None
    if cut:
        print(
            f"translate: {len(cut)} of {len(sources)} lines were longer than the model reads "
            f"and were translated from their first {model.max_sequence_length - 1} pieces.",
            file=sys.stderr,
        )


def report_long_lines(cut: dict[int, int], lines: int, kept: int, policy: str) -> None:
    """One stderr line per line the model cannot read whole; or the refusal of the first."""
    for index, pieces in cut.items():
        if policy == "error":
            raise SystemExit(
                f"translate: error: line {index + 1}: {pieces:,} pieces, the model reads at "
                f"most {kept} ({len(cut)} of {lines} lines too long; --long-lines translate "
                "translates their first pieces)"
            )
        print(
            f"translate: line {index + 1}: {pieces:,} pieces, the model reads {kept}: "
            f"translating the first {kept}",
            file=sys.stderr,
        )
