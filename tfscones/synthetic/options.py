"""The settings of IBM-3 estimation (`tfscones.synthetic.estimation`), checked on creation."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class EstimationOptions:
    """How `estimate_ibm3` estimates the model (see `tfscones.synthetic.estimation`).

    Attributes:
        em_iterations: IBM Model 1 EM iterations for t.
        min_source_count: Source words seen fewer times share the `<unk>` row.
        max_fertility: Largest fertility φ of n(φ|f); larger ones count as it.
        fertility_smoothing: Additive smoothing of the fertility counts.
        diagonal_preference: λ of the Viterbi alignment's factor exp(-λ|i/l - j/m|).
        t_threshold: Pruning keeps t(e|f) ≥ this (and the best e of every f).
        t_max_targets: Pruning keeps at most this many target words per source word.
        distortion_buckets: Equal-width buckets of the relative offset j/m - i/l in [-1, 1].
        bucket_smoothing: Additive smoothing of the bucket counts.
        distortion_backoff_weight: β, the weight (in counts) of the offset backoff in d.
    """

    em_iterations: int = 5
    min_source_count: int = 2
    max_fertility: int = 5
    fertility_smoothing: float = 0.1
    diagonal_preference: float = 0.1
    t_threshold: float = 1e-3
    t_max_targets: int = 50
    distortion_buckets: int = 20
    bucket_smoothing: float = 1.0
    distortion_backoff_weight: float = 2.0

    def __post_init__(self):
        at_least_one = ("em_iterations", "min_source_count", "max_fertility", "t_max_targets")
        positive = ("fertility_smoothing", "bucket_smoothing", "distortion_backoff_weight")
        for name in at_least_one + ("distortion_buckets",):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)!r}")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if self.diagonal_preference < 0 or not 0 <= self.t_threshold < 1:
            raise ValueError("diagonal_preference must be ≥ 0 and t_threshold in [0, 1)")
