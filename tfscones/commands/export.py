r"""Export a trained model as a SavedModel that stock TF Serving runs, or for CTranslate2.

    tfscones export --run runs/demo-scones-a0.5 --out exports/demo/1
    tfscones export --checkpoint model.keras --spm spm.model --out exports/demo/2 \\
        --beam-size 8 --nbest 4 --max-batch-size 32
    tfscones export --run runs/demo-scones-a0.5 --xla --out exports/demo/3
    tfscones export --run runs/demo-scones-a0.5 --format ctranslate2 --quantization int8 \\
        --out ct2/demo-scones

(`python -m export.savedmodel` is the same command.) A SavedModel's `--out` is
`BASE/NAME/VERSION`, VERSION a positive integer; see `tfscones.serving.export` for what it holds.
A CTranslate2 export (`--format ctranslate2`, the extra `tfscones[ctranslate2]`) is a new folder
whose greedy search is exact for every head; see `tfscones.serving.ctranslate2_export`.
A flag of one format only (the beam settings and request limits are the SavedModel's,
`--quantization` CTranslate2's) is refused for the other.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tfscones.commands import INTERRUPTED
from tfscones.commands.argument_types import in_range, positive_int
from tfscones.decoding import DEFAULT_MAX_LENGTH_A, DEFAULT_MAX_LENGTH_B, OutputLimits
from tfscones.ranges import LENGTH_PENALTY, NON_NEGATIVE, POSITIVE, SEARCH_COUNT
from tfscones.serving.export import ExportError, ExportSettings, export_run
from tfscones.serving.module import (
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_MAX_REQUEST_BYTES,
    RequestLimits,
    standard_searches,
)

FORMATS = ("savedmodel", "ctranslate2")
SAVEDMODEL = ("savedmodel",)
CTRANSLATE2 = ("ctranslate2",)


class FormatSetting(argparse.Action):
    """A flag that is a setting of some formats only: stores its value and notes it was given.

    `check_format_settings` refuses it for any other `--format`, so that no flag is dropped
    without a word.
    """

    def __init__(self, option_strings, dest, formats: tuple[str, ...], **options):
        super().__init__(option_strings, dest, **options)
        self.formats = formats

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.format_settings = {
            **namespace.format_settings,
            self.option_strings[0]: self.formats,
        }


class FormatFlag(FormatSetting):
    """A `FormatSetting` that takes no value: False unless given, True when given."""

    def __init__(self, option_strings, dest, formats: tuple[str, ...], **options):
        super().__init__(option_strings, dest, formats, nargs=0, default=False, **options)

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, True, option_string)


def parse_arguments(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.set_defaults(format_settings={})
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
        action=FormatSetting,
        formats=CTRANSLATE2,
        help="CTranslate2 weights: float32 (default), int8_float32 or int8",
    )
    search = parser.add_argument_group("beam search (SavedModel)")
    savedmodel_only = {"action": FormatSetting, "formats": SAVEDMODEL}
    search.add_argument("--beam-size", type=in_range(SEARCH_COUNT), default=4, **savedmodel_only)
    search.add_argument(
        "--nbest",
        type=in_range(SEARCH_COUNT),
        default=4,
        help="hypotheses the nbest signature returns",
        **savedmodel_only,
    )
    search.add_argument(
        "--length-penalty", type=in_range(LENGTH_PENALTY), default=0.0, **savedmodel_only
    )
    search.add_argument(
        "--xla",
        action=FormatFlag,
        formats=SAVEDMODEL,
        help="compile the searches with XLA (TF Serving: --xla_cpu_compilation_enabled=true)",
    )
    limits = parser.add_argument_group("request limits (SavedModel)")
    limits.add_argument(
        "--max-batch-size", type=positive_int, default=DEFAULT_MAX_BATCH_SIZE, **savedmodel_only
    )
    limits.add_argument(
        "--max-source-tokens",
        type=positive_int,
        help="default: the model's max_sequence_length",
        **savedmodel_only,
    )
    limits.add_argument(
        "--max-output-tokens",
        type=positive_int,
        help="default: the model's max_sequence_length",
        **savedmodel_only,
    )
    limits.add_argument(
        "--max-length-a",
        type=in_range(NON_NEGATIVE),
        default=DEFAULT_MAX_LENGTH_A,
        **savedmodel_only,
    )
    limits.add_argument(
        "--max-length-b",
        type=in_range(NON_NEGATIVE),
        default=DEFAULT_MAX_LENGTH_B,
        **savedmodel_only,
    )
    limits.add_argument(
        "--max-request-gib",
        type=in_range(POSITIVE),
        default=DEFAULT_MAX_REQUEST_BYTES / 2**30,
        help="memory a full request's decoder state may take (default 2)",
        **savedmodel_only,
    )
    return parser.parse_args(argv)


def check_format_settings(arguments: argparse.Namespace) -> None:
    """Refuses every flag given that is not a setting of the chosen `--format`.

    Raises:
        ExportError: Naming each such flag, the formats it is a setting of, and `--format`.
    """
    refused: dict[tuple[str, ...], list[str]] = {}
    for flag, formats in arguments.format_settings.items():
        if arguments.format not in formats:
            refused.setdefault(formats, []).append(flag)
    if refused:
        raise ExportError(
            "; ".join(
                f"{_settings_of(flags)} of --format {' or '.join(formats)}, not {arguments.format}"
                for formats, flags in refused.items()
            )
        )


def _settings_of(flags: list[str]) -> str:
    """`--a is a setting`, `--a and --b are settings`, `--a, --b and --c are settings`."""
    if len(flags) == 1:
        return f"{flags[0]} is a setting"
    return f"{', '.join(flags[:-1])} and {flags[-1]} are settings"


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
    return ExportSettings(searches, limits, xla=arguments.xla)


def export(arguments: argparse.Namespace) -> dict:
    """Runs the export the arguments describe; raises `ExportError`."""
    check_format_settings(arguments)
    if arguments.format == "ctranslate2":
        return export_for_ctranslate2(arguments)
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
    except KeyboardInterrupt:
        # The export removed its hidden folder on the way out: `--out` is as it was.
        print(f"export interrupted: nothing was written to {arguments.out}", file=sys.stderr)
        raise SystemExit(INTERRUPTED) from None
    print(json.dumps(info, indent=2))
