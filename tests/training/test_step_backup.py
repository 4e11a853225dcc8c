"""Step backups: a fit killed and resumed from its backup ends as the uninterrupted fit."""

import errno
import json
import shutil

import keras
import numpy as np
import pytest

from tfscones.training import callbacks
from tfscones.training.callbacks import BackupError, StepBackup, random_states
from tfscones.written_aside import DiskFull


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


def backed_up(folder) -> int:
    """The step of the backup in `folder`, restored into a fresh model."""
    return StepBackup(folder, every_steps=5).restore(dropout_model())


def test_a_full_disk_while_backing_up_names_the_folder_and_keeps_the_previous_backup(
    tmp_path, monkeypatch
):
    uninterrupted = fit(tmp_path / "uninterrupted")
    folder = tmp_path / "full"
    fit(folder, steps=10)
    real_save_weights = keras.Model.save_weights

    def half_then_full_disk(model, path, **arguments):
        real_save_weights(model, path, **arguments)
        with open(path, "r+b") as file:
            file.truncate(100)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(keras.Model, "save_weights", half_then_full_disk)
    with pytest.raises(DiskFull, match=rf"no space left on the disk of {folder} to write step-11"):
        fit(folder)
    monkeypatch.undo()
    assert sorted(path.name for path in folder.iterdir()) == ["latest.json", "step-10.weights.h5"]
    assert backed_up(folder) == 10
    resumed = fit(folder)
    for weights, expected in zip(resumed.get_weights(), uninterrupted.get_weights(), strict=True):
        np.testing.assert_array_equal(weights, expected)


def test_a_disk_without_room_for_a_backup_stops_training_before_writing_it(tmp_path, monkeypatch):
    folder = tmp_path / "backup"
    fit(folder, steps=10)
    size = (folder / "step-10.weights.h5").stat().st_size
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 0, 999))
    with pytest.raises(DiskFull, match=rf"disk of {folder} for the backup of step 11: it needs"):
        fit(folder)
    assert sorted(path.name for path in folder.iterdir()) == ["latest.json", "step-10.weights.h5"]
    assert (folder / "step-10.weights.h5").stat().st_size == size


def test_a_kill_between_the_weights_and_the_state_leaves_the_previous_backup(tmp_path, monkeypatch):
    folder = tmp_path / "backup"
    fit(folder, steps=10)

    def killed(path, text):
        raise KeyboardInterrupt

    monkeypatch.setattr(callbacks, "write_text_aside", killed)
    assert fit(folder, steps=20) is not None
    monkeypatch.undo()
    assert (folder / "step-11.weights.h5").exists()  # written, but not the backup yet
    assert backed_up(folder) == 10
    fit(folder, steps=12)
    assert sorted(path.name for path in folder.iterdir()) == ["latest.json", "step-12.weights.h5"]


@pytest.mark.parametrize(
    "damage, problem",
    [
        ("truncate weights", r"step-10.weights.h5 cannot be loaded into this model \("),
        ("garbage state", r"latest.json is not JSON \("),
        ("state of a list of numbers", r"latest.json is not a backup's state"),
        ("missing weights", r"latest.json names step-10.weights.h5, which is missing"),
        ("random states of another model", r"latest.json does not fit this model \("),
    ],
)
def test_a_damaged_backup_is_named_with_what_is_wrong(tmp_path, damage, problem):
    folder = tmp_path / "backup"
    fit(folder, steps=10)
    weights, state = folder / "step-10.weights.h5", folder / "latest.json"
    if damage == "truncate weights":
        weights.write_bytes(weights.read_bytes()[:300])
    elif damage == "garbage state":
        state.write_text('{"step": 10, "weig')
    elif damage == "state of a list of numbers":
        state.write_text('{"step": [10]}')
    elif damage == "missing weights":
        weights.unlink()
    else:
        states = json.loads(state.read_text())
        state.write_text(json.dumps({**states, "random": states["random"] * 2}))
    with pytest.raises(BackupError, match=rf"the backup {folder}/{problem}.*delete {folder} to"):
        backed_up(folder)


def test_a_backup_of_the_earlier_layout_still_resumes(tmp_path):
    uninterrupted = fit(tmp_path / "uninterrupted")
    folder = tmp_path / "earlier"
    fit(folder, steps=10)
    (folder / "step-10.weights.h5").rename(folder / "latest.weights.h5")
    states = json.loads((folder / "latest.json").read_text())
    del states["weights"]
    (folder / "latest.json").write_text(json.dumps(states))
    resumed = fit(folder)
    assert not (folder / "latest.weights.h5").exists()
    for weights, expected in zip(resumed.get_weights(), uninterrupted.get_weights(), strict=True):
        np.testing.assert_array_equal(weights, expected)
