"""Export a trained model as a versioned SavedModel that stock TF Serving runs.

    from tfscones.serving import export_run
    settings = ExportSettings(searches=standard_searches(beam_size=8))
    export_run("exports/demo/1", run="runs/demo-scones-a0.5", settings=settings)

The output is `BASE/NAME/VERSION`, VERSION a positive integer: TF Serving serves the highest
version under `BASE/NAME` (see `export/serving/README.md`). The export is written next to it under
a hidden name and renamed into place when complete, so a server polling `BASE/NAME` never loads a
half-written version. An existing, non-empty output folder is an error: export a new version.

The SavedModel holds the signatures of `TranslationModule` (one per search, by default
`translate`, the default, `translate_beam` and `nbest`; then `translate_ids` and `score`) with
SentencePiece inside the graph; loading it needs only TensorFlow and tensorflow-text.
`assets.extra/tfscones_export.json` records the signatures, their searches and the request
limits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

import keras
import tensorflow as tf

from tfscones.data.tokenizer import load_tokenizer
from tfscones.decoding import Search
from tfscones.models import load_model
from tfscones.run_folder import RunFolder
from tfscones.serving.module import RequestLimits, TranslationModule

EXPORT_INFO = Path("assets.extra") / "tfscones_export.json"


class ExportError(Exception):
    """A problem with the export's arguments: missing inputs or an unusable output folder."""


@dataclasses.dataclass(frozen=True)
class ExportSettings:
    """What an export holds: its searches, one signature each, and its request limits.

    Both are checked when made (`Search`, `RequestLimits`), so a bad setting fails before any
    model loads; the token limits are checked against the model's positions when it loads.

    Example:
    ```python
    ExportSettings(
        searches={**standard_searches(beam_size=8), "sample": Search("sample", top_p=0.9)},
        limits=RequestLimits(max_batch_size=32, output=OutputLimits(max_length=128)),
    )
    ```

    Attributes:
        searches: Signature names and their searches, the default signature first (None:
            `standard_searches()`: greedy `translate`, beam-4 `translate_beam` and `nbest`).
        limits: The request limits (`tfscones.serving.module.RequestLimits`).
    """

    searches: Mapping[str, Search] | None = None
    limits: RequestLimits = RequestLimits()


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
        tokenizer = load_tokenizer(spm)
    except (tf.errors.OpError, OSError, RuntimeError, ValueError) as error:
        raise ExportError(f"cannot load the vocabulary {spm}: {error}") from None
    try:
        return TranslationModule(
            model, tokenizer, settings.searches, settings.limits, freeze_step_weights=True
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
    for name, function in module.endpoints.items():
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
    """What the export holds: signatures, their searches and the request limits."""
    return {
        "signatures": list(module.signature_names),
        "default_signature": module.signature_names[0],
        "searches": {
            name: {"method": search.method, **dataclasses.asdict(search.settings)}
            for name, search in module.searches.items()
        },
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
        settings: Searches and request limits (None: the defaults).

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
