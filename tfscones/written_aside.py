"""Files written aside and renamed into place, so a crash or a full disk never leaves half a file.

`written_aside(path)` gives the caller a partial name beside `path` to write (any writer: text,
Keras weights, a `.keras` model), renames it over `path` when the block ends without an error,
and removes it when one is raised; a full disk comes out as `DiskFull`, which names the folder,
never as a writer's own traceback; `write_text_aside` writes text that way. Before any work,
`check_space` refuses a disk that cannot hold a large file, `check_folder` a folder a command
cannot make or write in, and `check_writable` an output file that cannot be written or is one
of the command's inputs.

Example:
```python
with written_aside(run / "checkpoints" / "best.keras") as partial:
    model.save(partial)
```
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

FULL_DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT)
"""The `OSError` numbers of a disk (or a quota) that has no room left."""


class DiskFull(OSError):
    """A file could not be written for lack of space; the message names its folder."""

    def __str__(self) -> str:
        return self.strerror


def partial_path(path: Path) -> Path:
    """The hidden name `path` is written under: `.NAME.partial-PID` and `path`'s suffixes.

    The suffixes stay last (`.best.partial-12.keras`, `.latest.partial-12.weights.h5`) because
    Keras chooses a writer by them.
    """
    suffixes = "".join(path.suffixes)
    stem = path.name.removesuffix(suffixes) if suffixes else path.name
    return path.with_name(f".{stem}.partial-{os.getpid()}{suffixes}")


@contextlib.contextmanager
def written_aside(path: str | Path) -> Iterator[Path]:
    """Yields a partial name beside `path`; renames it over `path` if the block succeeds.

    A link is followed (the file it names is replaced, the link stays); a device or a pipe
    (`/dev/stdout`, a FIFO) is yielded itself and written as it is, since a rename would
    replace it.

    Raises:
        DiskFull: If the disk (or quota) ran out while writing, naming `path`'s folder; `path`
            is then as it was before.
    """
    path = Path(os.path.realpath(path)) if Path(path).is_symlink() else Path(path)
    if path.exists() and not path.is_file():
        with _full_disk_named(path):
            yield path
        return
    partial = partial_path(path)
    try:
        with _full_disk_named(path):
            yield partial
            os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


@contextlib.contextmanager
def _full_disk_named(path: Path) -> Iterator[None]:
    """Turns a full disk while `path` is written into `DiskFull`, naming its folder."""
    try:
        yield
    except OSError as error:
        if is_full_disk(error):
            raise DiskFull(
                error.errno, f"no space left on the disk of {path.parent} to write {path.name}"
            ) from None
        raise


def is_full_disk(error: BaseException) -> bool:
    """Whether `error` is a disk or quota that ran out, from Python or a native writer.

    TensorFlow's and CTranslate2's writers raise their own errors, whose message is the
    system's (`No space left on device`, `Disk quota exceeded`).
    """
    if isinstance(error, OSError) and error.errno in FULL_DISK_ERRORS:
        return True
    return any(os.strerror(number) in str(error) for number in FULL_DISK_ERRORS)


def check_folder(folder: str | Path, label: str) -> None:
    """Refuses, before any work, a folder that cannot be made, or written in.

    Args:
        folder: The folder a command will make (with its parents) or write in.
        label: How the user named it, for the message (`--out runs/a`).

    Raises:
        NotADirectoryError: If `folder`, or the nearest of its parents that exists, is not a
            folder (a file, a device).
        PermissionError: If that one cannot be written in.
    """
    folder = Path(folder)
    existing = next(path for path in (folder, *folder.absolute().parents) if path.exists())
    if not existing.is_dir():
        raise NotADirectoryError(f"{label}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(f"{label}: {existing} is not writable")


def check_space(folder: str | Path, needed_bytes: int, what: str) -> None:
    """Refuses to start writing `what` into `folder` when its disk has not `needed_bytes` free.

    Args:
        folder: An existing folder on the disk to write to.
        needed_bytes: What the file will take.
        what: The file, in words, for the message (`the backup of step 1,200`).

    Raises:
        DiskFull: Naming the folder, what it needs and what is free.
    """
    free = shutil.disk_usage(folder).free
    if free < needed_bytes:
        raise DiskFull(
            errno.ENOSPC,
            f"no space left on the disk of {folder} for {what}: it needs about "
            f"{_megabytes(needed_bytes)}, {_megabytes(free)} are free",
        )


def _megabytes(size: int) -> str:
    return f"{size / 2**20:,.1f} MB"


def write_text_aside(path: str | Path, text: str) -> None:
    """Writes UTF-8 `text` to a partial file beside `path`, then renames it into place.

    A crash or a full disk leaves `path` as it was, never half-written, and no partial file.

    Raises:
        DiskFull: If the disk is full, naming the folder.
    """
    with written_aside(path) as partial:
        partial.write_text(text, encoding="utf-8")


def check_writable(path: str | Path | None, inputs: Iterable[str | Path | None] = ()) -> None:
    """Refuses an output file that cannot be written, before any work is done for it.

    Args:
        path: The file; None or "-" (standard output) always passes.
        inputs: The files the same command reads: writing over one of them would lose it.

    Raises:
        OSError: Naming the path and why: a folder, a missing folder, no permission, or one of
            `inputs` (the same file, by any name or link).
    """
    if path is None or str(path) == "-":
        return
    path = Path(path)
    for source in inputs:
        if source is not None and str(source) != "-" and _same_file(path, Path(source)):
            raise FileExistsError(
                f"cannot write {path}: it is the input {source}, which would be lost; "
                "give another --output"
            )
    if path.is_dir():
        raise IsADirectoryError(f"cannot write {path}: it is a folder, not a file")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot write {path}: the folder {path.parent} does not exist")
    target = path if path.exists() else path.parent
    if not os.access(target, os.W_OK):
        raise PermissionError(f"cannot write {path}: permission denied")


def _same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one existing file."""
    try:
        return first.samefile(second)
    except OSError:
        return False
