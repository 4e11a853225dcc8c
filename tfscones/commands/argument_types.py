"""argparse types the programs share: numbers checked against their range, run folders.

A flag's error says what it must be in the words of the range, as a constructor's or a config
field's error does: `--beam: must be a whole number in [0, inf) (got -2)`; a run folder's says
which file it lacks.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from tfscones.ranges import AT_LEAST_ONE, NON_NEGATIVE_INTEGER, Range
from tfscones.run_folder import RunFolder


def in_range(allowed: Range) -> Callable[[str], int | float]:
    """An argparse type: a number of `allowed`, whole if the range is."""

    def parse(text: str) -> int | float:
        try:
            value = int(text) if allowed.integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be {allowed.description()} (got {text!r})"
            ) from None
        if not allowed.allows(value):
            raise argparse.ArgumentTypeError(f"must be {allowed.description()} (got {value})")
        return value

    return parse


positive_int = in_range(AT_LEAST_ONE)
"""An argparse type: a whole number of at least 1."""
non_negative_int = in_range(NON_NEGATIVE_INTEGER)
"""An argparse type: a whole number of at least 0."""


def decodable_run(text: str) -> Path:
    """An argparse type: a training run folder holding what decoding needs.

    Raises:
        argparse.ArgumentTypeError: Naming the folder and each missing file
            (`RunFolder.check_decodable`).
    """
    try:
        RunFolder(text).check_decodable()
    except FileNotFoundError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return Path(text)
