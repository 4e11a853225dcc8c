"""Verdicts of claims: does a difference we measured agree with a paper, or is it too small?

BLEU differences between models are judged against the seed spread (the largest difference
between two seeds of one recipe); rates over the same test sentences against two standard
errors of their difference. No verdict is drawn from a number that is not finite: the verdict
is then `not judged (the difference is nan)`, naming the number.
"""

from __future__ import annotations

import dataclasses
import math

AGREES, DISAGREES, TOO_SMALL = "agrees", "disagrees", "too small to tell"
NO_SPREAD = f"{TOO_SMALL} (no seed spread measured yet)"
NOT_JUDGED = "not judged"


@dataclasses.dataclass(frozen=True)
class Claim:
    """A paper's claim and what the runs say of it.

    Attributes:
        text: The claim, citing the paper's table or figure.
        evidence: The numbers, in a sentence.
        verdict: `agrees`, `disagrees` or `too small to tell` (with why, where it matters);
            `not judged (...)` where a number it rests on is not finite.
    """

    text: str
    evidence: str
    verdict: str

    def lines(self) -> list[str]:
        """The claim as a markdown bullet."""
        return [f"- **{self.text}** {self.evidence} Verdict: **{self.verdict}**."]


def bleu_verdict(difference: float, spread: float | None) -> str:
    """Whether a BLEU difference in the paper's direction exceeds the seed spread.

    Args:
        difference: Our BLEU minus the compared BLEU, signed so that the paper expects > 0.
        spread: The seed spread; None when no recipe has two seeds yet.
    """
    if unjudged := not_finite({"difference": difference, "spread": spread}):
        return unjudged
    if spread is None:
        return NO_SPREAD
    if difference > spread:
        return AGREES
    if difference < -spread:
        return DISAGREES
    return TOO_SMALL


def at_least_verdict(difference: float, spread: float | None) -> str:
    """Whether a system matches or beats another: disagrees only below minus the spread."""
    if unjudged := not_finite({"difference": difference, "spread": spread}):
        return unjudged
    if spread is None:
        return NO_SPREAD
    return DISAGREES if difference < -spread else AGREES


def rate_verdict(rate: float, other: float, count: int) -> str:
    """Whether `rate` is below `other` (both over `count` sentences) by two standard errors."""
    if unjudged := not_finite({"rate": rate, "compared rate": other}):
        return unjudged
    pooled = (rate + other) / 2
    error = math.sqrt(max(pooled * (1 - pooled), 1e-12) * 2 / count)
    if other - rate > 2 * error:
        return AGREES
    if rate - other > 2 * error:
        return DISAGREES
    return TOO_SMALL


def condition_verdict(holds: bool, numbers: dict[str, float]) -> str:
    """`agrees` where the paper's condition on `numbers` holds, `disagrees` where it does not.

    Args:
        holds: Whether the condition holds (`min(shares) >= 0.05`).
        numbers: The numbers it was decided on, by name, so that it is not judged on NaN.
    """
    return not_finite(numbers) or (AGREES if holds else DISAGREES)


def not_finite(numbers: dict[str, float | None]) -> str | None:
    """`not judged (the NAME is VALUE)` for numbers that are NaN or infinite; None if none is.

    None values (a spread not measured yet) are left to the verdict.
    """
    reasons = [
        f"the {name} is {value}"
        for name, value in numbers.items()
        if value is not None and not math.isfinite(value)
    ]
    return f"{NOT_JUDGED} ({'; '.join(reasons)})" if reasons else None
