"""Temperature sampling (Stahlberg & Kumar 2022, Appendix B, eq. 10) and entropies of tables.

P_γ(c) = exp(log P(c)/γ) / Σ_c' exp(log P(c')/γ): γ < 1 sharpens a categorical distribution
(less ambiguity), γ > 1 flattens it. `TemperedTables` holds IBM-3's n_γ and t_γ with the
cumulative sums that inverse-CDF sampling draws from.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np


def check_temperature(temperature: float) -> float:
    """Returns `temperature` as a float.

    Raises:
        ValueError: Unless it is finite and > 0, naming it and the range.
    """
    value = float(temperature)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"temperature must be in (0, inf) (finite, > 0), got {temperature!r}")
    return value


def tempered(probabilities: np.ndarray, temperature: float) -> np.ndarray:
    """Eq. 10: P_γ(c) = exp(log P(c)/γ) / Σ_c' exp(log P(c')/γ), along the last axis.

    Computed in log space (the largest log P(c)/γ is subtracted before exp); zero probabilities
    stay zero. γ = 1 returns P (renormalised); γ → 0 tends to argmax, γ → inf to uniform over
    the support.

    Args:
        probabilities: Non-negative, with a positive entry in every row (last axis).
        temperature: γ, finite and > 0.

    Returns:
        An array of the same shape whose rows sum to 1.

    Raises:
        ValueError: On a bad temperature, a negative probability or a row without mass.
    """
    gamma = check_temperature(temperature)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if np.any(probabilities < 0) or not np.all(np.any(probabilities > 0, axis=-1)):
        raise ValueError("probabilities must be ≥ 0 with a positive entry in every row")
    with np.errstate(divide="ignore"):
        return softmax(np.log(probabilities) / gamma)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax along the last axis, the largest logit subtracted first."""
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


def entropy_bits(probabilities: np.ndarray) -> np.ndarray:
    """Entropy in bits of each row (last axis)."""
    positive = np.where(probabilities > 0, probabilities, 1.0)
    return -np.sum(probabilities * np.log2(positive), axis=-1)


@dataclasses.dataclass(frozen=True)
class TemperedTables:
    """n_γ and t_γ (eq. 10) of one temperature, with cumulative sums for sampling.

    Attributes:
        temperature: γ.
        fertility: n_γ(φ|f), one row per source word.
        fertility_cdf: Cumulative sums of `fertility` along its rows.
        t_rows: t_γ(·|f) of every source word f, over the targets of its t row.
        t_cdfs: Cumulative sums of each of `t_rows`.
    """

    temperature: float
    fertility: np.ndarray
    fertility_cdf: np.ndarray
    t_rows: list[np.ndarray]
    t_cdfs: list[np.ndarray]


def temper_tables(
    fertility: np.ndarray, t_offsets: np.ndarray, t_probabilities: np.ndarray, temperature: float
) -> TemperedTables:
    """Tempers the fertility table and every row of the CSR t table (`tempered`).

    Args:
        fertility: n(φ|f), shape (source vocabulary size, max fertility + 1).
        t_offsets: CSR row starts of t, shape (source vocabulary size + 1,).
        t_probabilities: t(e|f) of the entries; row f is `t_offsets[f]:t_offsets[f + 1]`.
        temperature: γ, finite and > 0.

    Returns:
        The tempered tables.
    """
    gamma = check_temperature(temperature)
    tempered_fertility = tempered(fertility, gamma)
    t_rows = [
        tempered(t_probabilities[start:end], gamma)
        for start, end in zip(t_offsets[:-1], t_offsets[1:], strict=True)
    ]
    return TemperedTables(
        gamma,
        tempered_fertility,
        np.cumsum(tempered_fertility, axis=1),
        t_rows,
        [np.cumsum(row) for row in t_rows],
    )
