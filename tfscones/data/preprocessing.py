"""The one owner of the sequence conventions: EOS appended, BOS shift, truncation, pad mask.

Every sequence a model reads or predicts follows the same rules (ids: pad 0, eos 1, bos 3):

- a source, and a target the decoder predicts, is its pieces then EOS (`append_eos`); cut to a
  maximum length, it keeps its first pieces and still ends with EOS;
- under teacher forcing the decoder's input is the target shifted right: BOS, then the target
  without its last token (`teacher_forcing_inputs`), so position i is fed token i - 1 and
  predicts token i;
- batches are padded with PAD, and `padding_mask` is True at the real tokens.

The training pipeline, translation, scoring, serving, calibration and model-error statistics all
call these functions, so the model sees at inference exactly the sequences it was trained on.

Example:
```python
target = append_eos(tf.constant([7, 8]))  # [7, 8, EOS]
teacher_forcing_inputs(target)  # [BOS, 7, 8]
append_eos(tf.constant([7, 8, 9]), max_length=3)  # [7, 8, EOS]
padding_mask(tf.constant([[7, 1, 0]]))  # [[True, True, False]]
```
"""

from __future__ import annotations

import tensorflow as tf
from keras import ops

from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID
from tfscones.ranges import AT_LEAST_ONE


def append_eos(
    pieces: tf.Tensor | tf.RaggedTensor, max_length: int | None = None
) -> tf.Tensor | tf.RaggedTensor:
    """Appends EOS to every sequence, first cutting it to `max_length` tokens with the EOS.

    A sequence with more than `max_length - 1` pieces keeps its first `max_length - 1` and still
    ends with EOS, as every training sequence does.

    Args:
        pieces: Integer piece ids whose last axis is the sequence: a dense tensor of rank 1 or
            more, or a `tf.RaggedTensor` (any ragged rank).
        max_length: Most tokens a sequence may have, EOS included (at least 1); None for no
            limit.

    Returns:
        The ids with EOS appended along the last axis, of the type and dtype of `pieces`.

    Raises:
        ValueError: If `max_length` is less than 1.
    """
    if max_length is not None:
        AT_LEAST_ONE.check("max_length", max_length, hint="It keeps room for EOS.")
        pieces = pieces[..., : max_length - 1]
    return _concat_last(pieces, EOS_ID, before=False)


def teacher_forcing_inputs(target_ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
    """The decoder's input under teacher forcing: BOS, then the target without its last token.

    For a target `y_1 .. y_n EOS` it is `BOS y_1 .. y_n`: position i is fed the token before it.
    On a dense batch padded with PAD the shift moves each row's last real token (its EOS) into
    the first padded column, where the causal decoder's output is never read.

    Args:
        target_ids: Integer target ids whose last axis is the sequence, each sequence at least
            one token long: a dense tensor of rank 1 or more, or a `tf.RaggedTensor`.

    Returns:
        Ids of the same shape, type and dtype.
    """
    return _concat_last(target_ids[..., :-1], BOS_ID, before=True)


def padding_mask(ids: tf.Tensor, pad_id: int = PAD_ID) -> tf.Tensor:
    """Where a padded batch holds real tokens: True everywhere but at `pad_id`.

    Args:
        ids: Dense integer ids of any shape (tensor, array or Keras tensor).
        pad_id: The padding id; PAD (0) unless a loss was configured with another.

    Returns:
        bool, the shape of `ids`.
    """
    return ops.not_equal(ids, pad_id)


def _concat_last(
    ids: tf.Tensor | tf.RaggedTensor, token: int, before: bool
) -> tf.Tensor | tf.RaggedTensor:
    """`token` put before or after every sequence of the last axis of dense or ragged ids."""
    if isinstance(ids, tf.RaggedTensor):
        if isinstance(ids.values, tf.RaggedTensor):
            return ids.with_values(_concat_last(ids.values, token, before))
        column = tf.fill([ids.nrows(), 1], tf.constant(token, ids.dtype))
    elif ids.shape.rank == 1:
        column = tf.constant([token], ids.dtype)
    else:
        shape = tf.concat([tf.shape(ids)[:-1], [1]], axis=0)
        column = tf.fill(shape, tf.constant(token, ids.dtype))
    parts = [column, ids] if before else [ids, column]
    return tf.concat(parts, axis=1 if isinstance(ids, tf.RaggedTensor) else -1)


__all__ = ["append_eos", "padding_mask", "teacher_forcing_inputs"]
