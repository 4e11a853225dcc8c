import numpy as np
import pytest
import tensorflow as tf

from tfscones.data import PAD_ID, batch_by_tokens, default_bucket_lengths


def sequences(lengths, seed=0):
    """Examples ({"a": ids}, ids_b) with len(a) = length and len(b) = length // 2 + 1."""
    rng = np.random.default_rng(seed)
    examples = [(rng.integers(4, 50, n), rng.integers(4, 50, n // 2 + 1)) for n in lengths]
    dataset = tf.data.Dataset.from_generator(
        lambda: (({"a": a.astype(np.int32)}, b.astype(np.int32)) for a, b in examples),
        output_signature=(
            {"a": tf.TensorSpec([None], tf.int32)},
            tf.TensorSpec([None], tf.int32),
        ),
    )
    return dataset, examples


def unpad(row):
    return row[row != PAD_ID].tolist()


def test_default_bucket_lengths():
    lengths = default_bucket_lengths(129)
    assert lengths[0] == 8 and lengths[-1] == 136
    assert all(length % 8 == 0 for length in lengths)
    assert all(a < b for a, b in zip(lengths, lengths[1:], strict=False))
    assert default_bucket_lengths(5) == [8]
    assert default_bucket_lengths(20, multiple=1, step=2) == [8, 16, 20]


def test_budget_respected_and_every_example_batched_once():
    lengths = np.random.default_rng(1).integers(1, 40, 300)
    dataset, examples = sequences(lengths)
    budget = 160
    batches = list(
        batch_by_tokens(
            dataset, tokens_per_batch=budget, bucket_lengths=[8, 16, 24, 40]
        ).as_numpy_iterator()
    )
    seen = []
    for features, labels in batches:
        assert features["a"].size <= budget and labels.size <= budget
        assert features["a"].dtype == np.int32
        # Padding goes to the longest example of the batch, not beyond.
        assert max(len(unpad(row)) for row in features["a"]) == features["a"].shape[1]
        seen += [
            (tuple(unpad(a)), tuple(unpad(b))) for a, b in zip(features["a"], labels, strict=True)
        ]
    assert sorted(seen) == sorted((tuple(a), tuple(b)) for a, b in examples)
    # Long buckets batch fewer examples: 160 // 40 = 4, 160 // 8 = 20.
    assert max(len(labels) for _, labels in batches) == 20
    assert min(len(labels) for _, labels in batches if labels.shape[1] > 12) <= 4


def test_static_shapes_pad_to_bucket_length_and_drop_remainder():
    lengths = np.random.default_rng(2).integers(1, 33, 200)
    dataset, _ = sequences(lengths)
    bucket_lengths = [8, 16, 32]
    batched = batch_by_tokens(
        dataset,
        tokens_per_batch=128,
        bucket_lengths=bucket_lengths,
        static_shapes=True,
        drop_remainder=True,
    )
    shapes = {(f["a"].shape, labels.shape) for f, labels in batched.as_numpy_iterator()}
    assert shapes <= {((128 // n, n), (128 // n, n)) for n in bucket_lengths}
    assert len(shapes) >= 2


def test_too_long_example_raises():
    dataset, _ = sequences([3, 20])
    batched = batch_by_tokens(dataset, tokens_per_batch=64, bucket_lengths=[8, 16])
    with pytest.raises(tf.errors.InvalidArgumentError, match="longer than the largest bucket"):
        list(batched)


@pytest.mark.parametrize(
    ("budget", "bucket_lengths", "match"),
    [
        (64, [], "increase strictly"),
        (64, [8, 8, 16], "increase strictly"),
        (64, [0, 8], "increase strictly"),
        (8, [8, 16], "tokens_per_batch=8"),
    ],
)
def test_rejects_bad_settings(budget, bucket_lengths, match):
    dataset, _ = sequences([3])
    with pytest.raises(ValueError, match=match):
        batch_by_tokens(dataset, tokens_per_batch=budget, bucket_lengths=bucket_lengths)
