"""Allowed ranges of numeric settings: one check for constructors, config fields and flags.

A `Range` knows which numbers a kind of setting may take; `Range.check(name, value)` returns the
value or raises a `ValueError` that names the parameter, the value and the allowed range. The
losses and heads check their arguments with these ranges, `tfscones.training.config` checks
config fields with them and `tfscones.commands.argument_types` turns them into argparse types,
so a value refused in one place is refused, with the same range, in every other. NaN and
infinities are never a setting.

Example:
>>> SCONES_ALPHA.check("alpha", 0.5)
0.5
>>> SCONES_ALPHA.check("alpha", float("inf"))
Traceback (most recent call last):
...
ValueError: alpha must be a finite number in (0, inf) (got inf).
"""

from __future__ import annotations

import dataclasses
import math
import numbers


@dataclasses.dataclass(frozen=True)
class Range:
    """Finite numbers with `low <= x` (`low < x` if `low_open`) and `x <= high` likewise.

    Attributes:
        low: The lower bound; None for none.
        high: The upper bound; None for none.
        low_open: Whether `low` itself is excluded.
        high_open: Whether `high` itself is excluded.
        integer: Whether only integers are allowed (not 2.0: a float given for a count is
            more likely a mistake than a count).
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False

    def allows(self, value) -> bool:
        """Whether `value` is a number of this range (bools and non-numbers are not)."""
        kind = numbers.Integral if self.integer else numbers.Real
        if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def check(self, name: str, value, hint: str = ""):
        """`value` as an int or float if this range allows it.

        Args:
            name: The parameter's name, as the user wrote it (`alpha`, `loss.alpha`, `--beam`).
            value: The value given.
            hint: A sentence appended to the error (what the papers use, say).

        Raises:
            ValueError: If the range does not allow `value`, naming `name`, the value and the
                range.
        """
        if not self.allows(value):
            hint = f" {hint}" if hint else ""
            raise ValueError(f"{name} must be {self.description()} (got {value!r}).{hint}")
        return int(value) if self.integer else float(value)

    def description(self) -> str:
        """The range in words: `a finite number in (0, inf)`, `a whole number in [1, 1000]`."""
        kind = "a whole number" if self.integer else "a finite number"
        return f"{kind} in {self}"

    def __str__(self) -> str:
        low = "(" if self.low_open or self.low is None else "["
        high = ")" if self.high_open or self.high is None else "]"
        lower = "-inf" if self.low is None else f"{self.low:g}"
        upper = "inf" if self.high is None else f"{self.high:g}"
        return f"{low}{lower}, {upper}{high}"


POSITIVE = Range(0, low_open=True)
NON_NEGATIVE = Range(0)
FRACTION = Range(0, 1, high_open=True)
UNIT_INTERVAL = Range(0, 1)
SHARE = Range(0, 1, low_open=True)
AT_LEAST_ONE = Range(1, integer=True)
NON_NEGATIVE_INTEGER = Range(0, integer=True)

SCONES_ALPHA = POSITIVE
"""α of the SCONES loss, the weight of its negative term (Stahlberg & Kumar 2022, eq. 6)."""
LABEL_SMOOTHING = FRACTION
"""λ or ε of every loss: at 1 the target would be uniform, with nothing left to learn."""
ENTMAX_ALPHA = Range(1, low_open=True)
"""α of entmax: 2 is sparsemax, 1.5 entmax-1.5; α → 1 is softmax (Peters & Martins 2021)."""
BISECTION_STEPS = Range(1, 1000, integer=True)
"""Bisection steps of entmax for α ∉ {1.5, 2}: 30 reach float32's resolution."""
