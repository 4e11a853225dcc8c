"""Test settings shared by every test module: quiet TensorFlow logs, fixed seeds, dtype policy."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _seeded():
    keras.utils.set_random_seed(1234)
    yield


@pytest.fixture
def global_policy():
    """`keras.mixed_precision.set_global_policy`, the previous policy restored afterwards."""
    previous = keras.config.dtype_policy()
    yield keras.mixed_precision.set_global_policy
    keras.mixed_precision.set_global_policy(previous)
