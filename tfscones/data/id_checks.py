"""Checks that a model's training examples hold token ids its vocabulary has.

Inside a compiled training step such checks cannot hold everywhere: XLA (which Keras's
`jit_compile="auto"` turns on on GPUs) drops `tf.debugging` assertions, clamps out-of-range
embedding lookups and gathers, and so turns an out-of-vocabulary or negative id into a finite,
wrong loss. The checks here run where they always hold: in the `tf.data` pipeline (never
XLA-compiled) for datasets, and in NumPy for arrays, before the first step.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

ID_KEYS = ("source_ids", "target_in_ids")


class TokenIdError(ValueError):
    """A training example holds an id outside the vocabulary, or a target that is no id."""


def checked_examples(x, y, vocabulary_size: int):
    """`(x, y)` for `keras.Model.fit`, checked (arrays) or set to be checked (datasets).

    Args:
        x: A `tf.data.Dataset` of `(features, targets[, weights])`, or a dict of arrays with
            `source_ids` and `target_in_ids`; anything else is passed through unchecked.
        y: Target ids for array inputs (None with a dataset).
        vocabulary_size: The model's vocabulary size V; valid ids lie in [0, V).

    Returns:
        `(x, y)`: arrays unchanged, a dataset with a checking map that raises
        `tf.errors.InvalidArgumentError` on the first bad batch.

    Raises:
        TokenIdError: If array inputs hold a bad id (named with its input and position).
    """
    if isinstance(x, tf.data.Dataset):
        checked = x.map(lambda *example: _checked_example(example, vocabulary_size))
        return checked.prefetch(tf.data.AUTOTUNE), y
    if isinstance(x, dict):
        arrays = {key: x[key] for key in ID_KEYS if key in x}
        if y is not None:
            arrays["targets"] = y
        for name, values in arrays.items():
            _check_array(name, values, vocabulary_size)
    return x, y


def _check_array(name: str, values, vocabulary_size: int) -> None:
    values = np.asarray(values)
    if not np.issubdtype(values.dtype, np.number):
        raise TokenIdError(f"{name} must be token ids (got dtype {values.dtype}).")
    bad = (values < 0) | (values >= vocabulary_size) | (values != np.round(values))
    if bad.any():
        position = tuple(int(i) for i in np.argwhere(bad)[0])
        value = values[position].item()
        raise TokenIdError(
            f"{name}{list(position)} is {value!r}: token ids must be whole numbers in "
            f"[0, {vocabulary_size})."
        )


def _checked_example(example: tuple, vocabulary_size: int):
    if len(example) < 2:
        return example[0]
    features, targets = example[0], example[1]
    if not isinstance(features, dict):
        features = {}
    named = {key: features[key] for key in ID_KEYS if key in features}
    named["targets"] = targets
    checks = []
    for name, values in named.items():
        values = tf.cast(values, tf.float64)
        valid = (values >= 0) & (values < vocabulary_size) & tf.equal(values, tf.round(values))
        message = f"{name} must be whole token ids in [0, {vocabulary_size}); got"
        bad_values = tf.boolean_mask(values, ~valid)[:5]
        checks.append(tf.debugging.Assert(tf.reduce_all(valid), [message, bad_values]))
    with tf.control_dependencies(checks):
        return tf.nest.map_structure(tf.identity, example)
