r"""Export a trained model as a SavedModel that stock TF Serving runs, or for CTranslate2.

    tfscones export --run runs/demo-scones-a0.5 --out exports/demo/1
    tfscones export --checkpoint model.keras --spm spm.model --out exports/demo/2 \\
        --beam-size 8 --nbest 4 --max-batch-size 32
    tfscones export --run runs/demo-scones-a0.5 --format ctranslate2 --quantization int8 \\
        --out ct2/demo-scones

(`python -m export.savedmodel` is the same command.) A SavedModel's `--out` is
`BASE/NAME/VERSION`, VERSION a positive integer; see `tfscones.serving.export` for what it holds.
A CTranslate2 export (`--format ctranslate2`, the extra `tfscones[ctranslate2]`) is a new folder
whose greedy search is exact for every head; see `tfscones.serving.ctranslate2_export`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tfscones.commands.argument_types import in_range, positive_int
from tfscones.decoding import DEFAULT_MAX_LENGTH_A, DEFAULT_MAX_LENGTH_B, OutputLimits
from tfscones.ranges import NON_NEGATIVE, POSITIVE
from tfscones.serving.export import ExportError, ExportSettings, export_run
from tfscones.serving.module import (
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_MAX_REQUEST_BYTES,
    RequestLimits,
    standard_searches,
)

FORMATS = ("savedmodel", "ctranslate2")


def parse_arguments(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    inputs = parser.add_argument_group("inputs (--run, or --checkpoint and --spm)")
    inputs.add_argument("--run", type=Path, help="training run folder (model.keras, spm.model)")
    inputs.add_argument("--checkpoint", type=Path, help=".keras model (default RUN/model.keras)")
    inputs.add_argument("--spm", type=Path, help="SentencePiece model (default RUN/spm.model)")
    parser.add_argument(
        "--out", type=Path, required=True, help="BASE/NAME/VERSION (SavedModel) or a new folder"
    )
    parser.add_argument("--format", choices=FORMATS, default="savedmodel")
    parser.add_argument(
        "--quantization",
        help="CTranslate2 weights: float32 (default), int8_float32 or int8",
    )
    search = parser.add_argument_group("beam search (SavedModel)")
    search.add_argument("--beam-size", type=positive_int, default=4)
    search.add_argument(
        "--nbest", type=positive_int, default=4, help="hypotheses the nbest signature returns"
    )
    search.add_argument("--length-penalty", type=in_range(NON_NEGATIVE), default=0.0)
    limits = parser.add_argument_group("request limits (SavedModel)")
    limits.add_argument("--max-batch-size", type=positive_int, default=DEFAULT_MAX_BATCH_SIZE)
    limits.add_argument(
        "--max-source-tokens", type=positive_int, help="default: the model's max_sequence_length"
    )
    limits.add_argument(
        "--max-output-tokens", type=positive_int, help="default: the model's max_sequence_length"
    )
    limits.add_argument("--max-length-a", type=in_range(NON_NEGATIVE), default=DEFAULT_MAX_LENGTH_A)
    limits.add_argument("--max-length-b", type=in_range(NON_NEGATIVE), default=DEFAULT_MAX_LENGTH_B)
    limits.add_argument(
        "--max-request-gib",
        type=in_range(POSITIVE),
        default=DEFAULT_MAX_REQUEST_BYTES / 2**30,
        help="memory a full request's decoder state may take (default 2)",
    )
    return parser.parse_args(argv)


def settings_from_arguments(arguments: argparse.Namespace) -> ExportSettings:
    """The beam settings and request limits the arguments give.

    Raises:
        ExportError: If they do not fit together (`--nbest` above `--beam-size`).
    """
    try:
        return _settings(arguments)
    except ValueError as error:
        raise ExportError(str(error)) from None


def _settings(arguments: argparse.Namespace) -> ExportSettings:
    output = OutputLimits(
        arguments.max_output_tokens, arguments.max_length_a, arguments.max_length_b
    )
    limits = RequestLimits(
        max_batch_size=arguments.max_batch_size,
        max_source_tokens=arguments.max_source_tokens,
        output=output,
        max_request_bytes=round(arguments.max_request_gib * 2**30),
    )
    searches = standard_searches(arguments.beam_size, arguments.nbest, arguments.length_penalty)
    return ExportSettings(searches, limits)


def export(arguments: argparse.Namespace) -> dict:
    """Runs the export the arguments describe; raises `ExportError`."""
    if arguments.format == "ctranslate2":
        return export_for_ctranslate2(arguments)
    if arguments.quantization is not None:
        raise ExportError("--quantization is a setting of --format ctranslate2")
    return export_run(
        arguments.out,
        run=arguments.run,
        checkpoint=arguments.checkpoint,
        spm=arguments.spm,
        settings=settings_from_arguments(arguments),
    )


def export_for_ctranslate2(arguments: argparse.Namespace) -> dict:
    """`export_ctranslate2` of the arguments; raises `ExportError`, also without CTranslate2."""
    try:
        from tfscones.serving.ctranslate2_export import export_ctranslate2
    except ImportError:
        raise ExportError(
            '--format ctranslate2 needs CTranslate2: pip install "tfscones[ctranslate2]"'
        ) from None
    return export_ctranslate2(
        arguments.out,
        run=arguments.run,
        checkpoint=arguments.checkpoint,
        spm=arguments.spm,
        quantization=arguments.quantization or "float32",
    )


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Entry point of `tfscones export` and `python -m export.savedmodel`."""
    arguments = parse_arguments(argv, prog)
    try:
        info = export(arguments)
    except ExportError as error:
        sys.exit(f"export error: {error}")
    print(json.dumps(info, indent=2))
