"""Moved to `tfscones.ops.entmax`; this module re-exports its public names for old imports."""

from tfscones.ops.entmax import (
    DEFAULT_TOP_K,
    Entmax,
    Entmax15,
    Sparsemax,
    entmax,
    entmax15,
    entmax_bisect,
    entmax_forward,
    entmax_statistics,
    partial_sort_sizes,
    probabilities_from_threshold,
    sparsemax,
    validate_entmax_alpha,
)

__all__ = [
    "DEFAULT_TOP_K",
    "Entmax",
    "Entmax15",
    "Sparsemax",
    "entmax",
    "entmax15",
    "entmax_bisect",
    "entmax_forward",
    "entmax_statistics",
    "partial_sort_sizes",
    "probabilities_from_threshold",
    "sparsemax",
    "validate_entmax_alpha",
]
