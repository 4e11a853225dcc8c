"""Strings in, strings out: tokenise, decode greedily with a compiled function, detokenise."""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tfscones.data.vocab_ids import EOS_ID, PAD_ID
from tfscones.decoding import common
from tfscones.decoding.greedy import greedy_decode

SOURCE_LENGTH_MULTIPLE = 8

_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compiled_greedy_decode(
    model: Any,
    max_length: int | None = None,
    max_length_a: float = common.DEFAULT_MAX_LENGTH_A,
    max_length_b: float = common.DEFAULT_MAX_LENGTH_B,
    jit_compile: bool = False,
) -> tf.types.experimental.PolymorphicFunction:
    """The `tf.function` of `greedy_decode` for a model, made once and then reused.

    The function takes int32 `source_ids` `[batch, source_length]` of any shape (one trace) and
    returns a `GreedyOutput`. Under `jit_compile=True`, XLA still compiles once per distinct
    input shape, so callers should bucket their shapes (as `translate` does).

    Args:
        model: The model.
        max_length: As in `greedy_decode`.
        max_length_a: As in `greedy_decode`.
        max_length_b: As in `greedy_decode`.
        jit_compile: Whether to compile the function with XLA.

    Returns:
        The function, cached for this model and these arguments while the model lives.
    """
    key = (max_length, float(max_length_a), float(max_length_b), bool(jit_compile))
    functions = _COMPILED.setdefault(model, {})
    if key not in functions:
        # A weak reference, so that the cached function does not keep its model alive.
        model_ref = weakref.ref(model)

        @tf.function(
            input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")],
            jit_compile=jit_compile,
        )
        def decode(source_ids):
            return greedy_decode(model_ref(), source_ids, max_length, max_length_a, max_length_b)

        functions[key] = decode
    return functions[key]


def source_ids_for_model(
    tokenizer: Any, sentences: tf.Tensor, max_source_length: int
) -> tf.RaggedTensor:
    """Tokenises sources as training does (pieces then EOS), truncated to `max_source_length`.

    A source with more than `max_source_length - 1` pieces keeps its first ones and still ends
    with EOS, as every training source does.

    Args:
        tokenizer: A `tfscones.data.Tokenizer`.
        sentences: string `[batch]`.
        max_source_length: Most tokens a source may have, EOS included (at least 1).

    Returns:
        int32 ragged `[batch, (length)]`, each row ending with EOS.
    """
    pieces = tokenizer.tokenize(sentences)[:, : max_source_length - 1]
    eos = tf.fill([pieces.nrows(), 1], tf.constant(EOS_ID, pieces.dtype))
    return tf.concat([pieces, eos], axis=1)


def translate(
    model: Any,
    tokenizer: Any,
    sentences: Sequence[str] | tf.Tensor,
    batch_size: int = 64,
    max_length: int | None = None,
    max_length_a: float = common.DEFAULT_MAX_LENGTH_A,
    max_length_b: float = common.DEFAULT_MAX_LENGTH_B,
    jit_compile: bool = False,
) -> list[str]:
    """Translates sentences with greedy search, batch by batch.

    Sources are tokenised with EOS appended, as the training pipeline does, and truncated to
    `model.max_sequence_length` tokens (EOS kept last). They are sorted by length before
    batching, so that a batch holds sources of similar lengths, and each batch is padded with 0
    to a multiple of 8 tokens, so that an XLA-compiled decoder compiles for few shapes. The
    outputs come back in the order of the inputs. The decoding function is
    `compiled_greedy_decode(model, ...)`: traced once per model and set of arguments.

    Example:
    ```python
    tokenizer = Tokenizer.from_file("spm.model")
    translate(model, tokenizer, ["Guten Morgen.", "Danke."])  # ["Good morning.", "Thanks."]
    ```

    Args:
        model: The model (a `Seq2SeqTransformer` or an object with its decoding interface).
        tokenizer: A `tfscones.data.Tokenizer` of the model's vocabulary.
        sentences: Source sentences: a list of strings or a 1-D string tensor.
        batch_size: Sentences decoded together.
        max_length: As in `greedy_decode`.
        max_length_a: As in `greedy_decode`.
        max_length_b: As in `greedy_decode`.
        jit_compile: Whether to compile the decoder with XLA (worth it on accelerators).

    Returns:
        One translation per sentence, in order.

    Raises:
        ValueError: If `batch_size` is not positive or `sentences` is not one-dimensional.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}.")
    if isinstance(sentences, tf.Tensor):
        strings = sentences
    else:
        strings = tf.constant(list(sentences), dtype=tf.string, shape=[len(sentences)])
    if strings.shape.rank != 1:
        raise ValueError(f"sentences must be one-dimensional, got shape {strings.shape}.")
    if strings.shape[0] == 0:
        return []
    decode = compiled_greedy_decode(model, max_length, max_length_a, max_length_b, jit_compile)
    source_ids = source_ids_for_model(tokenizer, strings, model.max_sequence_length)
    order = np.argsort(source_ids.row_lengths().numpy(), kind="stable")
    translations: list[str] = [""] * len(order)
    for start in range(0, len(order), batch_size):
        batch_indices = order[start : start + batch_size]
        batch = tf.gather(source_ids, batch_indices)
        width = SOURCE_LENGTH_MULTIPLE * math.ceil(
            int(tf.reduce_max(batch.row_lengths())) / SOURCE_LENGTH_MULTIPLE
        )
        output = decode(batch.to_tensor(default_value=PAD_ID, shape=[None, width]))
        texts = tokenizer.detokenize(output.ids).numpy()
        for index, text in zip(batch_indices, texts, strict=True):
            translations[index] = text.decode("utf-8")
    return translations
