"""What a decoder needs from a model: encode once, step with a cache, score with the head.

The decoders of `tfscones.decoding` never import a model class and never probe one. They take a
`Decodable`, anything with `stepper()`, and decode with the `StepModel` it returns: a
`Seq2SeqTransformer` returns a `tfscones.models.stepping.TransformerStepper` of itself (a
`LatentExpertTransformer` its expert variant), `tfscones.decoding.ParallelExperts` and the tests'
fake models are their own steppers. Every member of `StepModel` is required; what a stepper can
do beyond the minimum it declares as data, in its `StepCapabilities`, and decoders read those.

Shapes: `rows` is the number of sequences being decoded (sentences, or sentences times beams or
samples), `source_length` the padded source length, `width` the number of output positions.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import tensorflow as tf

if TYPE_CHECKING:
    from tfscones.heads import OutputHead


@dataclasses.dataclass(frozen=True)
class StepCapabilities:
    """What a `StepModel` can do beyond stepping on its `initial_cache`, one row per source.

    Attributes:
        shares_sources: Its `decode_step` takes `rows_per_source` above 1 (the encoder's
            tensors hold one row per sentence, read once for that many consecutive rows: beam
            search's beams) and a `SourceGroups` (rows that decode their sources in any number
            each: exact search). Without it a search repeats the encoder's tensors to every row.
        grows_cache: Its `growing_cache(rows)` is an empty cache that each step (scalar
            `index`) extends by one position, so that a step's work and beam search's reorder
            grow with the positions decoded so far, not with the longest output. Searches use
            it outside XLA, whose loops need fixed shapes.
        caches_prefixes: Its `prefix_cache(entries, slots)` gathers each row's own prefix from
            a pool of cache entries (one row of `initial_cache` at one position), and a step on
            it returns the row's own position alone, which `prefix_entries` turns back into
            entries: exact search then copies no cache back (`tfscones.decoding.exact`).
        latent_experts: K > 0 when it steps a model with K latent experts, whose
            `expert_token_id(k)` at index 0 selects expert k (`tfscones.models.latent_experts`):
            the `experts` search then decodes every expert at once. 0 for other models.
    """

    shares_sources: bool = False
    grows_cache: bool = False
    caches_prefixes: bool = False
    latent_experts: int = 0


class SourceGroups(NamedTuple):
    """Rows that decode their sources in any number each, for cross-attention without copies.

    Exact search steps a varying number of prefixes of each sentence together. Rather than
    give every row a copy of its sentence's cross-attention keys and values, a step lays the
    rows' queries out per source, `[sources, width]` places (`width` the most rows of any
    source, unused places zero), attends to each source's keys and values once for all of its
    rows, and takes each row's output back from its place. The layout's size depends on the
    rows' sources, so a step with it runs eagerly and in `tf.function`, not under XLA.

    Attributes:
        places: int32 `[rows]`, each row's place in the `[sources * width]` layout.
        width: int32 scalar, the places per source.
    """

    places: tf.Tensor
    width: tf.Tensor

    @classmethod
    def of(cls, row_sources: tf.Tensor) -> SourceGroups:
        """The groups of rows decoding sources `row_sources` (int32 `[rows]`, in any order).

        Rows of the same source take its places in their order; the sources are
        `0..max(row_sources)`.
        """
        row_sources = tf.convert_to_tensor(row_sources, tf.int32)
        order = tf.argsort(row_sources, stable=True)
        sorted_sources = tf.gather(row_sources, order)
        sorted_rows = tf.range(tf.size(row_sources))
        first_of_source = tf.math.unsorted_segment_min(
            sorted_rows, sorted_sources, tf.reduce_max(row_sources) + 1
        )
        ranks_sorted = sorted_rows - tf.gather(first_of_source, sorted_sources)
        ranks = tf.scatter_nd(order[:, tf.newaxis], ranks_sorted, tf.shape(row_sources))
        width = tf.reduce_max(ranks) + 1
        return cls(places=row_sources * width + ranks, width=width)


@runtime_checkable
class StepModel(Protocol):
    """A model decodable step by step. Every member is required.

    A decoder calls `encode` and `cross_attention_cache` once per batch
    (`tfscones.decoding.common.encode_source`) and `step_weights` once per search, then
    `decode_step` once per output position, from BOS at index 0, with a cache that
    `initial_cache` (or, where `capabilities` say so, `growing_cache` or `prefix_cache`) made;
    it scores the logits with `head.log_scores` and never asks which head it has. The encoder
    outputs may be any nest of tensors with the rows first: beam search and sampling repeat and
    reorder them with `tf.nest.map_structure`, together with the mask, the cross-attention
    cache and the self-attention cache.

    A member that `capabilities` do not declare (`growing_cache` without `grows_cache`, ...)
    raises `NotImplementedError`; no decoder calls it.

    Attributes:
        head: The `tfscones.heads.OutputHead` whose `log_scores` rank and score tokens.
        max_sequence_length: The default number of output positions (the decoding cache's
            length) and, in `translate`, the most source tokens.
        capabilities: Its `StepCapabilities`.
    """

    @property
    def head(self) -> OutputHead: ...

    @property
    def max_sequence_length(self) -> int: ...

    @property
    def capabilities(self) -> StepCapabilities: ...

    def stepper(self, frozen_weights: bool = False) -> StepModel:
        """Itself (a `Decodable` whose stepper it is); see `Decodable.stepper`."""
        ...

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
        """What each step reads of the encoder outputs, computed once per batch (rows first)."""
        ...

    def step_weights(self) -> Any:
        """What each step would otherwise recompute, made once per search (None for nothing).

        It has no rows axis: searches pass the same value to every step.
        """
        ...

    def initial_cache(self, batch_size: int | tf.Tensor, max_length: int) -> Any:
        """The empty self-attention cache of `batch_size` rows and `max_length` positions.

        A nest of tensors, the rows first; a step writes its position in place, so shapes do
        not change from step to step (XLA compiles it), and rows may be at different positions.
        """
        ...

    def growing_cache(self, batch_size: int | tf.Tensor) -> Any:
        """An empty cache that each step extends by one position (`grows_cache`)."""
        ...

    def prefix_cache(self, entries: tf.Tensor | tf.Variable, slots: tf.Tensor) -> Any:
        """Each row's prefix gathered from pooled `entries` at `slots` (`caches_prefixes`).

        Args:
            entries: `[capacity, *entry]`, one row of `initial_cache` at one position each.
            slots: int32 `[rows, positions]`: row `r`'s position `p` is entry `slots[r, p]`.
        """
        ...

    def prefix_entries(self, own_position: Any) -> tf.Tensor:
        """The entries `[rows, *entry]` of the cache a step on a `prefix_cache` returned."""
        ...

    def decode_step(
        self,
        token_ids: tf.Tensor,
        encoder_outputs: Any,
        source_padding_mask: tf.Tensor,
        cache: Any,
        index: int | tf.Tensor,
        cross_attention_cache: Any,
        step_weights: Any,
        rows_per_source: int | SourceGroups,
    ) -> tuple[tf.Tensor, Any]:
        """One decoder step, free of Python branches on tensors (it runs under XLA).

        Args:
            token_ids: int32 `[rows]`, the tokens at position `index` (BOS at index 0).
            encoder_outputs: From `encode`, reordered like the rows.
            source_padding_mask: bool `[rows, source_length]`, reordered like the rows.
            cache: A cache holding positions `0 .. index - 1`; what it holds after them is
                never read.
            index: int32 scalar, the position of `token_ids`; or, on an `initial_cache` or a
                `prefix_cache`, int32 `[rows]`, each row's own position (exact search).
            cross_attention_cache: From `cross_attention_cache`, reordered like the rows.
            step_weights: From `step_weights`.
            rows_per_source: 1; or, with `shares_sources`, a static int (row `r` decodes source
                row `r // rows_per_source` of the encoder's tensors) or a `SourceGroups`.

        Returns:
            `(logits, cache)`: float logits `[rows, vocabulary_size]` of the token at position
            `index + 1`, and the cache of the same kind with position `index` written (for a
            `prefix_cache`, that position alone).
        """
        ...


class Decodable(Protocol):
    """What every decoder takes: a model that makes its `StepModel`, or a `StepModel` itself."""

    def stepper(self, frozen_weights: bool = False) -> StepModel:
        """The `StepModel` that decodes this model.

        Args:
            frozen_weights: Whether its `step_weights()` are made once, now, and kept in
                variables (for a model whose weights no longer change, as in an export: no
                request then repeats that work). A stepper without step weights ignores it.
        """
        ...


def undeclared(stepper: StepModel, capability: str) -> NotImplementedError:
    """The error of a `StepModel` member whose capability the stepper does not declare."""
    return NotImplementedError(
        f"{type(stepper).__name__} does not declare {capability} in its StepCapabilities."
    )


__all__ = ["Decodable", "SourceGroups", "StepCapabilities", "StepModel", "undeclared"]
