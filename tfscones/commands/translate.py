"""Translate a text file (or stdin) with a trained model and any registered search.

    tfscones translate --run runs/demo-scones-a0.5 < sentences.de
    tfscones translate --run runs/demo-scones-a0.5 --search beam --input in.de
    tfscones translate --run RUN --search beam --beam 8 --nbest 4 --length-penalty 0.6 < in.de
    tfscones translate --run RUN --search diverse_beam --beam 4 --groups 2 --nbest 2 < in.de
    tfscones translate --run RUN --search sample --top-p 0.9 --nbest 5 --seed 7 < in.de
    tfscones translate --run runs/moe --search experts --nbest 1 < in.de
    tfscones translate --model model.keras --spm spm.model --input in.de --output out.en
    tfscones translate --run runs/a --run runs/b --search beam < in.de      # an ensemble
    tfscones translate --run runs/g2p --language fre < words.txt           # G2P: words in
    tfscones translate --run runs/g2p --tsv fre_test.tsv --tsv kor_test.tsv  # and WER, PER
    tfscones translate --run runs/demo-scones-a0.5 --confidence < in.de      # text<TAB>confidence

`--search` names a decoder of `tfscones.decoding.registry` (greedy by default), and every
setting of every decoder is a flag (`--help` lists them); a flag the chosen decoder does not
read is refused, naming the searches that read it.

One sentence a line in (lines end at newlines only: `tfscones.data.text_lines`), one translation
a line out, in order. With `--nbest N` (the search's `num_hypotheses`), each sentence gives its
hypotheses as lines `index<TAB>score<TAB>translation`, best first (for sampling in the order
drawn, for experts in expert order), as in fairseq's n-best lists; the score is the sum of the
head's log-scores (divided by the length penalty, if any). An empty input line gives an empty
output line. A line longer than the model reads is translated from its first pieces, and said so
on stderr (each such line, then their count); `--long-lines error` stops instead, before
anything is translated.

For a G2P run (a symbol vocabulary with language tags), a line is `LANGUAGE<TAB>word`, or a
word of `--language`; `--tsv FILE` translates the words of pronunciation TSV files (the
language from each file's name, `fre_test.tsv`, unless `--language` says it) and prints WER
and PER per language and their mean on stderr. A symbol outside the vocabulary is read as the
unknown symbol, and each line holding one is said on stderr, then their count.

`--confidence` adds a tab and the translation's confidence to each line (one meaning per head:
`tfscones.decoding.confidence`), `--token-confidence` a further tab and each token's, as
`token:value` pairs with `</s>` last.

Several `--run` (or `--model`, with one `--spm`) translate with the ensemble of their models
(`tfscones.decoding.Ensemble`), with any search: each token is scored by the log of the mean of
the models' head probabilities. The runs must share one vocabulary (the same file content), and
the models one head and one vocabulary size; anything else is refused before decoding.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import tensorflow as tf

from tfscones.commands.argument_types import in_range, non_negative_int, positive_int
from tfscones.data.pronunciation_tsv import Pronunciations, read_pronunciation_files
from tfscones.data.symbol_vocab import split_source, tagged_source
from tfscones.data.text_lines import TextLineError, read_lines, write_lines
from tfscones.data.tokenizer import load_tokenizer
from tfscones.decoding import Ensemble, Search, registry, translate, translate_nbest
from tfscones.decoding.common import max_output_length
from tfscones.decoding.confidence import translate_with_confidence
from tfscones.decoding.translate import cut_sources, unknown_sources
from tfscones.evaluation.phone_errors import error_rates_by_language, macro_average
from tfscones.models import load_model
from tfscones.models.loading import check_vocabulary_fits
from tfscones.models.stepping import Decodable
from tfscones.ranges import POSITIVE
from tfscones.run_folder import RunFolder
from tfscones.serving.module import DEFAULT_MAX_REQUEST_BYTES, decoder_state_bytes
from tfscones.written_aside import check_writable


def parse_arguments(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--run",
        type=Path,
        action="append",
        help="run folder holding model.keras and spm.model; repeat it for an ensemble",
    )
    parser.add_argument(
        "--model",
        type=Path,
        action="append",
        help="a .keras model (default: RUN/model.keras of each --run); repeat it for an ensemble",
    )
    parser.add_argument(
        "--spm",
        type=Path,
        help="the vocabulary: a SentencePiece model or a symbols.json (default: the run's)",
    )
    parser.add_argument(
        "--language",
        help="the language of every input word, for a multilingual symbol vocabulary (G2P); "
        "without it each line is LANGUAGE<TAB>word",
    )
    parser.add_argument("--input", type=Path, help="source sentences (default: stdin)")
    parser.add_argument(
        "--tsv",
        type=Path,
        action="append",
        help="a pronunciation TSV (graphemes<TAB>phones, G2P) to translate in place of --input "
        "and score by WER and PER; repeat it for several languages",
    )
    parser.add_argument("--output", type=Path, help="translations (default: stdout)")
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument(
        "--max-batch-gib",
        type=in_range(POSITIVE),
        default=DEFAULT_MAX_REQUEST_BYTES / 2**30,
        help="decoder memory one batch may take, in GiB (default 2, the export's "
        "--max-request-gib): a larger --batch-size is lowered to fit, and said so",
    )
    parser.add_argument(
        "--long-lines",
        choices=("translate", "error"),
        default="translate",
        help="a line longer than the model reads: translate its first pieces and say so on "
        "stderr (default), or stop before translating",
    )
    add_confidence_flags(parser)
    add_search_flags(parser)
    arguments = parser.parse_args(argv)
    if arguments.nbest and (arguments.confidence or arguments.token_confidence):
        parser.error("--nbest lists give each hypothesis's score; --confidence is for one line")
    try:
        arguments.search = search_from_arguments(arguments)
    except ValueError as error:
        parser.error(str(error))
    if arguments.run is None and (arguments.model is None or arguments.spm is None):
        parser.error("give --run, or both --model and --spm")
    runs = [RunFolder(run) for run in arguments.run or []]
    if arguments.tsv and arguments.input:
        parser.error("give --input or --tsv, not both")
    arguments.model = arguments.model or [run.model for run in runs]
    arguments.spm = arguments.spm or runs[0].tokenizer
    vocabularies = [run.tokenizer for run in runs] if len(runs) > 1 else []
    for path in (*arguments.model, arguments.spm, *vocabularies):
        if not path.is_file():
            parser.error(f"{path} does not exist")
    try:
        check_one_vocabulary(runs)
    except ValueError as error:
        parser.error(str(error))
    return arguments


def add_confidence_flags(parser: argparse.ArgumentParser) -> None:
    """`--confidence` and `--token-confidence` (`tfscones.decoding.confidence`)."""
    parser.add_argument(
        "--confidence",
        action="store_true",
        help="after each translation, a tab and its confidence: its probability (softmax, "
        "entmax) or its probability of being adequate (SCONES, tanh)",
    )
    parser.add_argument(
        "--token-confidence",
        action="store_true",
        help="--confidence and a further column: each token with its confidence, "
        "token:value, space-separated, </s> last",
    )


def check_one_vocabulary(runs: list[RunFolder]) -> None:
    """Refuses runs whose vocabulary files differ: an ensemble's models share one vocabulary.

    Raises:
        ValueError: Naming the first run whose vocabulary differs from the first run's.
    """
    if len(runs) < 2:
        return
    first = runs[0].tokenizer.read_bytes()
    for run in runs[1:]:
        if run.tokenizer.read_bytes() != first:
            raise ValueError(
                f"--run {runs[0].path} and --run {run.path} have different vocabularies "
                f"({runs[0].tokenizer} and {run.tokenizer} differ): an ensemble's models must "
                "share one vocabulary"
            )


def add_search_flags(parser: argparse.ArgumentParser) -> None:
    """`--search`, `--nbest` and a flag for every setting of every registered decoder."""
    group = parser.add_argument_group("search (greedy unless --search names another)")
    summaries = "; ".join(f"{d.name}: {d.summary}" for d in registry.decoders())
    group.add_argument(
        "--search", choices=registry.decoder_names(), default="greedy", help=summaries
    )
    group.add_argument(
        "--nbest",
        type=non_negative_int,
        default=0,
        help="print N hypotheses a sentence with their scores (the search's num_hypotheses)",
    )
    for flag, (field, readers) in setting_flags().items():
        group.add_argument(
            flag,
            dest=field.name,
            metavar=flag.removeprefix("--").replace("-", "_").upper(),
            type=setting_type(field),
            default=None,
            help=f"{field.metadata['help']} (default {field.default}; {', '.join(readers)})",
        )


def setting_type(field: dataclasses.Field) -> Callable[[str], Any]:
    """The argparse type of a setting's flag: a number of the setting's range, with its hint.

    A setting without a range (`registry.setting`'s `allowed`) reads as its default's type.
    """
    allowed = field.metadata.get("allowed")
    if allowed is None:
        return type(field.default)
    parse = in_range(allowed)
    hint = field.metadata.get("hint")
    if not hint:
        return parse

    def parse_with_hint(text: str) -> int | float:
        try:
            return parse(text)
        except argparse.ArgumentTypeError as error:
            raise argparse.ArgumentTypeError(f"{error}. {hint}") from None

    return parse_with_hint


def setting_flags() -> dict[str, tuple[dataclasses.Field, list[str]]]:
    """Each settings flag, with its field and the decoders that read it."""
    flags: dict[str, tuple[dataclasses.Field, list[str]]] = {}
    for decoder in registry.decoders():
        for field in dataclasses.fields(decoder.settings):
            flag = field.metadata["flag"]
            if flag:
                flags.setdefault(flag, (field, []))[1].append(decoder.name)
    return flags


def search_from_arguments(arguments: argparse.Namespace) -> Search:
    """The `Search` the command-line flags describe.

    Raises:
        ValueError: If a flag is not a setting of the chosen search, or a value is out of range.
    """
    decoder = registry.decoder_named(arguments.search)
    own = {field.name for field in dataclasses.fields(decoder.settings)}
    settings = {}
    for flag, (field, readers) in setting_flags().items():
        value = getattr(arguments, field.name)
        if value is None:
            continue
        if field.name not in own:
            raise ValueError(
                f"{flag} is a setting of {' and '.join(readers)} search, not of "
                f"{decoder.name}: add --search {readers[0]}"
            )
        settings[field.name] = value
    if registry.HYPOTHESES_SETTING in own:
        settings[registry.HYPOTHESES_SETTING] = max(arguments.nbest, 1)
    elif arguments.nbest > 1:
        raise ValueError(
            f"--nbest above 1 needs a search of several hypotheses, not {decoder.name}"
        )
    try:
        return Search(decoder.name, **settings)
    except ValueError as error:
        raise ValueError(named_by_flags(str(error))) from None


def named_by_flags(message: str) -> str:
    """`message` with every setting's name replaced by its flag (`beam_size` -> `--beam`)."""
    flags = {field.name: flag for flag, (field, _) in setting_flags().items()}
    flags[registry.HYPOTHESES_SETTING] = "--nbest"
    for name, flag in flags.items():
        message = re.sub(rf"\b{name}\b", flag, message)
    return message


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Entry point of `tfscones translate` and `python -m training.translate`."""
    arguments = parse_arguments(argv, prog)
    try:
        inputs = [arguments.input, *arguments.model, arguments.spm]
        check_writable(arguments.output, inputs=[*inputs, *(arguments.tsv or [])])
        words = read_words(arguments.tsv, arguments.language) if arguments.tsv else None
        lines = read_lines(arguments.input) if words is None else []
        tokenizer = load_tokenizer(arguments.spm)
        if words is None:
            sources = tagged_lines(lines, tokenizer, arguments.language)
        else:
            sources = words.sources() if tokenizer.languages else list(words.words)
        model = load_models(arguments.model)
        check_vocabulary_fits(tokenizer, model.vocabulary_size, arguments.spm)
        arguments.search.hypotheses(model)
        batch_size = fitted_batch_size(model, arguments, sys.stderr)
    except (OSError, TextLineError, ValueError, tf.errors.OpError) as error:
        raise SystemExit(f"translate: error: {error}") from None
    report_unknown_symbols(unknown_sources(tokenizer, sources), len(sources))
    cut = cut_sources(tokenizer, sources, model.max_sequence_length)
    report_long_lines(cut, len(sources), model.max_sequence_length - 1, arguments.long_lines)
    search = {"search": arguments.search, "long_sources": "translate"}
    if arguments.nbest:
        nbest = translate_nbest(model, tokenizer, sources, batch_size, **search)
        lines = [
            f"{index}\t{score:.4f}\t{text}"
            for index, hypotheses in enumerate(nbest)
            for text, score in hypotheses
        ]
    elif arguments.confidence or arguments.token_confidence:
        results = translate_with_confidence(model, tokenizer, sources, batch_size, **search)
        lines = [
            f"{text}\t{confidence.columns(arguments.token_confidence)}"
            for text, confidence in results
        ]
    else:
        lines = translate(model, tokenizer, sources, batch_size, **search)
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
    if words is not None and not arguments.nbest:
        print_error_rates([line.split("\t")[0] for line in lines], words)


def read_words(paths: list[Path], language: str | None) -> Pronunciations:
    """The words of pronunciation TSV files, each of `language` or of its file name's.

    Raises:
        FileNotFoundError, ParallelTextError: For a missing file or a bad line (named).
    """
    languages = None if language is None else [language] * len(paths)
    return read_pronunciation_files(paths, languages)


def print_error_rates(hypotheses: list[str], words: Pronunciations) -> None:
    """WER and PER of the hypotheses per language and averaged over them, on stderr."""
    languages = ["" if language is None else language for language in words.languages]
    by_language = error_rates_by_language(hypotheses, list(words.phones), languages)
    rows = [*by_language.items(), ("mean of languages", macro_average(by_language))]
    print("| language | words | WER | PER |\n|---|---|---|---|", file=sys.stderr)
    for language, rates in rows:
        print(
            f"| {language or 'all'} | {rates.words:,} | {rates.wer:.2f} | {rates.per:.2f} |",
            file=sys.stderr,
        )


def tagged_lines(lines: list[str], tokenizer, language: str | None) -> list[str]:
    """The sources of `lines`: each word tagged with `language`, for a multilingual vocabulary.

    Raises:
        ValueError: If `--language` is given for a vocabulary without languages or names one
            it has no tag for, or if a line names no language when the vocabulary needs one.
    """
    languages = tokenizer.languages
    if language is not None:
        if language not in languages:
            known = ", ".join(languages) or "none: it is not a multilingual symbol vocabulary"
            raise ValueError(f"--language {language}: the vocabulary's languages are {known}")
        return [tagged_source(line, language) for line in lines]
    for number, line in enumerate(lines, 1):
        if languages and line and split_source(line)[0] is None:
            raise ValueError(
                f"line {number} names no language ({line!r}); give --language L, or lines "
                f"LANGUAGE<TAB>word, LANGUAGE one of {', '.join(languages)}"
            )
    return lines


def fitted_batch_size(model: Decodable, arguments: argparse.Namespace, messages: TextIO) -> int:
    """`--batch-size`, lowered (and said so on `messages`) until its decoder state fits.

    A batch's memory is its sentences' decoder state (`decoder_state_bytes`: every row's
    attention caches and scores, each beam or sample a row, each model of an ensemble its own)
    at the longest source and output the model reads.

    Raises:
        ValueError: If one sentence alone needs more than `--max-batch-gib`.
    """
    search = arguments.search
    rows = search.rows_per_sentence(model)
    output_length = max_output_length(model, search.limits.max_length)
    per_sentence = sum(
        decoder_state_bytes(member, rows, model.max_sequence_length, output_length)
        for member in getattr(model, "models", (model,))
    )
    budget = arguments.max_batch_gib * 2**30
    fitting = int(budget // per_sentence)
    if fitting < 1:
        raise ValueError(
            f"one sentence of this search ({rows:,} beams or samples) needs about "
            f"{per_sentence / 2**30:.2f} GiB of decoder state, over --max-batch-gib "
            f"{arguments.max_batch_gib:g}: lower the beam or samples, or raise --max-batch-gib"
        )
    if fitting < arguments.batch_size:
        print(
            f"translate: --batch-size {arguments.batch_size:,} would need about "
            f"{arguments.batch_size * per_sentence / 2**30:.2f} GiB of decoder state; translating "
            f"{fitting:,} sentences at a time to stay within --max-batch-gib "
            f"{arguments.max_batch_gib:g}",
            file=messages,
        )
    return min(arguments.batch_size, fitting)


def report_unknown_symbols(unknown: dict[int, int], lines: int) -> None:
    """One stderr line per line holding symbols outside the vocabulary, then their count."""
    for index, count in unknown.items():
        print(
            f"translate: line {index + 1}: {count} symbol(s) outside the vocabulary, read as "
            "the unknown symbol <unk>",
            file=sys.stderr,
        )
    if unknown:
        print(
            f"translate: {len(unknown)} of {lines} lines hold {sum(unknown.values())} symbol(s) "
            "outside the vocabulary.",
            file=sys.stderr,
        )


def load_models(paths: list[Path]) -> Decodable:
    """The model of one path, or the `Ensemble` of several.

    Raises:
        ValueError: If the models differ in head or vocabulary size (naming both).
    """
    models = [load_model(path) for path in paths]
    return models[0] if len(models) == 1 else Ensemble(models)


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
