"""Learning-rate schedules: hand-computed values, and a time budget on a fake clock."""

import math

import keras
import numpy as np
import pytest

from tfscones.training.callbacks import StepBackup, TrainingBudget
from tfscones.training.schedules import WarmupDecay, WarmupInverseSqrt, make_schedule


def rate(schedule, step, time_fraction=0.0):
    if hasattr(schedule, "time_fraction"):
        schedule.time_fraction.assign(time_fraction)
    return float(schedule(step))


def test_cosine_over_steps_is_the_familiar_schedule():
    schedule = WarmupDecay(1e-3, warmup_steps=10, total_steps=110)
    assert rate(schedule, 0) == pytest.approx(1e-4)  # (0 + 1) / 10 of the peak
    assert rate(schedule, 9) == pytest.approx(1e-3)
    # Half-way through the 100 decay steps: (1 + cos(π/2)) / 2 = 1/2.
    assert rate(schedule, 60) == pytest.approx(0.5e-3)
    assert rate(schedule, 35) == pytest.approx(1e-3 * 0.5 * (1 + math.cos(math.pi * 0.25)))
    assert rate(schedule, 110) == pytest.approx(0.0, abs=1e-12)
    assert rate(schedule, 500) == pytest.approx(0.0, abs=1e-12)


def test_linear_decay_to_a_final_fraction():
    schedule = WarmupDecay(2.0, warmup_steps=4, total_steps=14, decay="linear", final_fraction=0.1)
    assert rate(schedule, 1) == pytest.approx(1.0)
    assert rate(schedule, 9) == pytest.approx(2.0 * (0.1 + 0.9 * 0.5))
    assert rate(schedule, 14) == pytest.approx(0.2)


def test_time_fraction_drives_decay_and_cuts_warmup_short():
    schedule = WarmupDecay(1.0, warmup_steps=1000, total_steps=None, max_warmup_fraction=0.1)
    # 3 steps of 1000 but 5% of the budget spent: warm-up is half done by time, not by steps.
    assert rate(schedule, 3, time_fraction=0.05) == pytest.approx(
        0.5 * 0.5 * (1 + math.cos(math.pi * 0.05))
    )
    assert rate(schedule, 3, time_fraction=0.5) == pytest.approx(0.5)
    assert rate(schedule, 3, time_fraction=1.0) == pytest.approx(0.0, abs=1e-12)


def test_the_first_bound_reached_ends_the_decay():
    schedule = WarmupDecay(1.0, warmup_steps=1, total_steps=101, decay="linear")
    assert rate(schedule, 51, time_fraction=0.1) == pytest.approx(0.5)  # steps lead
    assert rate(schedule, 11, time_fraction=0.75) == pytest.approx(0.25)  # time leads


def test_inverse_sqrt_unchanged_and_names():
    schedule = WarmupInverseSqrt(1e-3, 100)
    assert rate(schedule, 99) == pytest.approx(1e-3)
    assert rate(schedule, 399) == pytest.approx(0.5e-3)
    assert isinstance(make_schedule("inverse_sqrt", 1e-3, 100), WarmupInverseSqrt)
    assert make_schedule("linear", 1e-3, 10, 100).decay == "linear"
    with pytest.raises(ValueError, match="inverse_sqrt, cosine or linear"):
        make_schedule("step", 1e-3, 10)


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"final_fraction": 1.5}, r"final_fraction must be a finite number in \[0, 1\]"),
        ({"max_warmup_fraction": 0.0}, r"max_warmup_fraction must be a finite number in \(0, 1\]"),
        (
            {"peak_learning_rate": float("nan")},
            r"peak_learning_rate must be a finite number in \(0",
        ),
        ({"warmup_steps": 2.5}, r"warmup_steps must be a whole number in \[1, inf\)"),
        ({"total_steps": 0}, r"total_steps must be a whole number in \[1, inf\)"),
    ],
)
def test_warmup_decay_refuses_settings_out_of_range(arguments, message):
    settings = {"peak_learning_rate": 1e-3, "warmup_steps": 10, "total_steps": 100} | arguments
    with pytest.raises(ValueError, match=message):
        WarmupDecay(**settings)


def test_inverse_sqrt_refuses_a_non_positive_peak():
    with pytest.raises(ValueError, match=r"peak_learning_rate must be a finite number in \(0"):
        WarmupInverseSqrt(0.0, 100)


def test_schedule_round_trips_through_its_config():
    schedule = WarmupDecay(3e-3, 50, 700, "linear", 0.05, 0.2)
    again = WarmupDecay.from_config(schedule.get_config())
    for step in (0, 30, 60, 400, 700):
        assert rate(again, step) == pytest.approx(rate(schedule, step))


class FakeClock:
    """Seconds that move only when told to."""

    def __init__(self, start=0.0):
        self.now = start

    def __call__(self):
        return self.now


class Tick(keras.callbacks.Callback):
    """Advances the fake clock by one second at every step's end: each step takes a second."""

    def __init__(self, clock):
        super().__init__()
        self.clock = clock

    def on_train_batch_end(self, batch, logs=None):
        self.clock.now += 1.0


class RecordRates(keras.callbacks.Callback):
    """Records the rate each step uses; raises KeyboardInterrupt after `kill_after` steps."""

    def __init__(self, rates, kill_after=None):
        super().__init__()
        self.rates, self.kill_after = rates, kill_after

    def on_train_batch_begin(self, batch, logs=None):
        self.rates.append(float(self.model.optimizer.learning_rate))

    def on_train_batch_end(self, batch, logs=None):
        if self.kill_after and int(self.model.optimizer.iterations) >= self.kill_after:
            raise KeyboardInterrupt


def tiny_model(schedule):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(schedule), loss="mse")
    return model


def budgeted_fit(folder, rates, clock, kill_after=None):
    """Fits with a one-minute budget (60 fake seconds, one a step), backing up every 5 steps."""
    schedule = WarmupDecay(0.1, warmup_steps=1000, total_steps=10_000)
    model = tiny_model(schedule)
    budget = TrainingBudget(max_steps=10_000, max_minutes=1.0, schedule=schedule, clock=clock)
    backup = StepBackup(folder / "backup", every_steps=5, companions=[budget])
    done = backup.restore(model)
    data = (np.ones((1, 3), "float32"), np.ones((1, 1), "float32"))
    callbacks = [Tick(clock), budget, RecordRates(rates, kill_after), backup]
    try:
        model.fit(
            *data, epochs=1000, initial_epoch=done, callbacks=callbacks, verbose=0, shuffle=False
        )
    except KeyboardInterrupt:
        pass
    return model


def test_time_budgeted_run_finishes_warmup_and_decay_within_its_budget(tmp_path):
    rates = []
    model = budgeted_fit(tmp_path, rates, FakeClock())

    # 60 fake seconds, one a step: the run stops at the budget, long before 10,000 steps.
    assert int(model.optimizer.iterations) == 60
    peak_step = int(np.argmax(rates))
    # Warm-up (1,000 steps asked) ends by 10% of the budget: step 6 of 60.
    assert peak_step <= 6 and rates[peak_step] > 0.09
    assert np.all(np.diff(rates[peak_step:]) <= 1e-9)
    assert rates[-1] < 0.1 * 0.01  # decayed to ~0 by the end


def test_resumed_run_continues_the_same_schedule(tmp_path):
    uninterrupted = []
    budgeted_fit(tmp_path / "a", uninterrupted, FakeClock())

    first, second = [], []
    budgeted_fit(tmp_path / "b", first, FakeClock(), kill_after=23)  # killed after step 23
    # Every step is an epoch here, so the last backup is step 22's end (the kill comes before
    # step 23's). The resumed process has its own clock; it restores the 22 s spent by then.
    model = budgeted_fit(tmp_path / "b", second, FakeClock(start=5_000.0))

    assert int(model.optimizer.iterations) == 60
    assert len(second) == 60 - 22
    np.testing.assert_allclose(second, uninterrupted[22:], rtol=1e-6)
