"""Strings in, strings out: tokenise, decode with a compiled search, detokenise."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tfscones.data.preprocessing import append_eos
from tfscones.data.symbol_vocab import count_unknown
from tfscones.data.vocab_ids import PAD_ID
from tfscones.decoding.compiled import per_model_function
from tfscones.decoding.search import NBest, Search
from tfscones.models.stepping import Decodable
from tfscones.ranges import AT_LEAST_ONE

logger = logging.getLogger(__name__)

SOURCE_LENGTH_MULTIPLE = 8


def compiled_search(
    model: Decodable,
    search: Search | None = None,
    jit_compile: bool = False,
) -> tf.types.experimental.PolymorphicFunction:
    """The `tf.function` of `search.decode` for a model, made once and then reused.

    The function takes int32 `source_ids` `[batch, source_length]` of any shape (one trace) and
    returns an `NBest`. Under `jit_compile=True`, XLA still compiles once per distinct input
    shape, so callers should bucket their shapes (as `translate` does).

    Args:
        model: The model.
        search: The decoding strategy (default: greedy search).
        jit_compile: Whether to compile the function with XLA.

    Returns:
        The function, cached for this model, search and `jit_compile` while the model lives.
    """
    search = Search() if search is None else search

    def build(model_ref):
        @tf.function(
            input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")],
            jit_compile=jit_compile,
        )
        def decode(source_ids):
            return search.decode(model_ref(), source_ids, jit_compile=bool(jit_compile))

        return decode

    return per_model_function(model, (compiled_search, search, bool(jit_compile)), build)


def source_ids_for_model(
    tokenizer: Any, sentences: tf.Tensor, max_source_length: int
) -> tf.RaggedTensor:
    """Tokenises sources as training does (pieces then EOS), truncated to `max_source_length`.

    A source with more than `max_source_length - 1` pieces keeps its first ones and still ends
    with EOS, as every training source does (`tfscones.data.preprocessing.append_eos`).

    Args:
        tokenizer: A `tfscones.data.Tokenizer`.
        sentences: string `[batch]`.
        max_source_length: Most tokens a source may have, EOS included (at least 1).

    Returns:
        int32 ragged `[batch, (length)]`, each row ending with EOS.

    Raises:
        ValueError: If `max_source_length` is less than 1.
    """
    return append_eos(tokenizer.tokenize(sentences), max_source_length)


def cut_sources(
    tokenizer: Any, sentences: Sequence[str] | tf.Tensor, max_source_length: int
) -> dict[int, int]:
    """The sources longer than a model reads, by index, with their number of pieces.

    A source of more than `max_source_length - 1` pieces is cut to that many (EOS comes last):
    `source_ids_for_model` keeps its first pieces only.
    """
    return _cut_rows(tokenizer.tokenize(sentence_tensor(sentences)), max_source_length)


def unknown_sources(tokenizer: Any, sentences: Sequence[str] | tf.Tensor) -> dict[int, int]:
    """The sources holding symbols or pieces outside the vocabulary, by index, with their count.

    Each such symbol (a character a symbol vocabulary has never seen, a language it has no tag
    for, a character SentencePiece cannot piece) is read as the unknown symbol (id 2), never
    dropped; this says where that happens, so that a program can report it.
    """
    counts = count_unknown(tokenizer.tokenize(sentence_tensor(sentences))).numpy()
    return {int(i): int(counts[i]) for i in np.flatnonzero(counts)}


def _cut_rows(pieces: tf.RaggedTensor, max_source_length: int) -> dict[int, int]:
    """The rows of `pieces` longer than `max_source_length - 1`, by index, with their lengths."""
    lengths = pieces.row_lengths().numpy()
    return {int(i): int(lengths[i]) for i in np.flatnonzero(lengths > max_source_length - 1)}


LONG_SOURCES = ("warn", "error", "translate")


def check_long_sources(
    tokenizer: Any, sentences: Sequence[str] | tf.Tensor, max_source_length: int, policy: str
) -> dict[int, int]:
    """Applies `policy` to the sources a model would cut (`cut_sources`); returns them.

    Args:
        tokenizer: The model's tokenizer.
        sentences: The sources.
        max_source_length: Tokens the model reads, EOS included.
        policy: `warn` logs one warning (how many, which) and translates the first pieces,
            `error` refuses before any decoding, `translate` says nothing (for callers that
            report the returned sources themselves).

    Raises:
        ValueError: For `error`, naming the first source too long and its length; for an
            unknown policy.
    """
    _check_policy(policy)
    cut = cut_sources(tokenizer, sentences, max_source_length)
    _apply_policy(cut, len(sentences), max_source_length, policy)
    return cut


def _check_policy(policy: str) -> None:
    if policy not in LONG_SOURCES:
        raise ValueError(f"long_sources must be one of {', '.join(LONG_SOURCES)} (got {policy!r}).")


def _apply_policy(cut: dict[int, int], count: int, max_source_length: int, policy: str) -> None:
    """Refuses (`error`) or reports (`warn`) the sources `cut`, among `count`."""
    if cut and policy == "error":
        index, pieces = next(iter(cut.items()))
        raise ValueError(
            f"sentence {index} has {pieces:,} pieces; the model reads at most "
            f"{max_source_length - 1} and EOS ({len(cut)} sentence(s) too long)."
        )
    if cut and policy == "warn":
        shown = ", ".join(str(index) for index in list(cut)[:10])
        logger.warning(
            "%d of %d sentences are longer than the model reads (%d pieces and EOS); each was "
            "translated from its first %d pieces: sentences %s%s",
            len(cut),
            count,
            max_source_length - 1,
            max_source_length - 1,
            shown,
            ", ..." if len(cut) > 10 else "",
        )


def translate(
    model: Decodable,
    tokenizer: Any,
    sentences: Sequence[str] | tf.Tensor,
    batch_size: int = 64,
    search: Search | None = None,
    jit_compile: bool = False,
    long_sources: str = "warn",
) -> list[str]:
    """Translates sentences, batch by batch; greedy search unless `search` says otherwise.

    Sources are tokenised with EOS appended, as the training pipeline does; one longer than
    `model.max_sequence_length` tokens is translated from its first pieces (EOS kept last) and
    reported as `long_sources` says (`check_long_sources`: a warning by default). An empty or
    whitespace-only sentence translates to the empty string. They are sorted by length before
    batching, so that a batch holds sources of similar lengths, and each batch is padded with 0
    to a multiple of 8 tokens, so that an XLA-compiled decoder compiles for few shapes. The
    outputs come back in the order of the inputs. The decoding function is
    `compiled_search(model, search, jit_compile)`: traced once per model and search.

    Example:
    ```python
    tokenizer = Tokenizer.from_file("spm.model")
    translate(model, tokenizer, ["Guten Morgen.", "Danke."])  # ["Good morning.", "Thanks."]
    translate(model, tokenizer, ["Danke."], search=Search("beam", beam_size=4))
    ```

    Args:
        model: A `Decodable` (`tfscones.models.stepping`): a model such as a
            `Seq2SeqTransformer`, or a `StepModel`.
        tokenizer: A `tfscones.data.Tokenizer` of the model's vocabulary.
        sentences: Source sentences: a list of strings or a 1-D string tensor.
        batch_size: Sentences decoded together.
        search: The decoding strategy (default: greedy search); its first hypothesis is the
            translation.
        jit_compile: Whether to compile the decoder with XLA (worth it on accelerators).
        long_sources: What to do with sources longer than the model reads: `warn`, `error`
            or `translate` (see `check_long_sources`).

    Returns:
        One translation per sentence, in order.

    Raises:
        TypeError: If `sentences` is one string, or holds something other than strings.
        ValueError: If `batch_size` is not positive, `sentences` is not one-dimensional, or a
            source is too long under `long_sources="error"`.
    """
    search = Search() if search is None else search
    return [
        hypotheses[0][0]
        for hypotheses in translate_nbest(
            model, tokenizer, sentences, batch_size, search, jit_compile, long_sources=long_sources
        )
    ]


def translate_nbest(
    model: Decodable,
    tokenizer: Any,
    sentences: Sequence[str] | tf.Tensor,
    batch_size: int = 64,
    search: Search | None = None,
    jit_compile: bool = False,
    long_sources: str = "warn",
) -> list[list[tuple[str, float]]]:
    """Every hypothesis of `search` for each sentence, as `(text, score)` pairs, best first.

    Tokenisation, batching and ordering as `translate`. Empty slots (fewer hypotheses than
    asked for, which only a sparse entmax head can leave) are left out.

    Args:
        model: The model.
        tokenizer: A `tfscones.data.Tokenizer` of the model's vocabulary.
        sentences: Source sentences: a list of strings or a 1-D string tensor.
        batch_size: Sentences decoded together.
        search: The decoding strategy (default: beam search of 4, its 4 best).
        jit_compile: Whether to compile the decoder with XLA.
        long_sources: What to do with sources longer than the model reads (see `translate`).

    Returns:
        Per sentence, in order, a list of `(translation, score)`.

    Raises:
        TypeError: If `sentences` is one string, or holds something other than strings.
        ValueError: If `batch_size` is not positive or `sentences` is not one-dimensional.
    """
    search = Search("beam", beam_size=4, num_hypotheses=4) if search is None else search
    source_ids, batches = decoded_sentences(
        model, tokenizer, sentences, batch_size, search, jit_compile, long_sources
    )
    results: list[list[tuple[str, float]]] = [[] for _ in range(source_ids.shape[0])]
    for indices, output in batches:
        count = output.ids.shape[1]
        texts = tokenizer.detokenize(tf.reshape(output.ids, [-1, output.ids.shape[2]])).numpy()
        scores = output.scores.numpy()
        lengths = output.lengths.numpy()
        for row, index in enumerate(indices):
            results[index] = [
                (texts[row * count + i].decode("utf-8"), float(scores[row, i]))
                for i in range(count)
                if lengths[row, i] > 0
            ]
    return results


def decoded_sentences(
    model: Decodable,
    tokenizer: Any,
    sentences: Sequence[str] | tf.Tensor,
    batch_size: int,
    search: Search,
    jit_compile: bool = False,
    long_sources: str = "warn",
) -> tuple[tf.RaggedTensor, Iterator[tuple[np.ndarray, NBest]]]:
    """Checks and tokenises sentences as `translate` does, and decodes them batch by batch.

    Returns:
        The source ids (ragged int32, each row ending with EOS), and the batches, each as
        `(row indices, NBest of those rows)`, decoded as they are read.

    Raises:
        TypeError, ValueError: As `translate` does, before anything is decoded.
    """
    AT_LEAST_ONE.check("batch_size", batch_size)
    _check_policy(long_sources)
    strings = sentence_tensor(sentences)
    count, max_length = int(strings.shape[0]), model.max_sequence_length
    pieces = tokenizer.tokenize(strings)
    _apply_policy(_cut_rows(pieces, max_length), count, max_length, long_sources)
    source_ids = append_eos(pieces, max_length)
    decode = compiled_search(model, search, jit_compile)
    return source_ids, _decoded_batches(source_ids, batch_size, decode)


def sentence_tensor(sentences: Sequence[str] | tf.Tensor) -> tf.Tensor:
    """The sentences as a string tensor `[count]`: the check every path that takes text shares.

    Raises:
        TypeError: For one string (not a list of them), and for sentences that are not strings.
        ValueError: For a string that is not Unicode text (a lone surrogate, which has no
            UTF-8 form), naming the sentence, and for a tensor that is not one-dimensional.
    """
    if isinstance(sentences, (str, bytes)):
        raise TypeError(
            "sentences must be a list of sentences, not one string (which would translate "
            f"each character): write [{sentences[:40]!r}]."
        )
    if isinstance(sentences, tf.Tensor):
        strings = sentences
    else:
        sentences = list(sentences)
        kinds = sorted({type(s).__name__ for s in sentences if not isinstance(s, (str, bytes))})
        if kinds:
            raise TypeError(f"sentences must be strings; got {', '.join(kinds)}.")
        strings = tf.constant(
            [_utf8(index, s) for index, s in enumerate(sentences)],
            dtype=tf.string,
            shape=[len(sentences)],
        )
    if strings.dtype != tf.string:
        raise TypeError(f"sentences must be strings; got a tensor of {strings.dtype.name}.")
    if strings.shape.rank != 1:
        raise ValueError(f"sentences must be one-dimensional, got shape {strings.shape}.")
    return strings


def _utf8(index: int, sentence: str | bytes) -> bytes:
    """A sentence's UTF-8 bytes (bytes as they are: the graph repairs invalid UTF-8)."""
    if isinstance(sentence, bytes):
        return sentence
    try:
        return sentence.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            f"sentences[{index}] is not Unicode text: {error.reason} at character {error.start} "
            f"({sentence[error.start]!r})."
        ) from None


def _decoded_batches(
    source_ids: tf.RaggedTensor, batch_size: int, decode
) -> Iterator[tuple[np.ndarray, NBest]]:
    """Yields `(row indices, decode(padded rows))` per batch of rows of similar lengths."""
    if source_ids.shape[0] == 0:
        return
    order = np.argsort(source_ids.row_lengths().numpy(), kind="stable")
    for start in range(0, len(order), batch_size):
        batch_indices = order[start : start + batch_size]
        batch = tf.gather(source_ids, batch_indices)
        width = SOURCE_LENGTH_MULTIPLE * math.ceil(
            int(tf.reduce_max(batch.row_lengths())) / SOURCE_LENGTH_MULTIPLE
        )
        yield batch_indices, decode(batch.to_tensor(default_value=PAD_ID, shape=[None, width]))
