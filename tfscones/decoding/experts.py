"""Expert decoding: every expert of a `LatentExpertTransformer` through the unchanged decoders.

Shen et al. (2019), "Mixture Models for Diverse Machine Translation: Tricks of the Trade", decode
with each of the K experts of a hard mixture greedily and in parallel (§3.2, last paragraph): K
diverse translations per sentence. `ParallelExperts` adapts the model to the decoders' interface
(`tfscones.decoding.step.StepModel`): each source is tiled K times and row `b * K + k` is decoded
by expert k, whose embedding replaces the BOS token at index 0. `decode_experts` runs any `Search`
that way and returns the K experts' hypotheses of every sentence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import tensorflow as tf

from tfscones.decoding.search import NBest, Search

if TYPE_CHECKING:
    from tfscones.heads import OutputHead
    from tfscones.models.latent_experts import LatentExpertTransformer


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

    It is a `tfscones.decoding.step.StepModel` (`encode`, `cross_attention_cache`,
    `initial_cache`, `decode_step`, `head`, `max_sequence_length`), so the decoders of
    `tfscones.decoding`, exact search included, run it unchanged. Its rows are sources tiled K
    times: row `b * K + k` of
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

    Args:
        model: The `LatentExpertTransformer`.
    """

    def __init__(self, model: LatentExpertTransformer):
        self.model = model

    @property
    def num_experts(self) -> int:
        return self.model.num_experts

    @property
    def head(self) -> OutputHead:
        return self.model.head

    @property
    def max_sequence_length(self) -> int:
        return self.model.max_sequence_length

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
        """The model's `cross_attention_cache` of the rows' states."""
        return self.model.cross_attention_cache(encoder_outputs.states)

    def initial_cache(self, batch_size, max_length: int | None = None) -> tf.Tensor:
        """The model's `initial_cache`."""
        return self.model.initial_cache(batch_size, max_length)

    def growing_cache(self, batch_size):
        """The model's `growing_cache`."""
        return self.model.growing_cache(batch_size)

    def step_weights(self):
        """The model's `step_weights`."""
        return self.model.step_weights()

    def decode_step(
        self,
        token_ids,
        encoder_outputs: ExpertStates,
        source_padding_mask,
        cache,
        index,
        cross_attention_cache=None,
        step_weights=None,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """The model's `decode_step`, with each row's expert in place of the token at index 0.

        Args:
            token_ids: int `[rows]`, the tokens at position `index` (the decoder's BOS at 0).
            encoder_outputs: `ExpertStates` from `encode`, tiled or reordered like the rows.
            source_padding_mask: bool `[rows, source_length]`.
            cache: The self-attention cache.
            index: int scalar, the position of `token_ids`, or int32 `[rows]`, one per row.
            cross_attention_cache: Optional, from `cross_attention_cache`.
            step_weights: Optional, from `step_weights`.

        Returns:
            `(logits, cache)`, as `Seq2SeqTransformer.decode_step`.
        """
        token_ids = tf.reshape(tf.convert_to_tensor(token_ids, tf.int32), [-1])
        expert_ids = self.model.expert_token_id(encoder_outputs.experts)
        token_ids = tf.where(tf.equal(index, 0), expert_ids, token_ids)
        return self.model.decode_step(
            token_ids,
            encoder_outputs.states,
            source_padding_mask,
            cache,
            index,
            cross_attention_cache=cross_attention_cache,
            step_weights=step_weights,
        )


def decode_experts(
    model: LatentExpertTransformer,
    source_ids,
    search: Search | None = None,
    jit_compile: bool = False,
    **search_settings,
) -> NBest:
    """Decodes every sentence with each of the K experts in one batched search (Shen et al., §3.2).

    The paper's decoding is greedy search per expert (the default); any `Search` works the same
    way (beam search per expert, sampling per expert). Hypotheses come grouped by expert, not
    sorted by score: hypothesis `k * n + i` of a sentence is the i-th of expert k's n
    (`n = search.output_count`; 1 for greedy).

    Example:
    ```python
    output = decode_experts(model, source_ids)  # greedy: ids [batch, K, max_length]
    beams = decode_experts(model, source_ids, Search("beam", beam_size=4, num_hypotheses=2))
    beams.ids  # [batch, 2 * K, max_length]: expert 0's two best, then expert 1's, ...
    ```

    Args:
        model: The `LatentExpertTransformer`.
        source_ids: int `[batch, source_length]`, each row ending with EOS, padded with 0.
        search: The strategy; greedy search by default.
        jit_compile: True when the caller compiles this with XLA (see `greedy_decode`).
        **search_settings: Fields of a new `Search` (`method`, `max_length`, ...), when `search`
            is not given.

    Returns:
        `NBest` with `num_experts * search.output_count` hypotheses per sentence.

    Raises:
        ValueError: If both `search` and `search_settings` are given.
    """
    if search is None:
        search = Search(**search_settings)
    elif search_settings:
        raise ValueError("give either a Search or its settings, not both.")
    experts = ParallelExperts(model)
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    output = search.decode(experts, experts.tile_sources(source_ids), jit_compile=jit_compile)
    count = model.num_experts * search.output_count
    batch_size = tf.shape(source_ids)[0]
    return NBest(
        ids=tf.reshape(output.ids, [batch_size, count, tf.shape(output.ids)[-1]]),
        lengths=tf.reshape(output.lengths, [batch_size, count]),
        scores=tf.reshape(output.scores, [batch_size, count]),
    )


__all__ = ["ExpertStates", "ParallelExperts", "decode_experts"]
