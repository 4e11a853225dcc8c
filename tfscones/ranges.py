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
        lower = "-inf" if self.low is None else _bound(self.low)
        upper = "inf" if self.high is None else _bound(self.high)
        return f"{low}{lower}, {upper}{high}"


def _bound(value: float) -> str:
    """A bound as a reader takes it: an int in full (`2147483647`), a float short (`1e-30`)."""
    return str(value) if isinstance(value, int) else f"{value:g}"


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

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1

SEARCH_COUNT = Range(1, _INT32_MAX, integer=True)
"""Beams, groups, samples or hypotheses per sentence: each becomes a dimension of a tensor,
which TensorFlow's shapes and `tf.math.top_k` count in int32. (Memory runs out far sooner on a
real model; this bound is what no model can decode.)"""
TOP_K = Range(0, _INT32_MAX, integer=True)
"""k of top-k sampling, 0 for every token: the `k` of `tf.math.top_k`, an int32; a k above the
vocabulary keeps all of it."""
NUCLEUS_MASS = Range(0, 1, low_open=True)
"""p of nucleus (top-p) sampling, the probability mass kept: 1 keeps every token, and a nucleus
of mass 0 would hold none."""
TEMPERATURE = Range(1e-30, 1e30)
"""T of sampling, which draws from `exp(log_scores / T)` with float32 scores. From 1e-30, T is a
normal float32 number (below 1.2e-38 it rounds to 0, or to a subnormal that TensorFlow's kernels
flush to 0, and the best token's `0 / T` is NaN: every sample empty), and a log-score gap of up
to 3e8, more than any head gives, stays finite once divided. Long before 1e-30 every draw is the
best token: sampling is then greedy search. Up to 1e30, T stays finite in float32 (at inf a
pruned token's `-inf / T` is NaN) and every unpruned token is already equally likely."""
SAMPLING_SEED = Range(0, _INT64_MAX, integer=True)
"""The seed of sampling: `sample_decode` draws from an int64 `[2]` stateless seed, and a SavedModel
holds its sampling signature's seed as an int64 constant. Non-negative, as numpy's seeds are: a
seed names a stream of draws, and one sign is enough."""
LENGTH_PENALTY = Range(0, 5)
"""α of the GNMT length penalty `((5 + length) / 6) ** α` (Wu et al. 2016, eq. 14, who tune α in
[0, 1]; 0 turns it off). Up to 5 the penalty stays finite in float32 for outputs of up to 3e8
tokens, longer than any decoder's cache; at larger α it overflows to inf for long outputs,
whose scores all become -0 and rank by chance."""
DIVERSITY_STRENGTH = Range(0, 1000)
"""λ of diverse beam search, in nats per earlier beam that chose the same token (Vijayakumar
et al. 2018, eq. 4; they use values near 0.5). At 104 a repeat's factor e^-λ is already below
float32's smallest number, so λ up to 1000 holds every penalty that changes a choice, while
λ times the beams stays far from float32's overflow (λ = inf makes every candidate NaN)."""
