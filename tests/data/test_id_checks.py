"""A model's training examples are checked for ids outside its vocabulary, under XLA too."""

import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tfscones.data.id_checks import TokenIdError, checked_examples

VOCABULARY = 20
SOURCE = np.array([[5, 6, 1], [7, 1, 0]])
TARGET_IN = np.array([[3, 7, 8], [3, 9, 0]])
TARGET_OUT = np.array([[7, 8, 1], [9, 1, 0]])


def features(source=SOURCE, target_in=TARGET_IN):
    return {"source_ids": source, "target_in_ids": target_in}


def with_value(array, index, value):
    array = array.astype(np.float64 if isinstance(value, float) else array.dtype).copy()
    array[index] = value
    return array


@pytest.fixture(scope="module")
def xla_model():
    model = harness.tiny_model(VOCABULARY, "sigmoid")
    model.compile(optimizer="adam", loss=model.head.loss(alpha=0.5), jit_compile=True)
    model(features())
    return model


@pytest.mark.parametrize(
    "x, y, named",
    [
        (features(), with_value(TARGET_OUT, (0, 1), 25), r"targets\[0, 1\] is 25"),
        (features(), with_value(TARGET_OUT, (1, 0), -1), r"targets\[1, 0\] is -1"),
        (features(), with_value(TARGET_OUT, (1, 1), 1.5), r"targets\[1, 1\] is 1.5"),
        (features(source=with_value(SOURCE, (1, 0), 20)), TARGET_OUT, r"source_ids\[1, 0\]"),
        (features(target_in=with_value(TARGET_IN, (0, 2), 99)), TARGET_OUT, "target_in_ids"),
    ],
)
def test_array_examples_name_the_bad_id_before_training(xla_model, x, y, named):
    weights = [w.numpy() for w in xla_model.trainable_weights]
    with pytest.raises(TokenIdError, match=rf"{named}.*in \[0, 20\)"):
        xla_model.fit(x, y, epochs=1, verbose=0)
    after = xla_model.trainable_weights
    assert all((w.numpy() == v).all() for w, v in zip(after, weights, strict=True))


def test_a_dataset_with_a_bad_target_fails_under_xla_naming_it(xla_model):
    bad = tf.data.Dataset.from_tensors((features(), with_value(TARGET_OUT, (0, 0), 20)))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"targets must be whole token ids"):
        xla_model.fit(bad.repeat(2), epochs=1, verbose=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"source_ids must be whole"):
        xla_model.evaluate(
            tf.data.Dataset.from_tensors((features(with_value(SOURCE, (0, 0), -3)), TARGET_OUT)),
            verbose=0,
        )


def test_good_examples_train_and_pass_through_unchanged(xla_model):
    history = xla_model.fit(features(), TARGET_OUT, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    dataset = tf.data.Dataset.from_tensors((features(), TARGET_OUT, np.ones(2)))
    checked, _ = checked_examples(dataset, None, VOCABULARY)
    (x, y, w), (x0, y0, w0) = next(iter(checked)), next(iter(dataset))
    np.testing.assert_array_equal(x["source_ids"], x0["source_ids"])
    np.testing.assert_array_equal(y, y0)
    np.testing.assert_array_equal(w, w0)
