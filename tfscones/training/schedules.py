"""Learning-rate schedules for Transformer training, including runs bounded by a time budget.

`WarmupInverseSqrt` is the original Transformer schedule (it never decays to zero).
`WarmupDecay` warms up linearly and then decays to about zero along a cosine or a straight line by
the end of the run, where the end is either a step count (as fairseq's and Hugging Face's cosine and
linear schedules) or a wall-clock budget: `TrainingBudget` (in `tfscones.training.callbacks`) writes
the fraction of the budget spent into the schedule's `time_fraction` before every step, so a run
bounded by minutes finishes its warm-up and its decay inside the budget, however fast the machine.

"""

from __future__ import annotations

import math

import keras
from keras import ops

from tfscones.ranges import AT_LEAST_ONE, POSITIVE, SHARE, UNIT_INTERVAL

DECAYS = ("cosine", "linear")


@keras.saving.register_keras_serializable(package="tfscones")
class WarmupInverseSqrt(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to a peak, then decay with the inverse square root of the step.

    lr(step) = peak · min(step / warmup_steps, sqrt(warmup_steps / step)) (Vaswani et al. 2017,
    with the peak given directly instead of through d_model^-0.5).

    Args:
        peak_learning_rate: The learning rate reached at `warmup_steps`.
        warmup_steps: Steps of linear warm-up (at least 1).
    """

    def __init__(self, peak_learning_rate: float, warmup_steps: int):
        self.peak_learning_rate = POSITIVE.check("peak_learning_rate", peak_learning_rate)
        self.warmup_steps = AT_LEAST_ONE.check("warmup_steps", warmup_steps)

    def __call__(self, step):
        step = ops.maximum(ops.cast(step, "float32") + 1.0, 1.0)
        warmup = ops.cast(self.warmup_steps, "float32")
        return self.peak_learning_rate * ops.minimum(step / warmup, ops.sqrt(warmup / step))

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "warmup_steps": self.warmup_steps}


@keras.saving.register_keras_serializable(package="tfscones")
class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up, then cosine or linear decay to `final_fraction` of the peak.

    With s optimizer steps taken, W = `warmup_steps`, S = `total_steps` and τ the fraction of
    the time budget spent (`time_fraction`, 0 when the run has no budget):

        progress p = max(clip((s - W) / (S - W), 0, 1), τ)
        warm-up  w = min(1, max((s + 1) / W, τ / max_warmup_fraction))
        cosine   lr = peak · w · (f + (1 - f) · (1 + cos(π p)) / 2)
        linear   lr = peak · w · (f + (1 - f) · (1 - p))

    A run bounded by steps is exactly the familiar schedule (fairseq's `cosine`, Hugging Face's
    `get_cosine_schedule_with_warmup`): W steps of warm-up, then decay over the remaining S - W.
    A run bounded by time decays over the fraction of its budget spent, warm-up included, and its
    warm-up ends after W steps or `max_warmup_fraction` of the budget, whichever comes first, so a
    slow machine still finishes warming up and decaying before the budget runs out. When both
    bounds are set the run ends at the first one reached, and so does the decay.

    Args:
        peak_learning_rate: The rate at the end of warm-up.
        warmup_steps: Steps of linear warm-up (at least 1).
        total_steps: Steps of the whole run, or None for a run bounded by time only.
        decay: "cosine" or "linear".
        final_fraction: The rate at the end of the run, as a fraction of the peak (default 0).
        max_warmup_fraction: The largest fraction of a time budget that warm-up may take.

    Raises:
        ValueError: On a decay other than cosine or linear, or values out of range.
    """

    def __init__(
        self,
        peak_learning_rate: float,
        warmup_steps: int,
        total_steps: int | None = None,
        decay: str = "cosine",
        final_fraction: float = 0.0,
        max_warmup_fraction: float = 0.1,
    ):
        if decay not in DECAYS:
            raise ValueError(f"decay must be one of {', '.join(DECAYS)} (got {decay!r}).")
        self.peak_learning_rate = POSITIVE.check("peak_learning_rate", peak_learning_rate)
        self.warmup_steps = AT_LEAST_ONE.check("warmup_steps", warmup_steps)
        self.total_steps = (
            None if total_steps is None else AT_LEAST_ONE.check("total_steps", total_steps)
        )
        self.decay = decay
        self.final_fraction = UNIT_INTERVAL.check("final_fraction", final_fraction)
        self.max_warmup_fraction = SHARE.check("max_warmup_fraction", max_warmup_fraction)
        self.time_fraction = keras.Variable(
            0.0, dtype="float32", trainable=False, name="time_fraction"
        )

    def __call__(self, step):
        step = ops.cast(step, "float32")
        time_fraction = ops.clip(ops.convert_to_tensor(self.time_fraction), 0.0, 1.0)
        warmup = ops.minimum(
            1.0,
            ops.maximum((step + 1.0) / self.warmup_steps, time_fraction / self.max_warmup_fraction),
        )
        progress = time_fraction
        if self.total_steps is not None:
            decay_steps = max(self.total_steps - self.warmup_steps, 1)
            step_progress = ops.clip((step - self.warmup_steps) / decay_steps, 0.0, 1.0)
            progress = ops.maximum(progress, step_progress)
        if self.decay == "cosine":
            remaining = 0.5 * (1.0 + ops.cos(math.pi * progress))
        else:
            remaining = 1.0 - progress
        level = self.final_fraction + (1.0 - self.final_fraction) * remaining
        return self.peak_learning_rate * warmup * level

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
            "decay": self.decay,
            "final_fraction": self.final_fraction,
            "max_warmup_fraction": self.max_warmup_fraction,
        }


def make_schedule(
    name: str,
    peak_learning_rate: float,
    warmup_steps: int,
    total_steps: int | None = None,
    final_fraction: float = 0.0,
) -> keras.optimizers.schedules.LearningRateSchedule:
    """The schedule called `name`: "inverse_sqrt", "cosine" or "linear".

    Raises:
        ValueError: On an unknown name.
    """
    if name == "inverse_sqrt":
        return WarmupInverseSqrt(peak_learning_rate, warmup_steps)
    if name in DECAYS:
        return WarmupDecay(peak_learning_rate, warmup_steps, total_steps, name, final_fraction)
    raise ValueError(f"schedule must be inverse_sqrt, cosine or linear (got {name!r}).")
