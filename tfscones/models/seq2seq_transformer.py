"""An encoder-decoder Transformer whose output layer is an `OutputHead`: softmax, SCONES, entmax."""

from __future__ import annotations

import math

import keras
import keras_hub
import tensorflow as tf
from keras import ops

from tfscones import heads
from tfscones.data.id_checks import checked_examples
from tfscones.data.preprocessing import padding_mask
from tfscones.models.output_projection import OutputProjection
from tfscones.models.presets import PRESETS
from tfscones.models.stepping.transformer import TransformerStepper
from tfscones.ranges import POSITIVE


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

    The model holds the network and its training; decoding is its stepper's
    (`stepper()`, a `tfscones.models.stepping.TransformerStepper`), which every decoder of
    `tfscones.decoding` steps one position at a time with a key/value cache.

    Args:
        vocabulary_size: Size of the (joint) vocabulary.
        num_encoder_layers: Number of `TransformerEncoder` layers.
        num_decoder_layers: Number of `TransformerDecoder` layers.
        hidden_dim: Size of embeddings and hidden states.
        num_heads: Number of attention heads; must divide `hidden_dim`.
        intermediate_dim: Size of the MLP's hidden layer.
        dropout: Dropout rate of embeddings, attention weights, attention outputs and MLP outputs.
        max_sequence_length: Longest target the model is meant to produce: the default length
            of a decoding cache (its stepper's `initial_cache`).
        head: The output head, or anything `tfscones.heads.get` accepts.
        tie_embeddings: Whether the source embedding, the target embedding and the output
            projection (transposed, plus its own bias) share one matrix.
        layer_norm_epsilon: Epsilon of every layer normalization.
        normalize_first: Pre-norm (True: normalize each block's input, plus one final layer
            normalization after each stack) or post-norm (False, as in Vaswani et al. 2017).
        output_kernel_scale: The constant c > 0 the output projection's kernel is multiplied
            by (`OutputProjection.kernel_scale`): 1 gives initial logits of about unit
            deviation, c gives c; a sparse head's initial support grows as c shrinks.
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
        output_kernel_scale: float = 1.0,
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
            kernel_scale=POSITIVE.check("output_kernel_scale", output_kernel_scale),
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
    def target_token_embedding(self) -> keras.layers.Embedding:
        """The embedding of the decoder's input tokens (the source's, when tied)."""
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
        x = self._embed(self.target_token_embedding, target_ids, training=training)
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

    def stepper(self, frozen_weights: bool = False) -> TransformerStepper:
        """The `StepModel` that decodes this model one position at a time (every decoder's).

        Args:
            frozen_weights: Whether the stepper makes its step weights once and keeps them in
                variables (for an export; see `TransformerStepper`).
        """
        return TransformerStepper(self, frozen_weights=frozen_weights)

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
            output_kernel_scale=self.output_projection.kernel_scale,
        )
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)
