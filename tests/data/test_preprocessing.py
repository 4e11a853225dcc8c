"""The sequence conventions against hand-computed ids (pad 0, eos 1, bos 3)."""

import numpy as np
import pytest
import tensorflow as tf

from tfscones.data.preprocessing import append_eos, padding_mask, teacher_forcing_inputs


def test_append_eos_dense_and_ragged():
    np.testing.assert_array_equal(append_eos(tf.constant([7, 8])).numpy(), [7, 8, 1])
    np.testing.assert_array_equal(append_eos(tf.constant([], tf.int32)).numpy(), [1])
    ragged = append_eos(tf.ragged.constant([[7, 8, 9], [], [5]], tf.int32))
    assert isinstance(ragged, tf.RaggedTensor)
    assert ragged.to_list() == [[7, 8, 9, 1], [1], [5, 1]]
    nested = append_eos(tf.ragged.constant([[[7, 8], [9]], [[5]]], tf.int32))
    assert nested.to_list() == [[[7, 8, 1], [9, 1]], [[5, 1]]]
    dense = append_eos(tf.constant([[7, 8], [9, 0]], tf.int64))
    assert dense.dtype == tf.int64
    np.testing.assert_array_equal(dense.numpy(), [[7, 8, 1], [9, 0, 1]])


def test_truncation_keeps_eos():
    pieces = tf.ragged.constant([[7, 8, 9, 10], [5, 6], [4]], tf.int32)
    assert append_eos(pieces, max_length=3).to_list() == [[7, 8, 1], [5, 6, 1], [4, 1]]
    assert append_eos(pieces, max_length=1).to_list() == [[1], [1], [1]]
    np.testing.assert_array_equal(
        append_eos(tf.constant([7, 8, 9]), max_length=3).numpy(), [7, 8, 1]
    )
    with pytest.raises(
        ValueError, match=r"max_length must be a whole number in \[1, inf\) \(got 0\)"
    ):
        append_eos(pieces, max_length=0)


def test_teacher_forcing_inputs_shift_right_after_bos():
    np.testing.assert_array_equal(teacher_forcing_inputs(tf.constant([7, 8, 1])).numpy(), [3, 7, 8])
    ragged = teacher_forcing_inputs(tf.ragged.constant([[7, 8, 1], [1], [5, 1]], tf.int32))
    assert ragged.to_list() == [[3, 7, 8], [3], [3, 5]]
    # A padded batch shifts as a whole: the EOS moves into the first padded column.
    dense = teacher_forcing_inputs(tf.constant([[7, 8, 1], [5, 1, 0]]))
    np.testing.assert_array_equal(dense.numpy(), [[3, 7, 8], [3, 5, 1]])
    # The empty translation, EOS alone, is fed BOS alone.
    np.testing.assert_array_equal(teacher_forcing_inputs(tf.fill([2, 1], 1)).numpy(), [[3], [3]])


def test_teacher_forcing_inputs_in_a_dataset_keeps_static_shapes():
    dataset = tf.data.Dataset.from_tensors(tf.constant([7, 8], tf.int32))
    shifted = dataset.map(lambda pieces: teacher_forcing_inputs(append_eos(pieces)))
    assert shifted.element_spec == tf.TensorSpec([3], tf.int32)
    np.testing.assert_array_equal(next(iter(shifted)).numpy(), [3, 7, 8])


def test_padding_mask():
    ids = np.array([[7, 1, 0, 0], [3, 0, 5, 1]])
    mask = padding_mask(ids)
    assert mask.dtype == tf.bool
    np.testing.assert_array_equal(
        np.asarray(mask), [[True, True, False, False], [True, False, True, True]]
    )
    np.testing.assert_array_equal(
        np.asarray(padding_mask(tf.constant([[-100, 4]]), pad_id=-100)), [[False, True]]
    )
