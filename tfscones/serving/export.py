"""Export a trained model as a versioned SavedModel that stock TF Serving runs.

    from tfscones.serving import export_run
    settings = ExportSettings(searches=standard_searches(beam_size=8))
    export_run("exports/demo/1", run="runs/demo-scones-a0.5", settings=settings)

The output is `BASE/NAME/VERSION`, VERSION a positive integer: TF Serving serves the highest
version under `BASE/NAME` (see `export/serving/README.md`). The export is written next to it under
a hidden name and renamed into place when complete, so a server polling `BASE/NAME` never loads a
half-written version. An existing, non-empty output folder is an error: export a new version.
The folder is claimed before the model loads, so a second export into it is refused at once.

The SavedModel holds the signatures of `TranslationModule` (one per search, by default
`translate`, the default, `translate_beam` and `nbest`; then `translate_ids` and `score`) with
SentencePiece inside the graph; loading it needs only TensorFlow and tensorflow-text.
`assets.extra/tfscones_export.json` records the signatures, their searches, the request
limits and whether the searches are compiled with XLA (`ExportSettings.xla`; TF Serving then
needs `--xla_cpu_compilation_enabled=true`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import itertools
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
from tfscones.models.loading import check_vocabulary_fits
from tfscones.run_folder import RunFolder
from tfscones.serving.module import RequestLimits, TranslationModule
from tfscones.written_aside import check_folder, is_full_disk

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
        xla: Whether the searches run compiled with XLA (`TranslationModule(jit_compile=True)`):
            TF Serving must then be started with `--xla_cpu_compilation_enabled=true`.
    """

    searches: Mapping[str, Search] | None = None
    limits: RequestLimits = RequestLimits()
    xla: bool = False


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
    """Checks that `out` is a new TF Serving version folder that can be made.

    Raises:
        ExportError: If its name is not a positive integer, a parent is a file or cannot be
            written, or it exists and is not empty.
    """
    if not out.name.isdigit() or int(out.name) < 1 or str(int(out.name)) != out.name:
        raise ExportError(
            f"--out must end with a version folder named by a positive integer, as TF Serving "
            f"expects (BASE/NAME/1, BASE/NAME/2, ...); got {out}"
        )
    check_parents(out)
    if holds_something(out):
        versions = [int(p.name) for p in out.parent.iterdir() if p.name.isdigit()]
        raise ExportError(
            f"{out} exists and is not empty; export a new version instead, for example "
            f"{out.parent / str(max(versions, default=0) + 1)}"
        )


def check_parents(out: Path) -> None:
    """Checks that the folders above `out` are folders, or can be made, before any work.

    Raises:
        ExportError: If the nearest of them that exists is not a folder, or cannot be written.
    """
    try:
        check_folder(out.parent, f"--out {out}")
    except OSError as error:
        raise ExportError(str(error)) from None


def holds_something(out: Path) -> bool:
    """Whether `out` is there as anything but an empty folder (which an export may replace)."""
    return out.exists() and (not out.is_dir() or any(out.iterdir()))


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
        check_vocabulary_fits(tokenizer, model.vocabulary_size, spm)
    except ValueError as error:
        raise ExportError(str(error)) from None
    try:
        return TranslationModule(
            model,
            tokenizer,
            settings.searches,
            settings.limits,
            freeze_step_weights=True,
            jit_compile=settings.xla,
        )
    except ValueError as error:
        raise ExportError(str(error)) from None


def write_savedmodel(module: TranslationModule, out: Path) -> None:
    """Writes the module's signatures as a SavedModel, `translate` as `serving_default`.

    The SavedModel is written to a hidden sibling folder, then renamed to `out`
    (`staged_folder`).

    Raises:
        ExportError: If another export is writing `out`, or wrote it first.
    """
    with staged_folder(out) as staging:
        save_module(module, staging)


def save_module(module: TranslationModule, folder: Path) -> None:
    """Writes the module's SavedModel and its export info into `folder`, a new folder.

    Keras's `ExportArchive` saves the variables the signatures use and the tokenizer's
    SentencePiece resource (tracked explicitly: keras-hub issue #1629 is that resource left out).
    """
    archive = keras.export.ExportArchive()
    archive.track(module.model)
    archive.track(module.tokenizer)
    for name, function in module.endpoints.items():
        function.get_concrete_function()
        archive.add_endpoint(name, function)
    folder.mkdir()
    archive.write_out(str(folder), verbose=False)
    info = folder / EXPORT_INFO
    info.parent.mkdir(exist_ok=True)
    info.write_text(json.dumps(export_info(module), indent=2) + "\n", encoding="utf-8")


@contextlib.contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """A hidden folder to write `out` in, renamed to `out` when the block succeeds.

    Entered before the work, it claims `out` for this process: `.NAME.partial` beside it, held
    with an advisory `flock` that the kernel releases however the process ends (a folder left
    by a killed export is taken over). A server or user watching `out` never sees a
    half-written export, and `out` is never replaced unless it is an empty folder: the final
    rename fails rather than clobber what another process wrote. On any error (Ctrl-C
    included) the hidden folder, and the parents of `out` made for it, are removed and `out`
    is left as it was. The yielded folder does not exist: the block creates it.

    Raises:
        ExportError: At once if a parent of `out` is a file or another export is writing
            `out`; at the end if another process wrote `out` meanwhile, or the disk ran out
            of space (naming its folder).
    """
    check_parents(out)
    made = list(itertools.takewhile(lambda parent: not parent.exists(), out.absolute().parents))
    out.parent.mkdir(parents=True, exist_ok=True)
    claim = out.parent / f".{out.name}.partial"
    try:
        with _claimed(claim, out):
            if holds_something(out):
                raise _written_meanwhile(out)
            try:
                yield claim / "export"
            except Exception as error:
                if is_full_disk(error):
                    raise ExportError(
                        f"no space left on the disk of {out.parent} for the export; nothing "
                        f"was written to {out}: free space, then export again"
                    ) from None
                raise
            _rename_into_place(claim / "export", out)
    except BaseException:
        for parent in made:  # nearest first; a folder another process wrote into stays
            with contextlib.suppress(OSError):
                parent.rmdir()
        raise


@contextlib.contextmanager
def _claimed(claim: Path, out: Path) -> Iterator[None]:
    """Holds the folder `claim` (made if missing, emptied) for the block, and removes it after.

    Raises:
        ExportError: If another process holds it.
    """
    claim.mkdir(exist_ok=True)
    descriptor = os.open(claim, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ExportError(
                f"another export (pid {_read_holder(claim)}) is writing {out}; wait for it to "
                "end, or export to another folder"
            ) from None
        try:
            shutil.rmtree(claim / "export", ignore_errors=True)  # of an export that was killed
            (claim / "pid").write_text(f"{os.getpid()}\n", encoding="utf-8")
            yield
        finally:
            shutil.rmtree(claim, ignore_errors=True)
    finally:
        os.close(descriptor)


def _read_holder(claim: Path) -> str:
    try:
        return (claim / "pid").read_text(encoding="utf-8").strip() or "unknown"
    except OSError:
        return "unknown"


def _rename_into_place(staging: Path, out: Path) -> None:
    """Renames `staging` to `out`, which may be missing or an empty folder, and nothing else."""
    try:
        staging.rename(out)
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
            raise
        raise _written_meanwhile(out) from None


def _written_meanwhile(out: Path) -> ExportError:
    return ExportError(
        f"{out} was written by another process while this export ran; it is left as it is "
        "and this export is discarded: export to a new folder"
    )


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
        "xla": module.jit_compile,
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
        ExportError: If an input is missing, the output folder is unusable or another export
            is writing it, or a setting is invalid (all checked before the model loads).
    """
    out = Path(out)
    checkpoint, spm = input_files(run, checkpoint, spm)
    check_output(out)
    with staged_folder(out) as staging:
        module = build_module(settings or ExportSettings(), checkpoint, spm)
        save_module(module, staging)
    return {"path": str(out), **export_info(module)}
