"""The output layer of a sequence model: hidden states to float32 vocabulary logits."""

from __future__ import annotations

import keras
from keras import ops

from tfscones.ranges import POSITIVE


@keras.saving.register_keras_serializable(package="tfscones")
class OutputProjection(keras.layers.Layer):
    """The final projection from decoder states to vocabulary logits, computed in float32.

    With `tied=True` the layer owns only the bias and multiplies by the transpose of an embedding
    matrix given at call time (Press & Wolf 2017); otherwise it owns a `[hidden, vocab]` kernel.
    A `kernel_scale` c other than 1 multiplies the kernel: logits `h (c W) + b`. It sets the
    logits' initial spread (a tied table of the usual 1/sqrt(hidden) deviation gives logits of
    about unit deviation; c = 1/8 makes it 1/8) without changing what the model can express.
    The layer's default dtype is float32, so the logits stay float32 under mixed precision.

    Args:
        vocabulary_size: Number of output logits.
        tied: Whether the kernel is an embedding matrix `[vocab, hidden]` passed to `call`.
        kernel_initializer: Initializer of the kernel (none is created when tied).
        bias_initializer: Initializer of the bias.
        kernel_scale: The constant c > 0 the kernel is multiplied by.
        **kwargs: Arguments of `keras.layers.Layer` (`name`, `dtype`, ...).
    """

    def __init__(
        self,
        vocabulary_size: int,
        tied: bool = False,
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        bias_initializer: str | keras.initializers.Initializer = "zeros",
        kernel_scale: float = 1.0,
        **kwargs,
    ):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.vocabulary_size = int(vocabulary_size)
        self.tied = bool(tied)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_scale = POSITIVE.check("kernel_scale", kernel_scale)

    def build(self, input_shape):
        if not self.tied:
            self.kernel = self.add_weight(
                name="kernel",
                shape=(input_shape[-1], self.vocabulary_size),
                initializer=self.kernel_initializer,
            )
        self.bias = self.add_weight(
            name="bias", shape=(self.vocabulary_size,), initializer=self.bias_initializer
        )
        self.built = True

    def call(self, inputs, embeddings=None):
        """Logits `[..., vocab]` of hidden states `[..., hidden]`.

        Args:
            inputs: Hidden states, any float dtype.
            embeddings: The tied embedding matrix `[vocab, hidden]`; required if and only if
                the layer is tied.

        Returns:
            Logits in the layer's compute dtype (float32 by default).
        """
        inputs = ops.cast(inputs, self.compute_dtype)
        return ops.matmul(inputs, self.scaled_kernel(embeddings)) + ops.cast(
            self.bias, self.compute_dtype
        )

    def scaled_kernel(self, embeddings=None):
        """The `[hidden, vocab]` matrix `call` multiplies by, scaled, in the compute dtype.

        Args:
            embeddings: The tied embedding matrix `[vocab, hidden]`; required if and only if
                the layer is tied.

        Returns:
            `kernel_scale` times the kernel (the transposed embeddings, when tied).
        """
        if self.tied != (embeddings is not None):
            raise ValueError("pass `embeddings` to a tied OutputProjection, and only to one.")
        if self.tied:
            kernel = ops.transpose(ops.cast(embeddings, self.compute_dtype))
        else:
            kernel = ops.cast(self.kernel, self.compute_dtype)
        return kernel if self.kernel_scale == 1.0 else kernel * self.kernel_scale

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.vocabulary_size)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary_size=self.vocabulary_size,
            tied=self.tied,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            kernel_scale=self.kernel_scale,
        )
        return config
