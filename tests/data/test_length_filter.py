import pytest
import tensorflow as tf

from tfscones.data import filter_by_length, keep_by_length


def ids(length):
    return tf.range(4, 4 + length, dtype=tf.int32)


@pytest.mark.parametrize(
    ("source_length", "target_length", "kept"),
    [
        (5, 5, True),
        (0, 5, False),  # empty source
        (5, 0, False),  # empty target
        (10, 10, True),  # == max_length
        (11, 10, False),
        (10, 11, False),
        (3, 9, True),  # ratio exactly 3
        (3, 10, False),  # ratio above 3
        (10, 3, False),
    ],
)
def test_keep_by_length_boundaries(source_length, target_length, kept):
    keep = keep_by_length(ids(source_length), ids(target_length), max_length=10, max_length_ratio=3)
    assert bool(keep) is kept


def test_ratio_filter_can_be_disabled_and_min_length_raised():
    assert bool(keep_by_length(ids(1), ids(10), max_length=10, max_length_ratio=None))
    assert not bool(keep_by_length(ids(1), ids(2), min_length=2, max_length_ratio=None))


def test_filter_by_length_on_dataset():
    lengths = [(1, 1), (0, 2), (4, 4), (5, 4), (2, 7), (2, 6)]
    dataset = tf.data.Dataset.from_generator(
        lambda: ((ids(s), ids(t)) for s, t in lengths),
        output_signature=(tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int32)),
    )
    kept = filter_by_length(dataset, max_length=4, max_length_ratio=None)
    assert [(len(s), len(t)) for s, t in kept.as_numpy_iterator()] == [(1, 1), (4, 4)]
    kept = filter_by_length(dataset, max_length=8, max_length_ratio=3.0)
    assert [(len(s), len(t)) for s, t in kept.as_numpy_iterator()] == [
        (1, 1),
        (4, 4),
        (5, 4),
        (2, 6),
    ]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_length": 0},
        {"min_length": 5, "max_length": 4},
        {"max_length_ratio": 0.5},
    ],
)
def test_rejects_inconsistent_limits(kwargs):
    dataset = tf.data.Dataset.from_tensors((ids(2), ids(2)))
    with pytest.raises(ValueError):
        filter_by_length(dataset, **kwargs)
