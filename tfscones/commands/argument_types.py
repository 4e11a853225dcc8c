"""argparse types the programs share: numbers checked against their range when parsed."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: an integer of at least 0."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more (got {value})")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number (got {text!r})") from None
