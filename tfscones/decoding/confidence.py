"""A confidence per translation and per token, with one meaning per head.

The confidence of a translation y of a source x is exp of the sum of the head's log scores of
its tokens, EOS included, as the decoders add them up (no length penalty); what that number
is, each head declares (`OutputHead.score_kind`):

- softmax and entmax (`normalised`): the sequence probability P(y | x). Several good
  translations share one unit of mass, so it falls whenever a source has several; its
  length-normalised form, exp of the mean token score, is the geometric mean of the tokens'
  probabilities.
- SCONES (sigmoid) and tanh: the model's probability that y is an adequate translation of x,
  ∏ P(z=1 | x, y<i, y_i) (Stahlberg & Kumar 2022, §2): several adequate translations can all
  score near 1.

Each token's confidence is exp of its own log score: its probability under a normalised head,
the probability that it keeps the prefix a valid translation under SCONES.

    results = translate_with_confidence(model, tokenizer, ["Danke."])
    results[0].text, results[0].confidence.sentence, results[0].confidence.tokens
    score_with_confidence(model, tokenizer, ["Danke."], ["Thanks."])[0].sentence

A translation's token scores are those its search chose each token by (`NBest.token_log_scores`),
so translating costs no second pass over the model; `score` computes a given translation's by
teacher forcing (`tfscones.decoding.scoring.teacher_forced`). The two agree up to float32
rounding, and the sentence figure is exp of the search's own `NBest.log_scores`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from tfscones.data.vocab_ids import EOS_ID
from tfscones.decoding.common import has_text
from tfscones.decoding.compiled import per_model_function
from tfscones.decoding.scoring import (
    check_text_pairs,
    in_length_sorted_batches,
    teacher_forced,
    tokenised_pairs,
)
from tfscones.decoding.search import Search
from tfscones.decoding.translate import decoded_sentences
from tfscones.ranges import AT_LEAST_ONE

_IDS = tf.TensorSpec([None, None], tf.int32)
EOS_LABEL = "</s>"


class Confidence(NamedTuple):
    """How sure the model is of one translation.

    Attributes:
        sentence: exp of the sum of its tokens' log scores, EOS included (the module's
            meaning per head); 0 for a token outside an entmax head's support, NaN for a
            target longer than the model reads.
        normalised: exp of the mean token log score: the geometric mean of the tokens'
            confidences, comparable between translations of different lengths.
        tokens: Each token's confidence, EOS last (a translation cut at the output limit has
            none).
        pieces: Each token as the vocabulary spells it (a SentencePiece piece such as `▁the`,
            or a symbol), `</s>` for EOS.
    """

    sentence: float
    normalised: float
    tokens: tuple[float, ...]
    pieces: tuple[str, ...]

    def columns(self, tokens: bool = False) -> str:
        """The sentence confidence; with `tokens`, a tab and `token:value` pairs, EOS last."""
        text = f"{self.sentence:.6g}"
        if tokens:
            pairs = zip(self.pieces, self.tokens, strict=True)
            text += "\t" + " ".join(f"{piece}:{value:.4f}" for piece, value in pairs)
        return text


EMPTY = Confidence(1.0, 1.0, (1.0,), (EOS_LABEL,))
"""An empty source's: its translation is the empty one, with score 0, on every path
(`tfscones.decoding.common.has_text`)."""


class ConfidentTranslation(NamedTuple):
    """A translation and its `Confidence`."""

    text: str
    confidence: Confidence


def confidence_of(token_log_scores: Sequence[float], pieces: Sequence[str]) -> Confidence:
    """The `Confidence` of a translation from its tokens' log scores (EOS included).

    Example:
    >>> confidence_of([math.log(0.5), math.log(0.8)], ["Hi", "</s>"]).sentence  # 0.5 · 0.8
    0.4000000000000001
    """
    total = float(np.sum(token_log_scores))
    count = len(token_log_scores)
    return Confidence(
        sentence=math.exp(total),
        normalised=math.exp(total / count) if count else math.nan,
        tokens=tuple(math.exp(score) for score in token_log_scores),
        pieces=tuple(pieces),
    )


def translate_with_confidence(
    model: Any,
    tokenizer: Any,
    sentences: Sequence[str] | tf.Tensor,
    batch_size: int = 64,
    search: Search | None = None,
    long_sources: str = "warn",
) -> list[ConfidentTranslation]:
    """Translates as `tfscones.decoding.translate` does, each translation with its confidence.

    Args:
        model: A model, or an `Ensemble` (each token's score is then the log of the models'
            mean probability).
        tokenizer: A `tfscones.data.Tokenizer` of the model's vocabulary.
        sentences: Source sentences.
        batch_size: Sentences decoded together.
        search: The decoding strategy (default: greedy); its first hypothesis is scored.
        long_sources: As in `translate`.

    Returns:
        One `ConfidentTranslation` per sentence, in order.

    Raises:
        TypeError, ValueError: As `translate` does.
    """
    source_ids, batches = decoded_sentences(
        model, tokenizer, sentences, batch_size, search or Search(), long_sources=long_sources
    )
    count = int(source_ids.shape[0])
    best: list[np.ndarray] = [np.zeros(0, np.int32)] * count
    token_log_scores: list[np.ndarray] = [np.zeros(0, np.float32)] * count
    for indices, output in batches:
        ids, lengths = output.ids[:, 0].numpy(), output.lengths[:, 0].numpy()
        scores = output.token_log_scores[:, 0].numpy()
        for row, index in enumerate(indices):
            best[index] = ids[row, : lengths[row]]
            token_log_scores[index] = scores[row, : lengths[row]]
    target_ids = tf.ragged.constant([row.tolist() for row in best], dtype=tf.int32, ragged_rank=1)
    texts = tokenizer.detokenize(target_ids).numpy() if count else []
    empty = ~has_text(source_ids.to_tensor()).numpy() if count else []
    return [
        ConfidentTranslation(
            text.decode("utf-8"),
            EMPTY if blank else confidence_of(scores, _piece_texts(tokenizer, ids)),
        )
        for text, ids, scores, blank in zip(texts, best, token_log_scores, empty, strict=True)
    ]


def score_with_confidence(
    model: Any,
    tokenizer: Any,
    sources: Sequence[str],
    targets: Sequence[str],
    batch_size: int = 64,
) -> list[Confidence]:
    """The confidence of given translations: a reference-free quality estimate of any system.

    Sources and targets are tokenised as `tfscones.decoding.score_texts` does; a target longer
    than the model's positions cannot be scored whole and gets NaN confidences.

    Raises:
        TypeError: If `sources` or `targets` is one string.
        ValueError: If they differ in length, or `batch_size` is not a whole number >= 1.
    """
    check_text_pairs(sources, targets)
    AT_LEAST_ONE.check("batch_size", batch_size)
    if not sources:
        return []
    pairs = tokenised_pairs(model, tokenizer, sources, targets)
    confidences = _confidences(model, tokenizer, pairs.source_ids, pairs.target_ids, batch_size)
    return [
        _unscorable(confidence) if long else confidence
        for confidence, long in zip(confidences, pairs.unreadable, strict=True)
    ]


def _unscorable(confidence: Confidence) -> Confidence:
    nan = math.nan
    return confidence._replace(
        sentence=nan, normalised=nan, tokens=tuple(nan for _ in confidence.tokens)
    )


def _confidences(
    model: Any,
    tokenizer: Any,
    source_ids: tf.RaggedTensor,
    target_ids: tf.RaggedTensor,
    batch_size: int,
) -> list[Confidence]:
    """Each target's `Confidence` under teacher forcing (targets ending with EOS, or empty)."""
    if source_ids.shape[0] == 0:
        return []
    scores = in_length_sorted_batches(
        _compiled_token_scores(model), source_ids, target_ids, batch_size
    )["token_scores"].numpy()
    return [
        confidence_of(scores[row, : len(ids)], _piece_texts(tokenizer, ids))
        for row, ids in enumerate(target_ids.numpy())
    ]


def _piece_texts(tokenizer: Any, ids: np.ndarray) -> list[str]:
    """Each token's piece or symbol (`tokenizer.id_to_piece`: `▁the`), `</s>` for EOS."""
    if not len(ids):
        return []
    texts = tokenizer.id_to_piece(tf.constant(ids, tf.int32)).numpy()
    return [
        EOS_LABEL if token == EOS_ID else text.decode("utf-8")
        for token, text in zip(ids, texts, strict=True)
    ]


def _compiled_token_scores(model: Any) -> tf.types.experimental.PolymorphicFunction:
    """The `tf.function` of one padded batch's token scores, made once per model."""

    def build(model_ref):
        @tf.function(input_signature=[_IDS, _IDS])
        def token_scores(source_ids, target_ids):
            forced = teacher_forced(model_ref(), source_ids, target_ids)
            return {"token_scores": forced.token_scores}

        return token_scores

    return per_model_function(model, (_compiled_token_scores,), build)
