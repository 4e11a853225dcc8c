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


def teacher_forced(
    model: Any, source_ids: tf.Tensor, target_ids: tf.Tensor, training: bool = False
) -> TeacherForced:
    """Feeds each target to the model (BOS, then the target shifted right), in one call.

    Args:
        model: A `Seq2SeqTransformer`, or any model whose call takes `source_ids` and
            `target_in_ids` and returns logits `[batch, length, vocabulary]`, with a `head`.
        source_ids: int32 `[batch, source length]`, each row ending with EOS, padded with 0.
        target_ids: int32 `[batch, length]`, each row ending with EOS, padded with 0.
        training: Whether dropout is on (Monte Carlo dropout,
            `tfscones.evaluation.quality_estimation`).

    Returns:
        The `TeacherForced` batch; the head runs in float32.
    """
    # A batch without rows has length 0, where BOS alone would make the inputs one longer.
    target_in = teacher_forcing_inputs(target_ids)[:, : tf.shape(target_ids)[1]]
    logits = model({"source_ids": source_ids, "target_in_ids": target_in}, training=training)
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
    be scored whole: its score is NaN, never the score of its beginning. (The SavedModel's
    `score` also gives NaN for a target over its request limit of `max_source_characters`
    characters; the library has no character limit.) Pairs run `batch_size` at a time sorted by
    target length (`in_length_sorted_batches`), so that short targets are not padded to long ones.

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
    if not sources:
        return np.zeros(0, np.float32)
    pairs = tokenised_pairs(model, tokenizer, sources, targets)
    scored = in_length_sorted_batches(
        _compiled_scores(model), pairs.source_ids, pairs.target_ids, batch_size
    )["scores"].numpy()
    return np.where(pairs.unreadable, np.nan, scored)


class TokenisedPairs(NamedTuple):
    """Sentence pairs as a model reads them.

    Attributes:
        source_ids: Ragged int32 `[pairs, None]`, as for translation (cut, EOS last).
        target_ids: Ragged int32 `[pairs, None]`, pieces then EOS, cut to the model's positions.
        unreadable: bool `[pairs]`: a target longer than the model reads, which no score
            may stand for (its cut beginning is not the target).
    """

    source_ids: tf.RaggedTensor
    target_ids: tf.RaggedTensor
    unreadable: np.ndarray


def tokenised_pairs(
    model: Any, tokenizer: Any, sources: Sequence[str], targets: Sequence[str]
) -> TokenisedPairs:
    """Sources tokenised as for translation, targets as training targets (`TokenisedPairs`)."""
    length = model.max_sequence_length
    source_ids = source_ids_for_model(tokenizer, tf.constant(list(sources)), length)
    pieces = tokenizer.tokenize_target(tf.constant(list(targets)))
    unreadable = pieces.row_lengths().numpy() > length - 1
    return TokenisedPairs(source_ids, append_eos(pieces, length), unreadable)


def in_length_sorted_batches(
    function: Any, source_ids: tf.RaggedTensor, target_ids: tf.RaggedTensor, batch_size: int
) -> dict[str, tf.Tensor]:
    """`function`'s outputs over batches of pairs sorted by target length, in input order.

    Args:
        function: `function(source_ids, target_ids) -> dict of tensors, batch first`, on padded
            int32 `[batch, length]` ids.
        source_ids: Ragged int32 `[pairs, None]`.
        target_ids: Ragged int32 `[pairs, None]`.
        batch_size: Pairs per call.

    Returns:
        Each output of `function`, concatenated over the batches, pair `i` at row `i`.
    """
    order = np.argsort(target_ids.row_lengths().numpy(), kind="stable")
    batches = []
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        sources = tf.gather(source_ids, indices).to_tensor(default_value=PAD_ID)
        targets = tf.gather(target_ids, indices).to_tensor(default_value=PAD_ID)
        batches.append(function(sources, targets))
    inverse = np.argsort(order)
    return {key: tf.gather(tf.concat([b[key] for b in batches], 0), inverse) for key in batches[0]}


def check_text_pairs(
    sources: Sequence[str], targets: Sequence[str], targets_name: str = "targets"
) -> None:
    """Checks sentence pairs (`score_texts`, calibration's), before a model loads.

    Args:
        sources: Source sentences.
        targets: One sentence per source.
        targets_name: What the error messages call the targets (`references`, ...).

    Raises:
        TypeError: If `sources` or `targets` is one string.
        ValueError: If they differ in length.
    """
    if isinstance(sources, str) or isinstance(targets, str):
        raise TypeError(f"sources and {targets_name} must be sequences of strings, not a string.")
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} {targets_name}.")


def _compiled_scores(model: Any) -> tf.types.experimental.PolymorphicFunction:
    """The `tf.function` of one padded batch's scores, made once per model."""

    def build(model_ref):
        @tf.function(input_signature=[_IDS, _IDS])
        def scores(source_ids, target_ids):
            return {"scores": teacher_forced(model_ref(), source_ids, target_ids).scores}

        return scores

    return per_model_function(model, (_compiled_scores,), build)


__all__ = [
    "TeacherForced",
    "TokenisedPairs",
    "check_text_pairs",
    "in_length_sorted_batches",
    "score_texts",
    "teacher_forced",
]
