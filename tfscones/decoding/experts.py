"""Expert decoding: every expert of a `LatentExpertTransformer` through the unchanged decoders.

Shen et al. (2019), "Mixture Models for Diverse Machine Translation: Tricks of the Trade", decode
with each of the K experts of a hard mixture greedily and in parallel (§3.2, last paragraph): K
diverse translations per sentence. `ParallelExperts` adapts the model to the decoders' interface
(`tfscones.models.stepping.StepModel`): each source is tiled K times and row `b * K + k` is decoded
by expert k, whose embedding replaces the BOS token at index 0. `decode_experts` runs any `Search`
that way and returns the K experts' hypotheses of every sentence.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, NamedTuple

import tensorflow as tf

from tfscones.decoding.registry import Decoder, NBest, register
from tfscones.decoding.search import Search

if TYPE_CHECKING:
    from tfscones.heads import OutputHead
    from tfscones.models.latent_experts import LatentExpertTransformer
    from tfscones.models.stepping import ExpertTransformerStepper


class ExpertStates(NamedTuple):
    """The encoder outputs of `ParallelExperts`: hidden states plus each row's expert.

    Decoders tile and reorder encoder outputs with `tf.nest.map_structure` (beam search repeats
    every row once per beam, sampling once per sample), so an expert index carried here stays
    with its row, whatever the decoder does with rows.

    Attributes:
        states: `[rows, source_length, hidden_dim]`, the model's encoder outputs.
        experts: int32 `[rows]`, the expert each row decodes with.
    """

    states: tf.Tensor
    experts: tf.Tensor


class ParallelExperts:
    """A `LatentExpertTransformer` that decodes each row with its own expert, for any decoder.

    It is a `tfscones.models.stepping.StepModel`, so the decoders of `tfscones.decoding`, exact
    search included, run it unchanged. Its rows are sources tiled K times: row `b * K + k` of
    `tile_sources(source_ids)` is sentence b decoded by expert k, whose embedding replaces the
    BOS token a decoder feeds at index 0. Every decoder derives its row count and length limits
    from the source ids it is given, so the tiling happens before the decoder is called:

    ```python
    experts = ParallelExperts(model)
    output = greedy_decode(experts, experts.tile_sources(source_ids))
    ids = tf.reshape(output.ids, [batch, model.num_experts, -1])  # [b, k]: expert k's output
    ```

    Beam search gives one beam per expert and sentence the same way; `decode_experts` does the
    tiling and reshaping for any `Search`. Rows are encoded separately, so each source is
    encoded K times (one batched call); the decoder's work is K times a single model's anyway.
    Each row carries its expert with its encoder outputs, so rows do not share sources; every
    other capability is the model stepper's.

    Args:
        model: The `LatentExpertTransformer`.
        model_stepper: The model's stepper to step with (default: `model.stepper()`; an
            export passes its frozen one).
    """

    def __init__(
        self, model: LatentExpertTransformer, model_stepper: ExpertTransformerStepper | None = None
    ):
        self.model = model
        self.model_stepper = model.stepper() if model_stepper is None else model_stepper
        self.capabilities = dataclasses.replace(
            self.model_stepper.capabilities, shares_sources=False
        )
        self.num_experts = model.num_experts
        self.head: OutputHead = model.head
        self.max_sequence_length = model.max_sequence_length

    def stepper(self, frozen_weights: bool = False) -> ParallelExperts:
        """Itself; or, for `frozen_weights` where its own are not, a frozen copy of it."""
        frozen = self.model_stepper.stepper(frozen_weights=frozen_weights)
        return self if frozen is self.model_stepper else ParallelExperts(self.model, frozen)

    def tile_sources(self, source_ids) -> tf.Tensor:
        """Repeats every source K times: row `b * K + k` is source b for expert k.

        Args:
            source_ids: int `[batch, source_length]`.

        Returns:
            int32 `[batch * num_experts, source_length]`.
        """
        return tf.repeat(tf.convert_to_tensor(source_ids, tf.int32), self.num_experts, axis=0)

    def encode(self, source_ids, training=None) -> tuple[ExpertStates, tf.Tensor]:
        """The model's `encode` of tiled sources, with row r's expert, `r mod K`.

        Args:
            source_ids: int `[rows, source_length]` from `tile_sources`.
            training: Whether dropout is active.

        Returns:
            `(ExpertStates, source_padding_mask)`.
        """
        states, padding_mask = self.model.encode(source_ids, training=training)
        rows = tf.shape(states)[0]
        experts = tf.math.floormod(tf.range(rows, dtype=tf.int32), self.num_experts)
        return ExpertStates(states=states, experts=experts), padding_mask

    def cross_attention_cache(self, encoder_outputs: ExpertStates) -> tf.Tensor:
        """The model stepper's `cross_attention_cache` of the rows' states."""
        return self.model_stepper.cross_attention_cache(encoder_outputs.states)

    def step_weights(self):
        """The model stepper's `step_weights`."""
        return self.model_stepper.step_weights()

    def initial_cache(self, batch_size, max_length: int | None = None):
        """The model stepper's `initial_cache`."""
        return self.model_stepper.initial_cache(batch_size, max_length)

    def growing_cache(self, batch_size):
        """The model stepper's `growing_cache`."""
        return self.model_stepper.growing_cache(batch_size)

    def prefix_cache(self, entries, slots):
        """The model stepper's `prefix_cache`."""
        return self.model_stepper.prefix_cache(entries, slots)

    def prefix_entries(self, own_position) -> tf.Tensor:
        """The model stepper's `prefix_entries`."""
        return self.model_stepper.prefix_entries(own_position)

    def decode_step(
        self,
        token_ids,
        encoder_outputs: ExpertStates,
        source_padding_mask,
        cache,
        index,
        cross_attention_cache=None,
        step_weights=None,
        rows_per_source=1,
    ) -> tuple[tf.Tensor, Any]:
        """The model stepper's `decode_step`, each row's expert in place of the token at index 0.

        Args:
            token_ids: int `[rows]`, the tokens at position `index` (the decoder's BOS at 0).
            encoder_outputs: `ExpertStates` from `encode`, tiled or reordered like the rows.
            source_padding_mask: bool `[rows, source_length]`.
            cache: The self-attention cache.
            index: int scalar, the position of `token_ids`, or int32 `[rows]`, one per row.
            cross_attention_cache: From `cross_attention_cache`; computed if None.
            step_weights: From `step_weights`; computed if None.
            rows_per_source: 1 (rows do not share sources).

        Returns:
            `(logits, cache)`, as `TransformerStepper.decode_step`.
        """
        token_ids = tf.reshape(tf.convert_to_tensor(token_ids, tf.int32), [-1])
        expert_ids = self.model.expert_token_id(encoder_outputs.experts)
        token_ids = tf.where(tf.equal(index, 0), expert_ids, token_ids)
        return self.model_stepper.decode_step(
            token_ids,
            encoder_outputs.states,
            source_padding_mask,
            cache,
            index,
            cross_attention_cache=cross_attention_cache,
            step_weights=step_weights,
            rows_per_source=rows_per_source,
        )


def decode_experts(
    model: LatentExpertTransformer | ParallelExperts,
    source_ids,
    search: Search | None = None,
    jit_compile: bool = False,
    **search_settings,
) -> NBest:
    """Decodes every sentence with each of the K experts in one batched search (Shen et al., §3.2).

    The paper's decoding is greedy search per expert (the default); any `Search` works the same
    way (beam search per expert, sampling per expert). Hypotheses come grouped by expert, not
    sorted by score: hypothesis `k * n + i` of a sentence is the i-th of expert k's n
    (`n = search.hypotheses(...)`; 1 for greedy).

    Example:
    ```python
    output = decode_experts(model, source_ids)  # greedy: ids [batch, K, max_length]
    beams = decode_experts(model, source_ids, Search("beam", beam_size=4, num_hypotheses=2))
    beams.ids  # [batch, 2 * K, max_length]: expert 0's two best, then expert 1's, ...
    ```

    Args:
        model: The `LatentExpertTransformer`, or its `ParallelExperts` (an export passes one
            whose step weights are frozen).
        source_ids: int `[batch, source_length]`, each row ending with EOS, padded with 0.
        search: The strategy; greedy search by default.
        jit_compile: True when the caller compiles this with XLA (see `greedy_decode`).
        **search_settings: The arguments of a new `Search` (`method`, `limits`, its
            settings), when `search` is not given.

    Returns:
        `NBest` with `num_experts * search.hypotheses(experts)` hypotheses per sentence.

    Raises:
        ValueError: If both `search` and `search_settings` are given.
    """
    if search is None:
        search = Search(**search_settings)
    elif search_settings:
        raise ValueError("give either a Search or its settings, not both.")
    experts = model if isinstance(model, ParallelExperts) else ParallelExperts(model)
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    output = search.decode(experts, experts.tile_sources(source_ids), jit_compile=jit_compile)
    count = experts.num_experts * search.hypotheses(experts)
    batch_size = tf.shape(source_ids)[0]
    return NBest(
        ids=tf.reshape(output.ids, [batch_size, count, tf.shape(output.ids)[-1]]),
        lengths=tf.reshape(output.lengths, [batch_size, count]),
        scores=tf.reshape(output.scores, [batch_size, count]),
        log_scores=tf.reshape(output.log_scores, [batch_size, count]),
        token_log_scores=tf.reshape(
            output.token_log_scores, [batch_size, count, tf.shape(output.ids)[-1]]
        ),
    )


@dataclasses.dataclass(frozen=True)
class ExpertSettings:
    """The `experts` search has no settings: every expert decodes greedily (Shen et al., §3.2)."""


def _latent_experts(settings: ExpertSettings, stepper: Any) -> int:
    """K, one greedy hypothesis per expert.

    Raises:
        ValueError: If the model has no latent experts.
    """
    experts = stepper.capabilities.latent_experts
    if not experts:
        raise ValueError(
            "the experts search needs a model with latent experts (a LatentExpertTransformer, "
            "trained with `model.num_experts` > 0); this model has none: use greedy search."
        )
    return experts


def _experts_nbest(stepper, source_ids, settings: ExpertSettings, limits, jit_compile) -> NBest:
    if not isinstance(stepper, ParallelExperts):
        stepper = ParallelExperts(stepper.model, stepper)
    return decode_experts(stepper, source_ids, Search(limits=limits), jit_compile=jit_compile)


EXPERTS = register(
    Decoder(
        "experts",
        "every latent expert's greedy translation, in expert order (hard mixtures only)",
        ExpertSettings,
        _experts_nbest,
        hypotheses=_latent_experts,
        rows_per_sentence=_latent_experts,
    )
)


__all__ = ["ExpertStates", "ParallelExperts", "decode_experts"]
