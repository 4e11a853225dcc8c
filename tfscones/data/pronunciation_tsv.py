"""Pronunciation dictionaries in the SIGMORPHON / WikiPron TSV format, read as they are.

One word a line: `graphemes<TAB>phones`, the phones separated by spaces (`abject<TAB>a b ʒ ɛ k
t`), UTF-8, one file a language. The language comes from the caller, or from the file name as
the shared task names its files (`fre_train.tsv` is French: the name up to its first `_`).

Every line is checked when the file is read, as `tfscones.data.parallel_text` checks sentence
files: not UTF-8, no tab, more than one tab, an empty or whitespace-only side are each named with
the file, the 1-based line and what is wrong; `on_bad_line="skip"` drops such a line instead and
counts it. The words become the sources of a `SymbolTokenizer` (`LANGUAGE<TAB>word`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import tensorflow as tf

from tfscones.data.parallel_text import ON_BAD_LINE, BadLine, ParallelTextError
from tfscones.data.symbol_vocab import tagged_source
from tfscones.data.text_lines import iter_byte_lines

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Pronunciations:
    """The checked words of one or more TSV files, in file order.

    Attributes:
        words: The grapheme strings.
        phones: Their pronunciations, labels separated by spaces.
        languages: Each word's language (None for files read without one).
        bad_lines: The lines left out (`on_bad_line="skip"`).
    """

    words: tuple[str, ...]
    phones: tuple[str, ...]
    languages: tuple[str | None, ...]
    bad_lines: tuple[BadLine, ...] = ()

    def sources(self) -> list[str]:
        """The model's source strings: `LANGUAGE<TAB>word`, or the word without a language."""
        return [
            tagged_source(word, language)
            for word, language in zip(self.words, self.languages, strict=True)
        ]

    def dataset(self) -> tf.data.Dataset:
        """`(source, phones)` scalar string pairs, in file order."""
        return tf.data.Dataset.from_tensor_slices(
            (tf.constant(self.sources(), tf.string), tf.constant(self.phones, tf.string))
        )

    def __add__(self, other: Pronunciations) -> Pronunciations:
        return Pronunciations(
            self.words + other.words,
            self.phones + other.phones,
            self.languages + other.languages,
            self.bad_lines + other.bad_lines,
        )


def language_of_file(path: str | os.PathLike) -> str:
    """The language the shared task's file name gives: `fre` for `.../fre_train.tsv`.

    Raises:
        ParallelTextError: If the name holds no `_` before its suffix.
    """
    name = Path(path).name
    language, separator, _ = name.partition("_")
    if not separator or not language:
        raise ParallelTextError(
            f"cannot tell the language of {path} from its name (the shared task's files are "
            "named LANGUAGE_SPLIT.tsv); say its language (data.languages in a config, "
            "--language to translate)"
        )
    return language


def read_pronunciations(
    path: str | os.PathLike, language: str | None = None, on_bad_line: str = "error"
) -> Pronunciations:
    """Reads and checks one pronunciation TSV file.

    Example:
    ```python
    french = read_pronunciations("fre_train.tsv", language="fre")
    french.phones[0]  # "a b ɑ̃ d ɔ n e", the pronunciation of french.words[0], "abandonner"
    ```

    Args:
        path: The file.
        language: The language of its words; None for words without one.
        on_bad_line: "error" raises at the first bad line; "skip" leaves it out, warns once
            with the count, and lists it in `bad_lines`.

    Raises:
        ValueError: If `on_bad_line` is neither "error" nor "skip".
        FileNotFoundError: If the file does not exist.
        ParallelTextError: At a bad line (`on_bad_line="error"`: the file, line and problem),
            or if the file holds no usable line.
    """
    if on_bad_line not in ON_BAD_LINE:
        raise ValueError(f"on_bad_line must be one of {ON_BAD_LINE}, got {on_bad_line!r}")
    path = Path(path)
    words, phones, bad_lines = [], [], []
    for number, line in enumerate(iter_byte_lines(path), start=1):
        fields, problem = _fields(line)
        if problem:
            bad = BadLine(path, number, problem)
            if on_bad_line == "error":
                raise ParallelTextError(f"{bad} (on_bad_line='skip' drops such lines)")
            bad_lines.append(bad)
            continue
        words.append(fields[0])
        phones.append(fields[1])
    if bad_lines:
        logger.warning("Skipped %d bad lines of %s; first: %s", len(bad_lines), path, bad_lines[0])
    if not words:
        raise ParallelTextError(f"No usable pronunciations in {path}")
    return Pronunciations(tuple(words), tuple(phones), (language,) * len(words), tuple(bad_lines))


def read_pronunciation_files(
    paths: Sequence[str | os.PathLike],
    languages: Sequence[str | None] | None = None,
    on_bad_line: str = "error",
) -> Pronunciations:
    """Several TSV files, one language each, read one after the other.

    Args:
        paths: The files.
        languages: Each file's language; None takes it from each file's name
            (`language_of_file`).
        on_bad_line: As for `read_pronunciations`.

    Raises:
        ValueError: If `languages` and `paths` differ in length.
        ParallelTextError, FileNotFoundError: As `read_pronunciations` and `language_of_file`.
    """
    if languages is None:
        languages = [language_of_file(path) for path in paths]
    if len(languages) != len(paths):
        raise ValueError(f"{len(paths)} files but {len(languages)} languages")
    read = [
        read_pronunciations(path, language, on_bad_line)
        for path, language in zip(paths, languages, strict=True)
    ]
    return sum(read[1:], read[0])


def _fields(line: bytes) -> tuple[list[str], str | None]:
    """The two fields of a line, or what is wrong with it."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = line[error.start : error.end]
        return [], f"invalid UTF-8 bytes {bad!r} at byte offset {error.start}"
    fields = text.split("\t")
    if len(fields) != 2:
        found = "no tab" if len(fields) == 1 else f"{len(fields) - 1} tabs"
        return [], f"{found}: a line is graphemes<TAB>phones"
    for side, field in zip(("graphemes", "phones"), fields, strict=True):
        if not field.strip():
            return [], f"empty {side}"
    return fields, None
