"""Step backups: a fit killed and resumed from its backup ends as the uninterrupted fit."""

import keras
import numpy as np

from tfscones.training.callbacks import StepBackup, random_states


class KillAfter(keras.callbacks.Callback):
    """Interrupts the fit once the optimizer has taken `step` steps (never if None)."""

    def __init__(self, step: int | None):
        super().__init__()
        self.step = step

    def on_train_batch_end(self, batch, logs=None):
        if self.step and int(self.model.optimizer.iterations) >= self.step:
            raise KeyboardInterrupt


def dropout_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dropout(0.5), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    return model


def fit_unless_killed(model, backup, kill_after, inputs, targets, **arguments):
    """`model.fit` with the backup, silently, killed after `kill_after` steps (if not None).

    Returns:
        The epoch losses the fit logged, or None if it was killed.
    """
    try:
        history = model.fit(
            inputs,
            targets,
            callbacks=[KillAfter(kill_after), backup],
            verbose=0,
            shuffle=False,
            **arguments,
        )
    except KeyboardInterrupt:
        return None
    return history.history["loss"]


def fit(folder, kill_after=None, steps=20) -> keras.Model:
    """Fits one example for `steps` one-step epochs from the backup in `folder`, if any."""
    model = dropout_model()
    backup = StepBackup(folder, every_steps=5)
    done = backup.restore(model)
    inputs = np.linspace(-1.0, 1.0, 8, dtype="float32")[None]
    targets = np.ones((1, 1), "float32")
    fit_unless_killed(model, backup, kill_after, inputs, targets, epochs=steps, initial_epoch=done)
    return model


def test_a_resumed_fit_draws_the_dropout_masks_of_the_uninterrupted_one(tmp_path):
    uninterrupted = fit(tmp_path / "uninterrupted")
    # Killed in step 13, before its backup: the resumed fit starts at step 12's end.
    fit(tmp_path / "killed", kill_after=13)
    resumed = fit(tmp_path / "killed")

    assert int(resumed.optimizer.iterations) == 20
    (state,) = random_states(resumed)
    np.testing.assert_array_equal(state.numpy(), random_states(uninterrupted)[0].numpy())
    for weights, expected in zip(resumed.get_weights(), uninterrupted.get_weights(), strict=True):
        np.testing.assert_array_equal(weights, expected)


def fit_four_step_epochs(folder, kill_after=None, epochs=3) -> list[float]:
    """Fits four examples one by one for `epochs` epochs, resuming within an epoch as the
    training runner does; returns the epoch losses logged by the last call (or calls)."""
    model = dropout_model()
    backup = StepBackup(folder, every_steps=3)
    epoch, step_in_epoch = divmod(backup.restore(model), 4)
    inputs = np.linspace(-1.0, 1.0, 32, dtype="float32").reshape(4, 8)
    targets = np.arange(4, dtype="float32").reshape(4, 1)
    losses = []
    for first in (step_in_epoch, 0) if step_in_epoch else (0,):
        logged = fit_unless_killed(
            model,
            backup,
            kill_after,
            inputs[first:],
            targets[first:],
            batch_size=1,
            epochs=epoch + 1 if first else epochs,
            initial_epoch=epoch,
        )
        if logged is None:
            break
        losses += logged
        epoch += len(logged)
    return losses


def test_a_fit_resumed_within_an_epoch_logs_the_whole_epochs_loss(tmp_path):
    uninterrupted = fit_four_step_epochs(tmp_path / "uninterrupted")
    # Killed in step 7, before its backup: the resumed fit starts at step 6, within epoch 1.
    fit_four_step_epochs(tmp_path / "killed", kill_after=7)
    resumed = fit_four_step_epochs(tmp_path / "killed")

    # Epoch 1's loss is the mean over its four steps, two of them taken before the kill.
    assert resumed == uninterrupted[1:]
