"""Export a trained model as a versioned SavedModel that stock TF Serving runs.

    from tfscones.serving import export_run
    export_run("exports/demo/1", run="runs/demo-scones-a0.5", settings=ExportSettings(beam_size=8))

The output is `BASE/NAME/VERSION`, VERSION a positive integer: TF Serving serves the highest
version under `BASE/NAME` (see `export/serving/README.md`). The export is written next to it under
a hidden name and renamed into place when complete, so a server polling `BASE/NAME` never loads a
half-written version. An existing, non-empty output folder is an error: export a new version.

The SavedModel holds the signatures of `TranslationModule` (`translate`, the default,
`translate_beam`, `nbest`, `translate_ids`, `score`) with SentencePiece inside the graph; loading
it needs only TensorFlow and tensorflow-text. `assets.extra/tfscones_export.json` records the
signatures and the request limits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import keras
import tensorflow as tf

from tfscones import ranges
from tfscones.data import Tokenizer
from tfscones.decoding import common
from tfscones.models import load_model
from tfscones.run_folder import RunFolder
from tfscones.serving.module import (
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_MAX_REQUEST_BYTES,
    TranslationModule,
)

EXPORT_INFO = Path("assets.extra") / "tfscones_export.json"


class ExportError(Exception):
    """A problem with the export's arguments: missing inputs or an unusable output folder."""


@dataclasses.dataclass(frozen=True)
class ExportSettings:
    """The beam settings and request limits baked into the exported signatures.

    Checked when made (`tfscones.ranges`), so a bad setting fails before any model loads; the
    token limits are checked against the model's positions when it loads.

    Attributes:
        beam_size: Beam of `translate_beam` and `nbest`.
        nbest: Hypotheses the `nbest` signature returns.
        length_penalty: GNMT length penalty of the beam signatures (0: off).
        max_batch_size: Sentences a request may hold.
        max_source_tokens: Longer sources are truncated (None: the model's maximum).
        max_output_tokens: Longest output (None: the model's maximum).
        max_length_a: Outputs are at most `a * source length + b` tokens long.
        max_length_b: See `max_length_a`.
        max_request_bytes: Memory a full request's decoder state may take
            (`tfscones.serving.module.RequestLimits`).
    """

    beam_size: int = 4
    nbest: int = 4
    length_penalty: float = 0.0
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    max_source_tokens: int | None = None
    max_output_tokens: int | None = None
    max_length_a: float = common.DEFAULT_MAX_LENGTH_A
    max_length_b: float = common.DEFAULT_MAX_LENGTH_B
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES

    def __post_init__(self):
        for name in ("beam_size", "max_batch_size", "max_request_bytes"):
            ranges.AT_LEAST_ONE.check(name, getattr(self, name))
        ranges.Range(1, self.beam_size, integer=True).check("nbest", self.nbest)
        for name in ("max_source_tokens", "max_output_tokens"):
            if getattr(self, name) is not None:
                ranges.AT_LEAST_ONE.check(name, getattr(self, name))
        for name in ("length_penalty", "max_length_a", "max_length_b"):
            ranges.NON_NEGATIVE.check(name, getattr(self, name))


def input_files(
    run: Path | None, checkpoint: Path | None = None, spm: Path | None = None
) -> tuple[Path, Path]:
    """The model and SentencePiece files to export: a run folder's, or the two given.

    Raises:
        ExportError: If neither a run nor both files are given, or a file does not exist.
    """
    if run is None and (checkpoint is None or spm is None):
        raise ExportError("give --run, or both --checkpoint and --spm")
    if run is not None and not Path(run).is_dir():
        raise ExportError(f"--run {run} is not a folder")
    checkpoint = Path(checkpoint or RunFolder(run).model)
    spm = Path(spm or RunFolder(run).tokenizer)
    for path in (checkpoint, spm):
        if not path.is_file():
            raise ExportError(f"{path} does not exist")
    return checkpoint, spm


def check_output(out: Path) -> None:
    """Checks that `out` is a new TF Serving version folder.

    Raises:
        ExportError: If its name is not a positive integer or it exists and is not empty.
    """
    if not out.name.isdigit() or int(out.name) < 1 or str(int(out.name)) != out.name:
        raise ExportError(
            f"--out must end with a version folder named by a positive integer, as TF Serving "
            f"expects (BASE/NAME/1, BASE/NAME/2, ...); got {out}"
        )
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        versions = [int(p.name) for p in out.parent.iterdir() if p.name.isdigit()]
        raise ExportError(
            f"{out} exists and is not empty; export a new version instead, for example "
            f"{out.parent / str(max(versions, default=0) + 1)}"
        )


def build_module(settings: ExportSettings, checkpoint: Path, spm: Path) -> TranslationModule:
    """Loads the model and tokenizer and wraps them in a `TranslationModule`.

    Raises:
        ExportError: If a file cannot be loaded, the model and tokenizer do not fit together,
            or a setting is invalid.
    """
    try:
        model = load_model(checkpoint)
    except (OSError, ValueError, TypeError) as error:
        raise ExportError(f"cannot load the model {checkpoint}: {error}") from None
    try:
        tokenizer = Tokenizer.from_file(spm)
    except (tf.errors.OpError, RuntimeError, ValueError) as error:
        raise ExportError(f"cannot load the SentencePiece model {spm}: {error}") from None
    try:
        return TranslationModule(
            model,
            tokenizer,
            beam_size=settings.beam_size,
            num_hypotheses=settings.nbest,
            length_penalty=settings.length_penalty,
            max_batch_size=settings.max_batch_size,
            max_source_tokens=settings.max_source_tokens,
            max_output_tokens=settings.max_output_tokens,
            max_length_a=settings.max_length_a,
            max_length_b=settings.max_length_b,
            max_request_bytes=settings.max_request_bytes,
            freeze_step_weights=True,
        )
    except ValueError as error:
        raise ExportError(str(error)) from None


def write_savedmodel(module: TranslationModule, out: Path) -> None:
    """Writes the module's signatures as a SavedModel, `translate` as `serving_default`.

    Keras's `ExportArchive` saves the variables the signatures use and the tokenizer's
    SentencePiece resource (tracked explicitly: keras-hub issue #1629 is that resource left out).
    The SavedModel is written to a hidden sibling folder, then renamed to `out`.
    """
    archive = keras.export.ExportArchive()
    archive.track(module.model)
    archive.track(module.tokenizer)
    for name in module.signature_names:
        function = getattr(module, name)
        function.get_concrete_function()
        archive.add_endpoint(name, function)
    with staged_folder(out) as staging:
        staging.mkdir()
        archive.write_out(str(staging), verbose=False)
        info = staging / EXPORT_INFO
        info.parent.mkdir(exist_ok=True)
        info.write_text(json.dumps(export_info(module), indent=2) + "\n", encoding="utf-8")


@contextlib.contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """A hidden sibling of `out` to write into, renamed to `out` when the block succeeds.

    A server or user watching `out` never sees a half-written export. `out` may exist only as
    an empty folder. On any error (Ctrl-C included) the sibling is removed and `out` is left as
    it was. The sibling is not created: the block creates it.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        yield staging
        if out.exists():
            out.rmdir()
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def export_info(module: TranslationModule) -> dict:
    """What the export holds: signatures, beam settings and request limits."""
    return {
        "signatures": list(module.signature_names),
        "default_signature": module.signature_names[0],
        "beam_size": module.beam_size,
        "num_hypotheses": module.num_hypotheses,
        "length_penalty": module.length_penalty,
        "limits": dataclasses.asdict(module.limits),
        "vocabulary_size": module.tokenizer.vocab_size,
        "head": type(module.model.head).__name__,
    }


def export_run(
    out: str | Path,
    run: str | Path | None = None,
    checkpoint: str | Path | None = None,
    spm: str | Path | None = None,
    settings: ExportSettings | None = None,
) -> dict:
    """Exports a trained model (a run folder's, or a checkpoint and a SentencePiece model).

    Args:
        out: The new version folder, `BASE/NAME/VERSION`.
        run: A training run folder (its `model.keras` and `spm.model`).
        checkpoint: A `.keras` model, in place of the run's.
        spm: A SentencePiece model, in place of the run's.
        settings: Beam settings and request limits (None: the defaults).

    Returns:
        `export_info` of the export, with its `path`.

    Raises:
        ExportError: If an input is missing, the output folder is unusable, or a setting is
            invalid (checked before the model loads).
    """
    out = Path(out)
    checkpoint, spm = input_files(run, checkpoint, spm)
    check_output(out)
    module = build_module(settings or ExportSettings(), checkpoint, spm)
    write_savedmodel(module, out)
    return {"path": str(out), **export_info(module)}
