"""An encoder-decoder Transformer whose output layer is an `OutputHead`: softmax, SCONES, entmax."""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import keras
import keras_hub
import numpy as np
import tensorflow as tf
from keras import ops

from tfscones import heads
from tfscones.data.id_checks import checked_examples
from tfscones.data.preprocessing import padding_mask
from tfscones.models.decoder_step import (
    PrefixSlots,
    SelfAttentionSlots,
    SourceGroups,
    cross_keys_and_values,
    decoder_layer_step,
    layer_norm,
    layer_weights,
    norm_weights,
)
from tfscones.models.output_projection import OutputProjection
from tfscones.models.presets import PRESETS


class GrowingCache(NamedTuple):
    """A self-attention cache that holds exactly the positions decoded so far.

    `Seq2SeqTransformer.growing_cache` makes an empty one and each `decode_step` returns it
    one position longer. Its tensors have the rows first, so beam search reorders it with
    `tf.gather` (`tf.nest.map_structure`). Each layer's keys and values are separate tensors, so
    a step only appends its position to each (one concatenation per tensor) instead of slicing
    and re-stacking one tensor of every layer, which copied the whole cache at every step.

    Attributes:
        layers: One `(keys, values)` pair per decoder layer, each
            `[rows, num_heads, positions, head_dim]`, at every position decoded so far.
    """

    layers: tuple[tuple[tf.Tensor, tf.Tensor], ...]


class PrefixCache(NamedTuple):
    """Each row's own prefix of self-attention keys and values, for rows at different positions.

    Exact search steps prefixes of different lengths together, each from its parent's cached
    positions: row `r` holds its positions `0..index[r]-1` in its first slots, and the slots
    after them are never read. A `decode_step` on it attends to them and to its own position
    and returns a `PrefixCache` of that position alone, `[rows, 1, num_heads, head_dim]` per
    tensor, rather than a copy of the prefixes with it written in: the caller keeps positions
    itself (exact search's pool). Positions come before heads, as exact search gathers them
    from its pool of entries, so that no step transposes them.
    `Seq2SeqTransformer.prefix_cache` makes one from cache entries, and `prefix_entries` turns
    a step's position back into entries.

    Attributes:
        layers: One `(keys, values)` pair per decoder layer, each
            `[rows, slots, num_heads, head_dim]`.
    """

    layers: tuple[tuple[tf.Tensor, tf.Tensor], ...]


class StepWeights(NamedTuple):
    """What `decode_step` uses that is worth computing once per search, before the loop.

    `Seq2SeqTransformer.step_weights()` makes it; a search passes it to every `decode_step`.
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


@keras.saving.register_keras_serializable(package="tfscones")
class _TransformerDecoder(keras_hub.layers.TransformerDecoder):
    """keras-hub's `TransformerDecoder`, whose output shape also accepts the encoder's shape.

    keras-hub 0.32's `compute_output_shape` takes only `decoder_sequence_shape`, but a layer
    built with cross-attention records both shapes, and `Model.summary()` of a subclassed model
    passes both back: without this override, `summary()` raises a TypeError.
    """

    def compute_output_shape(self, decoder_sequence_shape, encoder_sequence_shape=None):
        del encoder_sequence_shape
        return decoder_sequence_shape


@keras.saving.register_keras_serializable(package="tfscones")
class Seq2SeqTransformer(keras.Model):
    """Encoder-decoder Transformer (Vaswani et al. 2017) with a pluggable output head.

    Token embeddings are scaled by sqrt(hidden_dim) and summed with `SinePositionEncoding`, as in
    the original Transformer, rather than with learned positions (`TokenAndPositionEmbedding`):
    sinusoids add no parameters (the architecture is exactly the Transformer of the papers),
    they exist for any position (neither the encoder nor a decoding cache is bounded by a
    position table), and one plain token embedding can serve source, target and output when
    tied, which `TokenAndPositionEmbedding`'s built-in token table would not allow. The encoder
    and decoder are stacks of `keras_hub.layers.TransformerEncoder` and `TransformerDecoder`
    (ReLU MLP, post-norm by default). Pads (id 0) are masked in the encoder's self-attention and
    in the decoder's attention over the encoder; the decoder's self-attention is causal, so target
    pads, which only follow real tokens, never reach a real position.

    The logits are float32 under any dtype policy (the output projection's dtype is float32), and
    `head` says what they mean: `model.head.loss()` trains the model, `model.head.log_scores`
    scores its steps in search. The output bias starts at `head.output_bias_initializer` (-log|V|
    for the SCONES sigmoid head).

    Decoding calls `encode` once, then `decode_step` for each position with a key/value cache
    (and, optionally, the encoder's keys and values from `cross_attention_cache`). The cache of
    `initial_cache` has one slot per allowed position, so shapes do not change between steps and
    decoding runs under XLA; the cache of `growing_cache` holds exactly the positions decoded so
    far, so a step's work grows with the output instead (the decoders' choice outside XLA).
    `decode_step` computes one position with a few plain ops per layer
    (`tfscones.models.decoder_step`), not through the layers' `call`.

    Args:
        vocabulary_size: Size of the (joint) vocabulary.
        num_encoder_layers: Number of `TransformerEncoder` layers.
        num_decoder_layers: Number of `TransformerDecoder` layers.
        hidden_dim: Size of embeddings and hidden states.
        num_heads: Number of attention heads; must divide `hidden_dim`.
        intermediate_dim: Size of the MLP's hidden layer.
        dropout: Dropout rate of embeddings, attention weights, attention outputs and MLP outputs.
        max_sequence_length: Longest target the model is meant to produce: the default length
            of a decoding cache (`initial_cache`).
        head: The output head, or anything `tfscones.heads.get` accepts.
        tie_embeddings: Whether the source embedding, the target embedding and the output
            projection (transposed, plus its own bias) share one matrix.
        layer_norm_epsilon: Epsilon of every layer normalization.
        normalize_first: Pre-norm (True: normalize each block's input, plus one final layer
            normalization after each stack) or post-norm (False, as in Vaswani et al. 2017).
        **kwargs: Arguments of `keras.Model` (`name`, `dtype`, ...).

    Example:
    >>> model = Seq2SeqTransformer.from_preset("tiny", vocabulary_size=100, head="sigmoid")
    >>> logits = model({"source_ids": tf.constant([[5, 6, 1, 0]]),
    ...                 "target_in_ids": tf.constant([[3, 7, 8]])})
    >>> logits.shape, logits.dtype.name
    (TensorShape([1, 3, 100]), 'float32')
    """

    def __init__(
        self,
        vocabulary_size: int,
        num_encoder_layers: int,
        num_decoder_layers: int,
        hidden_dim: int,
        num_heads: int,
        intermediate_dim: int,
        dropout: float = 0.1,
        max_sequence_length: int = 256,
        head: str | dict | heads.OutputHead = "softmax",
        tie_embeddings: bool = False,
        layer_norm_epsilon: float = 1e-5,
        normalize_first: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_dim % num_heads:
            raise ValueError(
                f"hidden_dim ({hidden_dim}) must be a multiple of num_heads ({num_heads})."
            )
        self.vocabulary_size = int(vocabulary_size)
        self.num_encoder_layers = int(num_encoder_layers)
        self.num_decoder_layers = int(num_decoder_layers)
        self.hidden_dim = int(hidden_dim)
        self.num_heads = int(num_heads)
        self.intermediate_dim = int(intermediate_dim)
        self.dropout = float(dropout)
        self.max_sequence_length = int(max_sequence_length)
        self.head = heads.get(head)
        self.tie_embeddings = bool(tie_embeddings)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.normalize_first = bool(normalize_first)

        sequence_shape = (None, None, self.hidden_dim)
        if self.tie_embeddings:
            self.token_embedding = self._token_embedding("token_embedding")
        else:
            self.source_embedding = self._token_embedding("source_embedding")
            self.target_embedding = self._token_embedding("target_embedding")
        self.position_encoding = keras_hub.layers.SinePositionEncoding(
            dtype="float32", name="position_encoding"
        )
        self.embedding_dropout = keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy, name="embedding_dropout"
        )
        self.encoder_layers = []
        for i in range(self.num_encoder_layers):
            layer = keras_hub.layers.TransformerEncoder(
                **self._transformer_layer_arguments(), name=f"encoder_layer_{i}"
            )
            layer.build(sequence_shape)
            self.encoder_layers.append(layer)
        self.decoder_layers = []
        for i in range(self.num_decoder_layers):
            layer = _TransformerDecoder(
                **self._transformer_layer_arguments(), name=f"decoder_layer_{i}"
            )
            layer.build(sequence_shape, sequence_shape)
            self.decoder_layers.append(layer)
        if self.normalize_first:
            self.encoder_final_norm = self._layer_norm("encoder_final_norm")
            self.decoder_final_norm = self._layer_norm("decoder_final_norm")
        self.output_projection = OutputProjection(
            self.vocabulary_size,
            tied=self.tie_embeddings,
            bias_initializer=self.head.output_bias_initializer(self.vocabulary_size),
            name="output_projection",
        )
        self.output_projection.build(sequence_shape)
        self.built = True

    def _token_embedding(self, name: str) -> keras.layers.Embedding:
        embedding = keras.layers.Embedding(
            self.vocabulary_size,
            self.hidden_dim,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=self.hidden_dim**-0.5),
            dtype=self.dtype_policy,
            name=name,
        )
        embedding.build((None, None))
        return embedding

    def _layer_norm(self, name: str) -> keras.layers.LayerNormalization:
        layer = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        layer.build((None, None, self.hidden_dim))
        return layer

    def _transformer_layer_arguments(self) -> dict:
        return {
            "intermediate_dim": self.intermediate_dim,
            "num_heads": self.num_heads,
            "dropout": self.dropout,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "normalize_first": self.normalize_first,
            "dtype": self.dtype_policy,
        }

    @property
    def _source_embedding(self) -> keras.layers.Embedding:
        return self.token_embedding if self.tie_embeddings else self.source_embedding

    @property
    def _target_embedding(self) -> keras.layers.Embedding:
        return self.token_embedding if self.tie_embeddings else self.target_embedding

    @property
    def head_dim(self) -> int:
        """Size of one attention head's keys and values, `hidden_dim // num_heads`."""
        return self.hidden_dim // self.num_heads

    def _embed(self, embedding, token_ids, start_index=0, training=None):
        """Scaled token embeddings plus sinusoids of positions `start_index, ...`, with dropout.

        `start_index` is a scalar, or int `[batch]` for one token per row at its own position.
        """
        scale = ops.cast(math.sqrt(self.hidden_dim), embedding.compute_dtype)
        tokens = embedding(token_ids) * scale
        if len(ops.shape(start_index)) == 1:
            row_positions = ops.cast(ops.reshape(start_index, [-1, 1]), "float32")
            positions = self.position_encoding(tokens, positions=row_positions)
        else:
            positions = self.position_encoding(tokens, start_index=start_index)
        x = tokens + ops.cast(positions, tokens.dtype)
        return self.embedding_dropout(x, training=training)

    def _logits(self, hidden):
        if self.tie_embeddings:
            return self.output_projection(hidden, self.token_embedding.embeddings)
        return self.output_projection(hidden)

    def encode(self, source_ids, training=None) -> tuple[tf.Tensor, tf.Tensor]:
        """Runs the encoder once; its outputs serve every decoding step.

        Args:
            source_ids: int `[batch, source_length]`, padded with 0.
            training: Whether dropout is active.

        Returns:
            `(encoder_outputs, source_padding_mask)`: hidden states `[batch, source_length,
            hidden_dim]` in the compute dtype and a bool mask `[batch, source_length]`, True at
            real tokens.
        """
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        source_padding_mask = padding_mask(source_ids)
        x = self._embed(self._source_embedding, source_ids, training=training)
        for layer in self.encoder_layers:
            x = layer(x, padding_mask=source_padding_mask, training=training)
        if self.normalize_first:
            x = self.encoder_final_norm(x)
        return x, source_padding_mask

    def call(self, inputs, training=None):
        """Teacher-forced logits of every target position.

        Args:
            inputs: dict with int `source_ids` `[batch, source_length]` and `target_in_ids`
                `[batch, target_length]` (the target shifted right, starting with BOS), both
                padded with 0.
            training: Whether dropout is active.

        Returns:
            float32 logits `[batch, target_length, vocabulary_size]`.
        """
        encoder_outputs, source_padding_mask = self.encode(inputs["source_ids"], training=training)
        return self.decode(
            inputs["target_in_ids"], encoder_outputs, source_padding_mask, training=training
        )

    def decode(self, target_in_ids, encoder_outputs, source_padding_mask, training=None):
        """Teacher-forced logits of every target position over given encoder outputs.

        `call` is `encode` then `decode`; a caller that decodes several targets per source
        (the hard-EM step of `LatentExpertTransformer`) encodes once and decodes each.

        Args:
            target_in_ids: int `[batch, target_length]`, BOS first, padded with 0.
            encoder_outputs: `[batch, source_length, hidden_dim]` from `encode`.
            source_padding_mask: bool `[batch, source_length]` from `encode`.
            training: Whether dropout is active.

        Returns:
            float32 logits `[batch, target_length, vocabulary_size]`.
        """
        return self._logits(
            self._decoder_states(target_in_ids, encoder_outputs, source_padding_mask, training)
        )

    def _decoder_states(self, target_in_ids, encoder_outputs, source_padding_mask, training):
        """The decoder's final hidden states `[batch, target_length, hidden_dim]`."""
        target_ids = ops.convert_to_tensor(target_in_ids, "int32")
        x = self._embed(self._target_embedding, target_ids, training=training)
        for layer in self.decoder_layers:
            x = layer(
                x,
                encoder_outputs,
                encoder_padding_mask=source_padding_mask,
                training=training,
            )
        if self.normalize_first:
            x = self.decoder_final_norm(x)
        return x

    def initial_cache(
        self, batch_size: int | tf.Tensor, max_length: int | None = None
    ) -> tf.Tensor:
        """The empty self-attention cache of every decoder layer, one slot per position.

        Args:
            batch_size: Number of sequences decoded together (beams included).
            max_length: Number of target positions the cache holds; defaults to
                `max_sequence_length`. `decode_step` may be called for indices `0..max_length-1`.

        Returns:
            Zeros `[batch_size, num_decoder_layers, 2, num_heads, max_length, head_dim]` in the
            compute dtype (axis 2: keys, values), head-major so that attention is a batched
            matrix product.
        """
        max_length = self.max_sequence_length if max_length is None else max_length
        shape = [
            batch_size,
            self.num_decoder_layers,
            2,
            self.num_heads,
            max_length,
            self.head_dim,
        ]
        return ops.zeros(shape, dtype=self.compute_dtype)

    def growing_cache(self, batch_size: int | tf.Tensor) -> GrowingCache:
        """An empty self-attention cache that each `decode_step` extends by one position.

        A step on it attends to exactly the positions decoded so far, so its work grows with
        the output, not with the longest output allowed, and beam search reorders only those
        positions. Its length changes from step to step, so a `tf.while_loop` needs a shape
        invariant for it, and XLA cannot compile it: use `initial_cache` there.

        Args:
            batch_size: Number of sequences decoded together (beams included).

        Returns:
            A `GrowingCache` holding no position.
        """
        empty = ops.zeros([batch_size, self.num_heads, 0, self.head_dim], self.compute_dtype)
        return GrowingCache(tuple((empty, empty) for _ in range(self.num_decoder_layers)))

    def prefix_cache(self, entries: tf.Tensor | tf.Variable, slots: tf.Tensor) -> PrefixCache:
        """The `PrefixCache` of rows whose positions are the `entries` at `slots`.

        Each layer's keys and values are gathered on their own, so that every tensor of the
        cache comes out in the layout a step reads (`PrefixCache`), without a transpose.

        Args:
            entries: `[capacity, num_decoder_layers, 2, num_heads, head_dim]` (a tensor or a
                variable, as exact search's pool): each entry is one position of one row of an
                `initial_cache` (axis 2: keys, values).
            slots: int32 `[rows, positions]`: row `r`'s position `p` is entry `slots[r, p]`.

        Returns:
            A `PrefixCache`, each tensor `[rows, positions, num_heads, head_dim]`.
        """
        # Indices (slot, 0, 0) of every position, made once; a layer's keys or values are at
        # the offset (0, layer, part) from them.
        at_slots = tf.pad(
            tf.convert_to_tensor(slots, tf.int32)[..., tf.newaxis], [[0, 0]] * 2 + [[0, 2]]
        )

        def gathered(layer: int, part: int) -> tf.Tensor:
            return tf.gather_nd(entries, at_slots + tf.constant([0, layer, part]))

        return PrefixCache(
            tuple((gathered(i, 0), gathered(i, 1)) for i in range(self.num_decoder_layers))
        )

    @staticmethod
    def prefix_entries(own_position: PrefixCache) -> tf.Tensor:
        """The entries `[rows, layers, 2, heads, head_dim]` of a step's own position.

        Args:
            own_position: The `PrefixCache` a `decode_step` on a `PrefixCache` returns.
        """
        keys_and_values = [tensor for layer in own_position.layers for tensor in layer]
        _, _, heads, head_dim = keys_and_values[0].shape
        entries = tf.concat(keys_and_values, axis=1)
        return tf.reshape(entries, [-1, len(own_position.layers), 2, heads, head_dim])

    @staticmethod
    def source_groups(row_sources: tf.Tensor) -> SourceGroups:
        """The `rows_per_source` of rows that decode their sources in any number each.

        Args:
            row_sources: int32 `[rows]`, the source row (of the encoder's tensors that the
                step gets) each row decodes, in any order; every source has a row.

        Returns:
            A `SourceGroups`, for `decode_step(..., rows_per_source=...)`.
        """
        return SourceGroups.of(row_sources)

    def cross_attention_cache(self, encoder_outputs) -> tuple[tuple[tf.Tensor, tf.Tensor], ...]:
        """Keys and values of the decoder's attention over the encoder, computed once.

        Optional: `decode_step` computes them itself at every step when not given them. Passing
        this cache saves two `[source_length, hidden_dim] x [hidden_dim, hidden_dim]` products per
        layer and step; its tensors have a batch axis first, so beam search tiles and reorders
        them like the encoder outputs.

        Args:
            encoder_outputs: `[batch, source_length, hidden_dim]` from `encode`.

        Returns:
            One `(keys, values)` pair per decoder layer, each
            `[batch, num_heads, source_length, head_dim]` in the compute dtype.
        """
        encoder_outputs = ops.convert_to_tensor(encoder_outputs)
        return tuple(cross_keys_and_values(layer, encoder_outputs) for layer in self.decoder_layers)

    def decode_step(
        self,
        token_ids,
        encoder_outputs,
        source_padding_mask,
        cache,
        index,
        cross_attention_cache=None,
        step_weights: StepWeights | None = None,
        rows_per_source: int | SourceGroups = 1,
    ) -> tuple[tf.Tensor, tf.Tensor | GrowingCache]:
        """Logits of the next token after the target token at position `index`, using the cache.

        Feeding `target_in_ids[:, t]` for `t = 0, 1, ...` (BOS first) reproduces
        `model(inputs, training=False)[:, t]`. Only position `index` is computed: the keys and
        values of earlier positions come from `cache`, and this position's are added to it.

        Three kinds of cache:
        - `initial_cache(batch, max_length)`: one slot per position. Shapes do not depend on
          `index`, so the step runs in `tf.while_loop` and under XLA. `index` may also give
          every row its own position (exact search steps prefixes of different lengths
          together): row r attends to its cached positions `0..index[r]-1` and to its token,
          whose keys and values are written at `index[r]`; what the cache holds after
          `index[r]` is neither read nor changed.
        - `growing_cache(batch)`: exactly the positions before `index` (a scalar); the step
          appends position `index`, so its cost grows with the positions decoded so far.
        - `prefix_cache(entries, slots)`: each row's positions before its own `index[r]`; the step
          returns its own position's keys and values alone (see `PrefixCache`), which spares
          exact search the copies of every row's prefix that writing them in takes.

        A search that decodes several rows per sentence (beam search's beams) may pass the
        encoder's tensors once per sentence, `rows_per_source` rows each: each sentence's
        cross-attention keys and values are then read once for all of its rows, as one matrix
        product, rather than tiled to every row. Exact search, whose sentences have different
        numbers of rows in a step, passes `source_groups(row_sources)` instead.

        Args:
            token_ids: int `[batch]` (or `[batch, 1]`), the target token at position `index`.
            encoder_outputs: `[batch, source_length, hidden_dim]` from `encode`.
            source_padding_mask: bool `[batch, source_length]` from `encode`.
            cache: The self-attention cache holding positions `0..index-1`, from
                `initial_cache`, `growing_cache` or `prefix_cache`.
            index: int scalar (Python or tensor), the position of `token_ids`; or, with an
                `initial_cache` or a `PrefixCache`, int32 `[batch]`, each row's own position.
            cross_attention_cache: Optional `cross_attention_cache(encoder_outputs)`, to avoid
                recomputing the encoder's keys and values at every step.
            step_weights: Optional `step_weights()`, computed once before a decoding loop, so
                that its steps do not transpose the output projection again.
            rows_per_source: A static int: row `r` of `token_ids` and `cache` decodes source
                row `r // rows_per_source` of `encoder_outputs`, `source_padding_mask` and
                `cross_attention_cache`, which have `1 / rows_per_source` as many rows. Or
                `source_groups(row_sources)`: row `r` decodes source row `row_sources[r]`.

        Returns:
            `(logits, cache)`: float32 logits `[batch, vocabulary_size]` and the cache, of the
            kind given, with position `index` written.
        """
        token_ids = ops.reshape(ops.convert_to_tensor(token_ids, "int32"), [-1])
        index = tf.convert_to_tensor(index, tf.int32)
        if cross_attention_cache is None:
            cross_attention_cache = self.cross_attention_cache(encoder_outputs)
        growing = isinstance(cache, GrowingCache)
        prefixes = isinstance(cache, PrefixCache)
        slots = entries = None
        if prefixes:
            slots = PrefixSlots.before(index, tf.shape(cache.layers[0][0])[1])
        elif not growing:
            entries = tf.convert_to_tensor(cache, self.compute_dtype)
            rows = tf.shape(token_ids)[0]
            slots = SelfAttentionSlots.at(tf.broadcast_to(index, [rows]), tf.shape(entries)[4])
        source_visible = tf.convert_to_tensor(source_padding_mask)[:, tf.newaxis, tf.newaxis, :]
        if step_weights is None:
            step_weights = self.step_weights()
        dtype = self.compute_dtype
        embedding = self._target_embedding
        plain = type(embedding) is keras.layers.Embedding and embedding.quantization_mode is None
        with tf.name_scope("step_embedding"):
            table = tf.convert_to_tensor(embedding.embeddings) if plain else None
            x = self._step_embedding(token_ids, index, table)
        keys_and_values = []
        for i, layer in enumerate(self.decoder_layers):
            cross_keys, cross_values = cross_attention_cache[i]
            if growing or prefixes:
                keys, values = cache.layers[i]
            else:
                with tf.name_scope("cache_slices"):
                    keys, values = entries[:, i, 0], entries[:, i, 1]
            with tf.name_scope(f"decoder_step_{i}"):
                step = decoder_layer_step(
                    layer,
                    x,
                    keys,
                    values,
                    cross_keys,
                    cross_values,
                    source_visible,
                    slots,
                    layer_weights(layer, dtype),
                    rows_per_source,
                )
            x = step.outputs
            keys_and_values.append((step.keys, step.values))
        if self.normalize_first:
            x = layer_norm(norm_weights(self.decoder_final_norm, dtype), x)
        logits = self._step_logits(x, step_weights)
        if growing:
            return logits, GrowingCache(tuple(keys_and_values))
        if prefixes:
            return logits, PrefixCache(tuple(keys_and_values))
        with tf.name_scope("cache_stack"):
            entries = tf.stack([tf.stack(pair, axis=1) for pair in keys_and_values], axis=1)
        return logits, entries

    def _step_logits(self, x, step_weights: StepWeights) -> tf.Tensor:
        """`_logits` of `[rows, hidden]` with the prepared kernel (the same arithmetic)."""
        projection = self.output_projection
        dtype = projection.compute_dtype
        with tf.name_scope("output_projection"):
            return tf.matmul(tf.cast(x, dtype), step_weights.output_kernel) + tf.cast(
                projection.bias, dtype
            )

    def step_weights(self) -> StepWeights:
        """What `decode_step` should not recompute at every step: call once, before a loop.

        Returns:
            A `StepWeights` (no rows axis: a search passes the same one to every step).
        """
        projection = self.output_projection
        dtype = projection.compute_dtype
        if projection.tied:
            kernel = tf.transpose(tf.cast(self.token_embedding.embeddings, dtype))
        else:
            kernel = tf.cast(projection.kernel, dtype)
        return StepWeights(output_kernel=kernel)

    def frozen_step_weights(self) -> StepWeights:
        """`step_weights()` kept in variables, for a model whose weights no longer change.

        An export makes them once (`tfscones.decoding.step.FrozenStepModel`), so that no
        request repeats the work: with tied embeddings, a non-trainable variable holds the
        transposed table (the SavedModel then holds the table twice; for the small preset's
        8,000 × 256 table that is 8 MB more and a transpose of 1.4 ms less per request); an
        untied kernel of the compute dtype is used as it is. The variables are copies: they do
        not follow later training of the model.

        Returns:
            A `StepWeights` whose `output_kernel` is a `tf.Variable`.
        """
        projection = self.output_projection
        if not projection.tied and projection.kernel.dtype == projection.compute_dtype:
            return StepWeights(output_kernel=projection.kernel)
        kernel = self.step_weights().output_kernel
        return StepWeights(tf.Variable(kernel, trainable=False, name="frozen_output_kernel"))

    def _step_embedding(self, token_ids, index, table=None):
        """`_embed` of one token per row, `[rows, hidden_dim]`, at `index` (scalar or `[rows]`).

        The sinusoids are keras-hub's `SinePositionEncoding` (sine at even, cosine at odd
        features) computed for the given positions only; their per-feature timescales are
        constants of the graph (`_sinusoid_timescales`), not recomputed at every step.
        """
        embedding = self._target_embedding
        scale = ops.cast(math.sqrt(self.hidden_dim), embedding.compute_dtype)
        if table is not None:
            # The layer's lookup, without its handling of negative ids (a decoder feeds none).
            tokens = tf.cast(tf.gather(table, token_ids), embedding.compute_dtype) * scale
        else:
            tokens = embedding(token_ids) * scale
        dtype = self.position_encoding.compute_dtype
        positions = tf.cast(tf.reshape(index, [-1, 1]), dtype)
        timescales, even = _sinusoid_timescales(
            self.hidden_dim, self.position_encoding.max_wavelength, dtype
        )
        angles = positions * tf.constant(timescales)
        sines = tf.where(tf.constant(even), tf.sin(angles), tf.cos(angles))
        return tokens + ops.cast(sines, tokens.dtype)

    def fit(self, x=None, y=None, *args, **kwargs):
        """Keras's `fit`, after checking that the examples' ids fit the vocabulary.

        The check runs in the input pipeline (`tfscones.data.id_checks`), where it holds under
        XLA too; a bad id ends training with an error naming the input, never a wrong loss.
        """
        x, y = checked_examples(x, y, self.vocabulary_size)
        return super().fit(x, y, *args, **kwargs)

    def evaluate(self, x=None, y=None, *args, **kwargs):
        """Keras's `evaluate`, after the same id check as `fit`."""
        x, y = checked_examples(x, y, self.vocabulary_size)
        return super().evaluate(x, y, *args, **kwargs)

    def train_step(self, data):
        """Keras's training step; under multi-worker training its logs get a leading axis of 1.

        Keras 3.15 averages each worker's logs with `strategy.reduce("MEAN", value, axis=0)` under
        `MultiWorkerMirroredStrategy`, which fails on the scalar metric values a step returns; with
        a leading axis the reduction gives the scalar mean.
        """
        logs = super().train_step(data)
        if isinstance(self.distribute_strategy, tf.distribute.MultiWorkerMirroredStrategy):
            logs = tf.nest.map_structure(lambda value: tf.expand_dims(value, 0), logs)
        return logs

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        """Builds from one replica's first batch instead of the batch reduced across replicas.

        Keras 3.15 averages the first distributed batch with `strategy.reduce` before building,
        which fails under `MultiWorkerMirroredStrategy` for dict inputs (keras-team/keras#20329)
        and cannot work for token-bucketed batches whose shapes differ between replicas. Building
        needs only the structure, dtypes and ranks, which every replica's batch has.
        """
        if iterator is not None and data_batch is None:
            local_results = self.distribute_strategy.experimental_local_results
            for _, _, batches in iterator:
                data_batch = tf.nest.map_structure(lambda v: local_results(v)[0], next(batches))
                break
        super()._maybe_symbolic_build(data_batch=data_batch)

    @classmethod
    def from_preset(
        cls,
        preset: str,
        vocabulary_size: int,
        head: str | dict | heads.OutputHead = "softmax",
        **overrides,
    ) -> Seq2SeqTransformer:
        """Builds a model of a named architecture (`tfscones.models.PRESETS`).

        Args:
            preset: `base` (SCONES paper, Table 1), `small` or `tiny`.
            vocabulary_size: Size of the vocabulary.
            head: The output head, or anything `tfscones.heads.get` accepts.
            **overrides: Constructor arguments that replace the preset's (for example
                `dropout=0.0`, `tie_embeddings=True`).

        Returns:
            A new, randomly initialised model.

        Raises:
            ValueError: If the preset is unknown.
        """
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; presets: {sorted(PRESETS)}.")
        arguments = {**PRESETS[preset], **overrides}
        return cls(vocabulary_size=vocabulary_size, head=head, **arguments)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary_size=self.vocabulary_size,
            num_encoder_layers=self.num_encoder_layers,
            num_decoder_layers=self.num_decoder_layers,
            hidden_dim=self.hidden_dim,
            num_heads=self.num_heads,
            intermediate_dim=self.intermediate_dim,
            dropout=self.dropout,
            max_sequence_length=self.max_sequence_length,
            head=heads.serialize(self.head),
            tie_embeddings=self.tie_embeddings,
            layer_norm_epsilon=self.layer_norm_epsilon,
            normalize_first=self.normalize_first,
        )
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)
