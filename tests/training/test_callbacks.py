"""Training callbacks: exact step budgets, kept epoch checkpoints, the progress line."""

import io

import keras
import numpy as np

from tfscones.training.callbacks import EpochCheckpoints, ProgressLine, TrainingBudget


def fitted(callbacks, epochs, steps_per_epoch=4):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    data = np.ones((steps_per_epoch, 2), "float32"), np.zeros((steps_per_epoch, 1), "float32")
    model.fit(*data, batch_size=1, epochs=epochs, callbacks=callbacks, verbose=0, shuffle=False)
    return model


def test_step_budget_stops_inside_an_epoch():
    model = fitted([TrainingBudget(max_steps=10)], epochs=5)  # 20 steps offered, 10 taken
    assert int(model.optimizer.iterations) == 10


def test_epoch_checkpoints_keep_the_newest(tmp_path):
    kept = EpochCheckpoints(tmp_path, keep=2)
    model = fitted([kept], epochs=4)
    assert [p.name for p in kept.paths] == ["epoch-0003.weights.h5", "epoch-0004.weights.h5"]
    fresh = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    fresh.load_weights(kept.paths[-1])
    for saved, trained in zip(fresh.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(saved, trained)


def test_progress_line_names_step_loss_rate_and_time_left():
    stream = io.StringIO()  # not a terminal: the first step, every 30 s, every epoch's end
    budget = TrainingBudget(max_steps=8)
    fitted([budget, ProgressLine(8, budget, stream=stream)], epochs=2)
    lines = stream.getvalue().splitlines()
    assert [line.split(" · ")[0] for line in lines] == [f"step {s:>6}/8" for s in (1, 4, 8)]
    assert lines[-1].startswith("step      8/8 · loss ")
    assert " · lr 1.00e-02 · " in lines[-1]
    assert lines[-1].endswith("0:00 left")


def test_progress_line_of_a_time_bounded_run_shows_no_step_budget_and_the_least_time_left():
    stream = io.StringIO()
    budget = TrainingBudget(max_steps=8, max_minutes=10.0)
    fitted([budget, ProgressLine(8, budget, stream=stream)], epochs=2)
    lines = stream.getvalue().splitlines()
    assert [line.split(" · ")[0] for line in lines] == [f"step {s:>6}" for s in (1, 4, 8)]
    assert lines[-1].endswith("0:00 left")  # no steps left, however much time is
