"""What a line is, for every reader and writer of sentence files in the project.

A line ends at a newline (LF) and nowhere else, as `tf.data.TextLineDataset` and SentencePiece
read files; a carriage return is dropped wherever it stands (so Windows files read as Unix
ones). Unicode line and paragraph separators (U+2028, U+2029, U+0085), form feeds and vertical
tabs are characters inside a line, not line ends: Python's `str.splitlines` would split at
them, pairing every later translation with the wrong source. Every line must be UTF-8; a bad
one is reported with its file and 1-based line number.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from tfscones.written_aside import write_text_aside

STANDARD_INPUT = "<stdin>"


class TextLineError(ValueError):
    """A line that cannot be read as text; the message names the file and line."""


def split_lines(data: bytes) -> list[bytes]:
    """Splits bytes into lines at newlines only, carriage returns removed.

    A final newline ends the last line rather than starting an empty one.
    """
    lines = data.replace(b"\r", b"").split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def iter_byte_lines(path: str | Path) -> Iterator[bytes]:
    """Streams the lines of a file as bytes, split as `split_lines` splits them."""
    with Path(path).open("rb") as file:
        for line in file:
            yield line.removesuffix(b"\n").replace(b"\r", b"")


def decode_line(line: bytes, origin: str | Path, number: int) -> str:
    """Decodes one line as UTF-8.

    Args:
        line: The line's bytes.
        origin: The file it came from (for the message).
        number: Its 1-based line number.

    Raises:
        TextLineError: If the line is not UTF-8, naming file, line and byte offset.
    """
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = line[error.start : error.end]
        raise TextLineError(
            f"{origin}:{number}: not UTF-8: bytes {bad!r} at byte offset {error.start}"
        ) from None


def decode_lines(data: bytes, origin: str | Path) -> list[str]:
    """The lines of `data` as text (see `split_lines`); `origin` names it in errors."""
    return [decode_line(line, origin, number) for number, line in enumerate(split_lines(data), 1)]


def read_lines(path: str | Path | None) -> list[str]:
    """The lines of a UTF-8 file, or of standard input for None or "-".

    Raises:
        FileNotFoundError: If the file does not exist.
        TextLineError: If a line is not UTF-8.
    """
    if path is None or str(path) == "-":
        return decode_lines(sys.stdin.buffer.read(), STANDARD_INPUT)
    return decode_lines(Path(path).read_bytes(), path)


def format_lines(lines: Iterable[str]) -> str:
    """The text of a file holding `lines`, one a line.

    Raises:
        TextLineError: If a line holds a newline or carriage return, which would split or
            shift the lines that follow.
    """
    lines = list(lines)
    for number, line in enumerate(lines, 1):
        if "\n" in line or "\r" in line:
            raise TextLineError(f"line {number} to write holds a line break: {line!r}")
    return "".join(line + "\n" for line in lines)


def write_lines(path: str | Path | None, lines: Iterable[str]) -> None:
    """Writes `lines` as UTF-8, one a line, to a file or to standard output for None or "-".

    A file is written aside (`tfscones.written_aside`) and renamed into place, so a
    crash or a full disk leaves the file as it was, never half-written.
    """
    text = format_lines(lines)
    if path is None or str(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_text_aside(path, text)
