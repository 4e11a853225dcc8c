"""Teacher-forced scoring: how well a given target translates its source, under a model's head.

`teacher_forced` is the one place that feeds a target to a model and reads the head's log scores
of its tokens; the SavedModel's `score` signature (`tfscones.serving.TranslationModule.score`),
calibration (`tfscones.evaluation.calibration`) and `score_texts` (strings in, one score per
pair out, as `tfscones.training.runner.score` gives) all use it, so their numbers agree.

A target's score is the sum over its tokens, EOS included, of the head's log scores: the
log-probability under softmax, Σ log P(z=1 | x, y) under the SCONES sigmoid head (Stahlberg &
Kumar 2022, eq. 3-4), -inf for a token outside an entmax head's support.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from tfscones.data.preprocessing import append_eos, padding_mask, teacher_forcing_inputs
from tfscones.data.vocab_ids import PAD_ID
from tfscones.decoding.compiled import per_model_function
from tfscones.decoding.translate import source_ids_for_model
from tfscones.ranges import AT_LEAST_ONE

_IDS = tf.TensorSpec([None, None], tf.int32)


class TeacherForced(NamedTuple):
    """A batch of targets fed to a model after BOS, one call.

    Attributes:
        logits: float32 `[batch, length, vocabulary]`.
        log_scores: float32 `[batch, length, vocabulary]`, the head's log scores of the logits.
        token_scores: float32 `[batch, length]`, each target token's log score, 0 after the
            target's end.
        is_token: bool `[batch, length]`, whether a position holds a target token.
    """

    logits: tf.Tensor
    log_scores: tf.Tensor
    token_scores: tf.Tensor
    is_token: tf.Tensor

    @property
    def scores(self) -> tf.Tensor:
        """float32 `[batch]`: each target's score, the sum of its tokens' log scores."""
        return tf.reduce_sum(self.token_scores, axis=1)

    @property
    def lengths(self) -> tf.Tensor:
        """int32 `[batch]`: each target's tokens, EOS included."""
        return tf.reduce_sum(tf.cast(self.is_token, tf.int32), axis=1)


def teacher_forced(model: Any, source_ids: tf.Tensor, target_ids: tf.Tensor) -> TeacherForced:
    """Feeds each target to the model (BOS, then the target shifted right), in one call.

    Args:
        model: A `Seq2SeqTransformer`, or any model whose call takes `source_ids` and
            `target_in_ids` and returns logits `[batch, length, vocabulary]`, with a `head`.
        source_ids: int32 `[batch, source length]`, each row ending with EOS, padded with 0.
        target_ids: int32 `[batch, length]`, each row ending with EOS, padded with 0.

    Returns:
        The `TeacherForced` batch; the head runs in float32.
    """
    # A batch without rows has length 0, where BOS alone would make the inputs one longer.
    target_in = teacher_forcing_inputs(target_ids)[:, : tf.shape(target_ids)[1]]
    logits = model({"source_ids": source_ids, "target_in_ids": target_in}, training=False)
    logits = tf.cast(logits, tf.float32)
    log_scores = model.head.log_scores(logits)
    is_token = padding_mask(target_ids)
    token_scores = tf.gather(log_scores, target_ids, batch_dims=2)
    return TeacherForced(logits, log_scores, tf.where(is_token, token_scores, 0.0), is_token)


def score_texts(
    model: Any,
    tokenizer: Any,
    sources: Sequence[str],
    targets: Sequence[str],
    batch_size: int = 64,
) -> np.ndarray:
    """How well each target translates its source: the SavedModel's `score`, in the library.

    Sources are tokenised as for translation (cut to the model's positions, EOS last), targets
    as training targets (pieces, then EOS). A target longer than the model's positions cannot
    be scored whole: its score is NaN, never the score of its beginning.

    Args:
        model: As in `teacher_forced`.
        tokenizer: The `tfscones.data.Tokenizer` of the model's vocabulary.
        sources: Source sentences.
        targets: One candidate translation per source.
        batch_size: Pairs per model call.

    Returns:
        float32 `[len(sources)]`, the scores.

    Raises:
        TypeError: If `sources` or `targets` is one string.
        ValueError: If they differ in length, or `batch_size` is not a whole number >= 1.
    """
    check_text_pairs(sources, targets)
    AT_LEAST_ONE.check("batch_size", batch_size)
    length = model.max_sequence_length
    scores = np.zeros(len(sources), np.float32)
    if not sources:
        return scores
    score_batch = _compiled_scores(model)
    for start in range(0, len(sources), batch_size):
        batch = slice(start, start + batch_size)
        source_ids = source_ids_for_model(tokenizer, tf.constant(list(sources[batch])), length)
        pieces = tokenizer.tokenize(tf.constant(list(targets[batch])))
        target_ids = append_eos(pieces, length)
        scored = score_batch(
            source_ids.to_tensor(default_value=PAD_ID), target_ids.to_tensor(default_value=PAD_ID)
        ).numpy()
        scores[batch] = np.where(pieces.row_lengths().numpy() > length - 1, np.nan, scored)
    return scores


def check_text_pairs(sources: Sequence[str], targets: Sequence[str]) -> None:
    """Checks the pairs `score_texts` takes, before a model loads.

    Raises:
        TypeError: If `sources` or `targets` is one string.
        ValueError: If they differ in length.
    """
    if isinstance(sources, str) or isinstance(targets, str):
        raise TypeError("sources and targets must be sequences of strings, not a string.")
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets.")


def _compiled_scores(model: Any) -> tf.types.experimental.PolymorphicFunction:
    """The `tf.function` of one padded batch's scores, made once per model."""

    def build(model_ref):
        @tf.function(input_signature=[_IDS, _IDS])
        def scores(source_ids, target_ids):
            return teacher_forced(model_ref(), source_ids, target_ids).scores

        return scores

    return per_model_function(model, (_compiled_scores,), build)


__all__ = ["TeacherForced", "check_text_pairs", "score_texts", "teacher_forced"]
