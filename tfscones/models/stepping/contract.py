"""What a decoder needs from a model: encode once, step with a cache, score with the head.

The decoders here never import a model class; they take any object with the methods below.
`Seq2SeqTransformer` (and so `LatentExpertTransformer`) has them, and so does the expert adapter
`tfscones.decoding.experts.ParallelExperts`; the tests' fake models implement them with a few
tables. The protocol is `runtime_checkable`, so `isinstance(model, StepModel)` checks that every
member is present (not their signatures). Every decoder takes a `StepModel`: greedy search, beam
and diverse beam search, sampling, `Search.decode`, `compiled_search`, `translate`,
`translate_nbest`, and exact search, which steps rows at different positions together (an
`index` per row) from caches it assembles position by position.

Shapes: `rows` is the number of sequences being decoded (sentences, or sentences times beams or
samples), `source_length` the padded source length, `width` the number of output positions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import tensorflow as tf

if TYPE_CHECKING:
    from tfscones.heads import OutputHead


@runtime_checkable
class StepModel(Protocol):
    """A model decodable step by step: the incremental interface of `Seq2SeqTransformer`.

    A decoder calls `encode` and `cross_attention_cache` once per batch (`encode_source`), then
    `decode_step` once per output position, from BOS at index 0, with the cache that
    `initial_cache` made; it scores the logits with `head.log_scores` and never asks which head
    it has. The encoder outputs may be any nest of tensors with the rows first: beam search and
    sampling repeat and reorder them with `tf.nest.map_structure`, together with the mask and
    the cross-attention cache.

    Optionally, a model has `growing_cache(batch_size)`: an empty cache that each
    `decode_step` (scalar `index`) extends by one position. Outside XLA the decoders use it
    (`tfscones.decoding.common.search_cache`), so that a step's work and beam search's reorder
    grow with the positions decoded so far, not with `max_length`. Decoders ask for it unless
    their caller says that it compiles them with XLA (their `jit_compile` argument).

    Optionally, too, a model has `step_weights()`: what its `decode_step` would recompute at
    every step (`Seq2SeqTransformer`: the transposed output projection), made once before a
    decoding loop and passed to every step as `decode_step(..., step_weights=...)`
    (`tfscones.decoding.common.step_weights`).

    Optionally, too, a model has `prefix_cache(entries, slots)` and `prefix_entries(cache)`: a
    cache of each row's own prefix, gathered from a pool of `initial_cache` entries, on which
    `decode_step` (an `index` per row) returns the keys and values of the rows' own positions
    alone, and those as entries (`tfscones.models.seq2seq_transformer.PrefixCache`). Exact
    search then gathers each prefix's positions once and copies no cache back
    (`tfscones.decoding.exact`).

    Optionally, last, its `decode_step` takes a static int `rows_per_source`: the encoder's
    tensors then hold one row per sentence, which serves that many consecutive rows of
    `token_ids` and `cache` (beam search's beams), so that a sentence's cross-attention is read
    once for all its beams (`tfscones.decoding.common.repeat_for_rows`). A model without it gets
    the encoder's tensors repeated to every row. A model that also has
    `source_groups(row_sources)` takes what it returns as `rows_per_source`, for rows that
    decode their sources in any number each (exact search, `tfscones.decoding.exact`).

    Attributes:
        head: The `tfscones.heads.OutputHead` whose `log_scores` rank and score tokens.
        max_sequence_length: The default number of output positions (the decoding cache's
            length) and, in `translate`, the most source tokens.
    """

    @property
    def head(self) -> OutputHead: ...

    @property
    def max_sequence_length(self) -> int: ...

    def encode(self, source_ids: tf.Tensor) -> tuple[Any, tf.Tensor]:
        """Runs the encoder once.

        Args:
            source_ids: int32 `[rows, source_length]`, each row ending with EOS, padded with 0.

        Returns:
            `(encoder_outputs, source_padding_mask)`: a nest of tensors with the rows first,
            and bool `[rows, source_length]`, True at real tokens.
        """
        ...

    def cross_attention_cache(self, encoder_outputs: Any) -> Any:
        """The decoder's keys and values over the encoder outputs, computed once per batch."""
        ...

    def initial_cache(self, batch_size: int | tf.Tensor, max_length: int) -> tf.Tensor:
        """The empty self-attention cache of `batch_size` rows and `max_length` positions.

        The rows come first, and one other axis holds the positions (its length is
        `max_length`); exact search gathers caches along that axis.
        """
        ...

    def decode_step(
        self,
        token_ids: tf.Tensor,
        encoder_outputs: Any,
        source_padding_mask: tf.Tensor,
        cache: tf.Tensor,
        index: int | tf.Tensor,
        cross_attention_cache: Any = None,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """One decoder step, free of Python branches on tensors (it runs under XLA).

        Args:
            token_ids: int32 `[rows]`, the tokens at position `index` (BOS at index 0).
            encoder_outputs: From `encode`, reordered like the rows.
            source_padding_mask: bool `[rows, source_length]`, reordered like the rows.
            cache: The self-attention cache holding positions `0 .. index - 1`; what it holds
                after them is never read.
            index: int32 scalar, the position of `token_ids`; or int32 `[rows]`, each row's own
                position (exact search).
            cross_attention_cache: From `cross_attention_cache`, reordered like the rows.

        Returns:
            `(logits, cache)`: float logits `[rows, vocabulary_size]` of the token at position
            `index + 1`, and the cache now holding position `index` too (each row's own, for
            an `index` per row; the positions after it may then hold anything).
        """
        ...


class FrozenStepModel(tf.Module):
    """A `StepModel` whose `step_weights()` are made once, when it is made, and kept.

    A search calls `step_weights()` once per call, so a served model would redo that work on
    every request (`Seq2SeqTransformer`: transpose its tied embedding table). This wrapper asks
    the model for `frozen_step_weights()` (variables) once and returns them from every
    `step_weights()`; every other member is the model's own. It is for a model whose weights
    no longer change, as in an export (`tfscones.serving.TranslationModule`): the variables
    are copies and do not follow later training.

    Args:
        model: A `StepModel` with `frozen_step_weights()`.
    """

    def __init__(self, model: StepModel):
        super().__init__(name="frozen_step_model")
        self.model = model
        self.frozen_weights = model.frozen_step_weights()

    def step_weights(self) -> Any:
        """The weights made when the wrapper was made."""
        return self.frozen_weights

    def __getattr__(self, name: str) -> Any:
        if name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)


__all__ = ["FrozenStepModel", "StepModel"]
