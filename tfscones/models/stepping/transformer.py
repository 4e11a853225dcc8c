"""The steppers of `Seq2SeqTransformer` and `LatentExpertTransformer`: incremental decoding.

`Seq2SeqTransformer.stepper()` returns a `TransformerStepper`, the `StepModel` every decoder
steps: it reads the model's weights and runs one position of its decoder per step
(`layer_step`), on any of the caches of `caches`. `LatentExpertTransformer.stepper()` returns an
`ExpertTransformerStepper`, which starts from expert 0 where a decoder feeds BOS.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import TYPE_CHECKING, Any, NamedTuple

import keras
import numpy as np
import tensorflow as tf

from tfscones.data.vocab_ids import BOS_ID
from tfscones.models.stepping.caches import GrowingCache, PrefixCache, SlotCache
from tfscones.models.stepping.contract import SourceGroups, StepCapabilities, undeclared
from tfscones.models.stepping.keras_hub_parts import decoder_layer_parts
from tfscones.models.stepping.layer_step import (
    cross_keys_and_values,
    decoder_layer_step,
    layer_norm,
    layer_weights,
    norm_weights,
)

if TYPE_CHECKING:
    from tfscones.heads import OutputHead

EVERY_CAPABILITY = StepCapabilities(shares_sources=True, grows_cache=True, caches_prefixes=True)


class StepWeights(NamedTuple):
    """What `decode_step` uses that is worth computing once per search, before the loop.

    Only the output projection's kernel is here: for tied embeddings it is the transpose of the
    table (a copy of the whole table, which a step would otherwise make every time). Every
    other weight is read inside the step: in a lowered `tf.while_loop` a captured tensor costs
    three ops per iteration (Merge, Switch, NextIteration), more than reading a variable, whose
    handle enters the loop as a constant.

    Attributes:
        output_kernel: `[hidden, vocabulary]` in the output projection's compute dtype.
    """

    output_kernel: tf.Tensor


@functools.lru_cache(maxsize=16)
def _sinusoid_timescales(hidden_dim: int, max_wavelength: float, dtype: str):
    """keras-hub `SinePositionEncoding`'s per-feature timescales and which features take a sine.

    `min_frequency ** (2 * (feature // 2) / hidden_dim)` in `dtype`, computed by TensorFlow's
    own `pow` kernel (eagerly, once per model shape: NumPy's power differs in the last bit), so
    that a decoding step multiplies by the same constants it used to recompute at every step.

    Returns:
        `(timescales [hidden_dim], even [hidden_dim] bool)`, NumPy arrays.
    """
    with tf.init_scope():
        features = tf.range(hidden_dim)
        min_frequency = tf.cast(1 / max_wavelength, dtype)
        exponents = tf.cast(2 * (features // 2), dtype) / tf.cast(hidden_dim, dtype)
        timescales = tf.pow(min_frequency, exponents).numpy()
    return timescales, np.arange(hidden_dim) % 2 == 0


class TransformerStepper(tf.Module):
    """The `StepModel` of a `Seq2SeqTransformer`: its decoder, one position per step.

    Feeding `target_in_ids[:, t]` for `t = 0, 1, ...` (BOS first) to `decode_step` reproduces
    `model(inputs, training=False)[:, t]`. Only the new position is computed: the keys and
    values of earlier ones come from the cache, a `SlotCache` (`initial_cache`), a
    `GrowingCache` (`growing_cache`) or a `PrefixCache` (`prefix_cache`).

    Args:
        model: The `Seq2SeqTransformer`.
        frozen_weights: Whether `step_weights()` are made once, now, into variables, and kept
            (for an export: no request repeats the work; with tied embeddings, a non-trainable
            variable holds the transposed table, 8 MB more for the small preset's 8,000 x 256
            table and a 1.4 ms transpose less per request). The variables are copies: they do
            not follow later training of the model.
        capabilities: What it declares (every capability by default; fewer to make decoders
            take their general paths, as the tests do).
    """

    def __init__(
        self,
        model: keras.Model,
        frozen_weights: bool = False,
        capabilities: StepCapabilities = EVERY_CAPABILITY,
    ):
        super().__init__(name="transformer_stepper")
        self.model = model
        self._capabilities = capabilities
        self.frozen_step_weights = None
        if frozen_weights:
            self.frozen_step_weights = self._frozen_step_weights()

    @property
    def head(self) -> OutputHead:
        return self.model.head

    @property
    def max_sequence_length(self) -> int:
        return self.model.max_sequence_length

    @property
    def capabilities(self) -> StepCapabilities:
        return self._capabilities

    def stepper(self, frozen_weights: bool = False) -> TransformerStepper:
        """Itself; or, for `frozen_weights` where its own are not, a frozen copy of it."""
        if not frozen_weights or self.frozen_step_weights is not None:
            return self
        return type(self)(self.model, frozen_weights=True, capabilities=self.capabilities)

    def encode(self, source_ids) -> tuple[tf.Tensor, tf.Tensor]:
        """The model's `encode` in inference mode."""
        return self.model.encode(source_ids)

    def cross_attention_cache(self, encoder_outputs) -> tuple[tuple[tf.Tensor, tf.Tensor], ...]:
        """Keys and values of the decoder's attention over the encoder, computed once per batch.

        Passing them to every step saves two `[source_length, hidden] x [hidden, hidden]`
        products per layer and step.

        Args:
            encoder_outputs: `[rows, source_length, hidden_dim]` from `encode`.

        Returns:
            One `(keys, values)` pair per decoder layer, each
            `[rows, num_heads, source_length, head_dim]` in the compute dtype.
        """
        encoder_outputs = tf.convert_to_tensor(encoder_outputs)
        return tuple(
            cross_keys_and_values(decoder_layer_parts(layer), encoder_outputs)
            for layer in self.model.decoder_layers
        )

    def step_weights(self) -> StepWeights:
        """The output projection's scaled kernel (`scaled_kernel`); made once per search."""
        if self.frozen_step_weights is not None:
            return self.frozen_step_weights
        projection = self.model.output_projection
        embeddings = self.model.token_embedding.embeddings if projection.tied else None
        return StepWeights(output_kernel=projection.scaled_kernel(embeddings))

    def _frozen_step_weights(self) -> StepWeights:
        """`step_weights()` in a variable; an untied, unscaled compute-dtype kernel as it is."""
        projection = self.model.output_projection
        if (
            not projection.tied
            and projection.kernel_scale == 1.0
            and projection.kernel.dtype == projection.compute_dtype
        ):
            return StepWeights(output_kernel=projection.kernel)
        kernel = self.step_weights().output_kernel
        return StepWeights(tf.Variable(kernel, trainable=False, name="frozen_output_kernel"))

    def _cache_shape(self) -> dict[str, Any]:
        model = self.model
        return dict(
            layers=model.num_decoder_layers,
            heads=model.num_heads,
            head_dim=model.head_dim,
            dtype=model.compute_dtype,
        )

    def initial_cache(self, batch_size, max_length: int | None = None) -> SlotCache:
        """An empty `SlotCache` of `max_length` positions (default: `max_sequence_length`)."""
        width = self.max_sequence_length if max_length is None else max_length
        return SlotCache.empty(batch_size, width=width, **self._cache_shape())

    def growing_cache(self, batch_size) -> GrowingCache:
        """An empty `GrowingCache`."""
        if not self.capabilities.grows_cache:
            raise undeclared(self, "grows_cache")
        return GrowingCache.empty(batch_size, **self._cache_shape())

    def prefix_cache(self, entries, slots) -> PrefixCache:
        """The `PrefixCache` of rows whose positions are the `entries` at `slots`."""
        if not self.capabilities.caches_prefixes:
            raise undeclared(self, "caches_prefixes")
        return PrefixCache.gathered(entries, slots)

    def prefix_entries(self, own_position: PrefixCache) -> tf.Tensor:
        """The entries of the position a step on a `PrefixCache` returned."""
        if not self.capabilities.caches_prefixes:
            raise undeclared(self, "caches_prefixes")
        return own_position.entries()

    def decode_step(
        self,
        token_ids,
        encoder_outputs,
        source_padding_mask,
        cache: SlotCache | GrowingCache | PrefixCache,
        index,
        cross_attention_cache=None,
        step_weights: StepWeights | None = None,
        rows_per_source: int | SourceGroups = 1,
    ) -> tuple[tf.Tensor, SlotCache | GrowingCache | PrefixCache]:
        """Logits of the next token after the target token at position `index`, and the cache.

        Args:
            token_ids: int `[rows]` (or `[rows, 1]`), the target token at position `index`.
            encoder_outputs: `[sources, source_length, hidden_dim]` from `encode`.
            source_padding_mask: bool `[sources, source_length]` from `encode`.
            cache: The self-attention cache holding positions `0..index-1`.
            index: int scalar (Python or tensor), the position of `token_ids`; or, with a
                `SlotCache` or a `PrefixCache`, int32 `[rows]`, each row's own position.
            cross_attention_cache: `cross_attention_cache(encoder_outputs)`; computed here if
                None.
            step_weights: `step_weights()`; computed here if None.
            rows_per_source: A static int (row `r` decodes source row `r // rows_per_source`,
                so each sentence's cross-attention is read once for all its beams) or a
                `SourceGroups` (rows in any number per source); sources = rows otherwise.

        Returns:
            `(logits, cache)`: float32 logits `[rows, vocabulary_size]` and the cache, of the
            kind given, with position `index` written (a `PrefixCache`: that position alone).
        """
        model = self.model
        token_ids = tf.reshape(tf.convert_to_tensor(token_ids, tf.int32), [-1])
        index = tf.convert_to_tensor(index, tf.int32)
        token_ids = self._step_tokens(token_ids, index)
        if cross_attention_cache is None:
            cross_attention_cache = self.cross_attention_cache(encoder_outputs)
        if step_weights is None:
            step_weights = self.step_weights()
        slots = cache.step_slots(index, tf.shape(token_ids)[0])
        source_visible = tf.convert_to_tensor(source_padding_mask)[:, tf.newaxis, tf.newaxis, :]
        dtype = model.compute_dtype
        with tf.name_scope("step_embedding"):
            x = self._step_embedding(token_ids, index)
        keys_and_values = []
        for i, layer in enumerate(model.decoder_layers):
            parts = decoder_layer_parts(layer)
            keys, values = cache.layer(i)
            with tf.name_scope(f"decoder_step_{i}"):
                step = decoder_layer_step(
                    parts,
                    x,
                    keys,
                    values,
                    *cross_attention_cache[i],
                    source_visible,
                    slots,
                    layer_weights(parts, dtype),
                    rows_per_source,
                )
            x = step.outputs
            keys_and_values.append((step.keys, step.values))
        if model.normalize_first:
            x = layer_norm(norm_weights(model.decoder_final_norm, dtype), x)
        return self._step_logits(x, step_weights), cache.written(tuple(keys_and_values))

    def _step_tokens(self, token_ids: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
        """The ids the embedding reads for `token_ids` at `index`: the same ids."""
        del index
        return token_ids

    def _step_logits(self, x, step_weights: StepWeights) -> tf.Tensor:
        """The model's logits of `[rows, hidden]` with the prepared kernel (the same arithmetic)."""
        projection = self.model.output_projection
        dtype = projection.compute_dtype
        with tf.name_scope("output_projection"):
            return tf.matmul(tf.cast(x, dtype), step_weights.output_kernel) + tf.cast(
                projection.bias, dtype
            )

    def _step_embedding(self, token_ids, index):
        """The model's target embedding of one token per row, at `index` (scalar or `[rows]`).

        The sinusoids are keras-hub's `SinePositionEncoding` (sine at even, cosine at odd
        features) computed for the given positions only; their per-feature timescales are
        constants of the graph (`_sinusoid_timescales`), not recomputed at every step.
        """
        model = self.model
        embedding = model.target_token_embedding
        scale = tf.cast(math.sqrt(model.hidden_dim), embedding.compute_dtype)
        if type(embedding) is keras.layers.Embedding and embedding.quantization_mode is None:
            # The layer's lookup, without its handling of negative ids (a decoder feeds none).
            table = tf.convert_to_tensor(embedding.embeddings)
            tokens = tf.cast(tf.gather(table, token_ids), embedding.compute_dtype) * scale
        else:
            tokens = embedding(token_ids) * scale
        dtype = model.position_encoding.compute_dtype
        positions = tf.cast(tf.reshape(index, [-1, 1]), dtype)
        timescales, even = _sinusoid_timescales(
            model.hidden_dim, model.position_encoding.max_wavelength, dtype
        )
        angles = positions * tf.constant(timescales)
        sines = tf.where(tf.constant(even), tf.sin(angles), tf.cos(angles))
        return tokens + tf.cast(sines, tokens.dtype)


class ExpertTransformerStepper(TransformerStepper):
    """The stepper of a `LatentExpertTransformer`: the token at index 0 may be an expert.

    At index 0, `model.expert_token_id(z)` selects expert z and BOS selects expert 0, as in the
    model's `call`. The test is a `tf.where` on `index == 0`, so the step stays free of Python
    branches on tensors (XLA compiles it once for every index).

    Args:
        model: The `LatentExpertTransformer`.
        frozen_weights: As `TransformerStepper`.
        capabilities: As `TransformerStepper`; `latent_experts` is always the model's K.
    """

    @property
    def capabilities(self) -> StepCapabilities:
        return dataclasses.replace(self._capabilities, latent_experts=self.model.num_experts)

    def _step_tokens(self, token_ids: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
        """BOS at index 0 becomes expert 0's token; every other id is itself."""
        at_start = tf.logical_and(tf.equal(index, 0), tf.equal(token_ids, BOS_ID))
        return tf.where(at_start, self.model.expert_token_id(0), token_ids)


__all__ = ["EVERY_CAPABILITY", "ExpertTransformerStepper", "StepWeights", "TransformerStepper"]
