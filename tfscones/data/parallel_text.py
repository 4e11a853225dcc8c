"""Aligned parallel text files (one sentence a line, UTF-8) as a `tf.data.Dataset` of pairs.

The files are checked eagerly, in Python, when `read_parallel_text` is called, streaming them line
by line: equal line counts, valid UTF-8, no empty or whitespace-only lines. A bad line either
raises `ParallelTextError` naming the file and its 1-based line number, or, with
`on_bad_line="skip"`, drops the whole pair; the dropped pairs are logged and listed in the
returned `ParallelText`. The dataset then streams the files with `tf.data.TextLineDataset`, which
splits lines at newlines and removes carriage returns; the checks read lines the same way.
"""

import dataclasses
import logging
import os
from pathlib import Path

import tensorflow as tf

from tfscones.data.text_lines import iter_byte_lines

logger = logging.getLogger(__name__)

ON_BAD_LINE = ("error", "skip")


class ParallelTextError(ValueError):
    """Parallel text files that cannot be read as aligned sentence pairs."""


@dataclasses.dataclass(frozen=True)
class BadLine:
    """One unusable line.

    Attributes:
        path: The file.
        line_number: 1-based line number.
        reason: What is wrong with it.
    """

    path: Path
    line_number: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line_number}: {self.reason}"


@dataclasses.dataclass(frozen=True)
class ParallelText:
    """Checked parallel files; `dataset()` yields their usable pairs.

    Attributes:
        source_file: File of source sentences.
        target_file: File of target sentences, line i translating line i of `source_file`.
        num_lines: Lines in each file.
        bad_lines: Every bad line found (one pair may have a bad line on each side).
        skipped_line_numbers: Sorted 1-based line numbers of the pairs that `dataset()` leaves out.
    """

    source_file: Path
    target_file: Path
    num_lines: int
    bad_lines: tuple[BadLine, ...]
    skipped_line_numbers: tuple[int, ...]

    @property
    def num_skipped(self) -> int:
        """Number of pairs left out because a side was bad."""
        return len(self.skipped_line_numbers)

    @property
    def num_pairs(self) -> int:
        """Number of pairs `dataset()` yields."""
        return self.num_lines - self.num_skipped

    def dataset(self) -> tf.data.Dataset:
        """Streams the usable pairs in file order.

        Returns:
            A dataset of `(source, target)` scalar `tf.string` pairs.
        """
        pairs = tf.data.Dataset.zip(
            tf.data.TextLineDataset(str(self.source_file)),
            tf.data.TextLineDataset(str(self.target_file)),
        )
        if not self.skipped_line_numbers:
            return pairs
        skipped = tf.constant(self.skipped_line_numbers, tf.int64)

        def is_kept(line_number: tf.Tensor, pair: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
            del pair
            index = tf.searchsorted(skipped, tf.reshape(line_number, [1]))[0]
            nearest = tf.gather(skipped, tf.minimum(index, tf.size(skipped) - 1))
            return tf.not_equal(nearest, line_number)

        return pairs.enumerate(start=1).filter(is_kept).map(lambda _, pair: pair)


def read_parallel_text(
    source_file: str | os.PathLike,
    target_file: str | os.PathLike,
    *,
    on_bad_line: str = "error",
) -> ParallelText:
    """Checks two aligned text files and returns them ready to stream as pairs.

    Example:
    ```python
    corpus = read_parallel_text("train.de", "train.en", on_bad_line="skip")
    print(corpus.num_skipped, "pairs skipped")
    pairs = corpus.dataset()  # (b"Guten Morgen.", b"Good morning.") ...
    ```

    Args:
        source_file: Source sentences, one a line, UTF-8.
        target_file: Target sentences, aligned line by line with `source_file`.
        on_bad_line: What an empty or whitespace-only line, or one that is not valid UTF-8,
            does: "error" raises at the first one; "skip" drops its pair (both sides), logs a
            warning with the count (once per process for files that have not changed), and
            records it in `ParallelText.skipped_line_numbers`.

    Returns:
        The checked files.

    Raises:
        ValueError: If `on_bad_line` is neither "error" nor "skip".
        FileNotFoundError: If a file does not exist.
        ParallelTextError: If the files have different line counts (naming both files and
            counts), if `on_bad_line="error"` and a line is bad (naming file, line number and,
            for UTF-8 errors, the bytes), or if no usable pair is left.
    """
    if on_bad_line not in ON_BAD_LINE:
        raise ValueError(f"on_bad_line must be one of {ON_BAD_LINE}, got {on_bad_line!r}")
    source, target = Path(source_file), Path(target_file)
    num_source, num_target = _count_lines(source), _count_lines(target)
    if num_source != num_target:
        raise ParallelTextError(
            f"Parallel files differ in length: {source} has {num_source} lines, "
            f"{target} has {num_target} lines"
        )

    bad_lines: list[BadLine] = []
    skipped: list[int] = []
    for line_number, (source_line, target_line) in enumerate(
        zip(iter_byte_lines(source), iter_byte_lines(target), strict=True), start=1
    ):
        pair_bad = [
            BadLine(path, line_number, reason)
            for path, line in ((source, source_line), (target, target_line))
            if (reason := _problem(line))
        ]
        if pair_bad and on_bad_line == "error":
            raise ParallelTextError(f"{pair_bad[0]} (on_bad_line='skip' drops such pairs)")
        if pair_bad:
            bad_lines.extend(pair_bad)
            skipped.append(line_number)

    corpus = ParallelText(source, target, num_source, tuple(bad_lines), tuple(skipped))
    if skipped and _first_report(source, target):
        logger.warning(
            "Skipped %d of %d pairs of %s / %s with bad lines; first: %s",
            corpus.num_skipped,
            num_source,
            source,
            target,
            bad_lines[0],
        )
    if corpus.num_pairs == 0:
        raise ParallelTextError(f"No usable sentence pairs in {source} / {target}")
    return corpus


_REPORTED: set[tuple] = set()


def _first_report(*paths: Path) -> bool:
    """Whether these files, as they are now, are reported for the first time in this process.

    A run reads its training files several times (to check them, for SentencePiece, for
    training); their skipped lines are worth one warning, and another once a file changes.
    """
    key = tuple(
        (str(path.resolve()), path.stat().st_mtime_ns, path.stat().st_size) for path in paths
    )
    if key in _REPORTED:
        return False
    _REPORTED.add(key)
    return True


def read_sentence_pairs(
    source_file: str | os.PathLike, target_file: str | os.PathLike
) -> tuple[list[str], list[str]]:
    """Every sentence pair of two parallel files as lists of strings (a test set, a corpus).

    The files are checked as `read_parallel_text` checks them, and any bad line is an error
    that names the file and line. Pass the same file twice to read one file's sentences.

    Args:
        source_file: Source sentences, one a line, UTF-8.
        target_file: Target sentences, aligned line by line with `source_file`.

    Returns:
        `(sources, targets)`, in file order.

    Raises:
        FileNotFoundError: If a file does not exist.
        ParallelTextError: If the files have different line counts or a bad line.
    """
    sources, targets = [], []
    for source_batch, target_batch in (
        read_parallel_text(source_file, target_file).dataset().batch(4096).as_numpy_iterator()
    ):
        sources += [line.decode("utf-8") for line in source_batch]
        targets += [line.decode("utf-8") for line in target_batch]
    return sources, targets


def _count_lines(path: Path) -> int:
    """Number of lines, counted as `_read_lines` and `tf.data.TextLineDataset` count them."""
    with path.open("rb") as f:
        return sum(1 for _ in f)


def _problem(line: bytes) -> str | None:
    """Returns what makes `line` unusable, or None if it is a usable sentence."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = line[error.start : error.end]
        return f"invalid UTF-8 bytes {bad!r} at byte offset {error.start}"
    if not text.strip():
        return "empty line" if not text else "whitespace-only line"
    return None


def read_reference_streams(
    source_file: str | os.PathLike, reference_files: list[str | os.PathLike]
) -> tuple[list[str], list[list[str]]]:
    """A multi-reference test set: its sources and one reference stream a file.

    Each reference file is checked against the sources as `read_sentence_pairs` checks a pair.

    Raises:
        FileNotFoundError: If a file does not exist.
        ParallelTextError: Naming a file whose line count differs, or a bad line.
    """
    sources, streams = [], []
    for reference_file in reference_files:
        sources, stream = read_sentence_pairs(source_file, reference_file)
        streams.append(stream)
    return sources, streams
