"""Learning-rate schedules for Transformer training."""

from __future__ import annotations

import keras
from keras import ops


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
        if warmup_steps < 1:
            raise ValueError(f"warmup_steps must be at least 1 (got {warmup_steps}).")
        self.peak_learning_rate = float(peak_learning_rate)
        self.warmup_steps = int(warmup_steps)

    def __call__(self, step):
        step = ops.maximum(ops.cast(step, "float32") + 1.0, 1.0)
        warmup = ops.cast(self.warmup_steps, "float32")
        return self.peak_learning_rate * ops.minimum(step / warmup, ops.sqrt(warmup / step))

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "warmup_steps": self.warmup_steps}
