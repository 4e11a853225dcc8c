"""Weight averaging: checkpoint means by hand; the moving average swapped in and out."""

import keras
import numpy as np
import pytest

from tfscones.training.averaging import average_checkpoints, average_weights, moving_average_weights


def dense_model(optimizer=None):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    if optimizer is not None:
        model.compile(optimizer=optimizer, loss="mse")
    return model


def test_average_weights_by_hand():
    first = [np.array([1.0, 2.0], "float32"), np.array(3, "int64")]
    second = [np.array([3.0, 6.0], "float32"), np.array(5, "int64")]
    averaged = average_weights([first, second])
    np.testing.assert_array_equal(averaged[0], [2.0, 4.0])
    assert averaged[0].dtype == np.float32
    assert averaged[1] == 5  # not a float: the last checkpoint's value
    with pytest.raises(ValueError, match="different shapes"):
        average_weights([first, [np.zeros(3, "float32"), np.array(1)]])
    with pytest.raises(ValueError, match="at least one"):
        average_weights([])


def test_averaged_checkpoints_equal_the_mean_of_their_weights(tmp_path):
    model = dense_model(keras.optimizers.Adam())
    model.fit(np.ones((4, 2)), np.ones((4, 2)), verbose=0)  # files hold optimizer state too
    saved = []
    for index in range(3):
        weights = [
            np.full(w.shape, float(index + 1), "float32") * (1 + np.arange(w.size).reshape(w.shape))
            for w in model.get_weights()
        ]
        model.set_weights(weights)
        model.save_weights(tmp_path / f"epoch-{index}.weights.h5")
        saved.append(weights)

    fresh = dense_model()
    average_checkpoints(fresh, sorted(tmp_path.glob("*.weights.h5")))

    for averaged, *checkpoints in zip(fresh.get_weights(), *saved, strict=True):
        np.testing.assert_allclose(averaged, np.mean(checkpoints, axis=0), rtol=1e-6)
        np.testing.assert_allclose(averaged, 2.0 * checkpoints[0], rtol=1e-6)
    with pytest.raises(FileNotFoundError, match="missing"):
        average_checkpoints(fresh, [tmp_path / "missing.weights.h5"])


def test_moving_average_is_swapped_in_for_the_block_only():
    model = dense_model(keras.optimizers.SGD(0.1, use_ema=True, ema_momentum=0.5))
    for _ in range(3):  # not fit: its end copies the moving average into the weights
        model.train_on_batch(np.ones((1, 2)), np.zeros((1, 2)))
    training_weights = [v.numpy() for v in model.trainable_variables]
    averages = [v.numpy() for v in model.optimizer._model_variables_moving_average]
    assert not np.allclose(training_weights[0], averages[0])

    with moving_average_weights(model) as swapped:
        assert swapped
        for variable, average in zip(model.trainable_variables, averages, strict=True):
            np.testing.assert_array_equal(variable.numpy(), average)
    for variable, value in zip(model.trainable_variables, training_weights, strict=True):
        np.testing.assert_array_equal(variable.numpy(), value)

    plain = dense_model(keras.optimizers.SGD(0.1))
    with moving_average_weights(plain) as swapped:
        assert not swapped
