"""Output heads: what a model's logits mean, how decoders score them, and how they are trained.

The head is the one object that models, losses and decoders share:

| head          | probabilities      | search score per token   | zeros        | default loss  |
|---------------|--------------------|--------------------------|--------------|---------------|
| SoftmaxHead   | softmax(z)         | log_softmax(z)           | never        | cross-entropy |
| SigmoidHead   | σ(z), unnormalised | log σ(z) = -softplus(-z) | never        | SconesLoss    |
| EntmaxHead(α) | entmax_α(z)        | log entmax_α(z)          | -inf, pruned | EntmaxLoss    |

A decoder never asks which head it has: it calls `log_scores`. Greedy search may take the argmax of
raw logits, which is the same for all three heads (SCONES paper, footnote 7).

Heads hold no weights. `get` turns a name or a config into a head, so a model stores its head in
its config as a plain dict.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from tfscones import activations, losses


class OutputHead:
    """Base class of output heads.

    Subclasses define `probabilities`, `log_scores` and `loss`; `get_config` returns every
    constructor argument.
    """

    name: str = "head"

    def probabilities(self, logits: tf.Tensor) -> tf.Tensor:
        """P(token | prefix) for every vocabulary entry, computed in float32.

        Args:
            logits: Logits `[..., V]`, any float dtype.

        Returns:
            float32 tensor `[..., V]`.
        """
        raise NotImplementedError

    def log_scores(self, logits: tf.Tensor) -> tf.Tensor:
        """Per-token search scores: the log-probabilities decoders add up, in float32.

        Args:
            logits: Logits `[..., V]`, any float dtype.

        Returns:
            float32 tensor `[..., V]`; -inf marks tokens with zero probability.
        """
        raise NotImplementedError

    def loss(self, **kwargs) -> keras.losses.Loss:
        """The loss this head is trained with.

        Args:
            **kwargs: Arguments of that loss (for example `label_smoothing`).

        Returns:
            A `keras.losses.Loss`.
        """
        raise NotImplementedError

    def output_bias_initializer(self, vocab_size: int) -> keras.initializers.Initializer:
        """Initializer of the output projection's bias for a vocabulary of `vocab_size`."""
        del vocab_size
        return keras.initializers.Zeros()

    def get_config(self) -> dict:
        """Constructor arguments, for `from_config` and Keras serialization."""
        return {}

    @classmethod
    def from_config(cls, config: dict) -> OutputHead:
        """Builds a head from `get_config()`'s output."""
        return cls(**config)

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.get_config() == other.get_config()

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self.get_config().items()))))

    def __repr__(self) -> str:
        arguments = ", ".join(f"{key}={value!r}" for key, value in self.get_config().items())
        return f"{type(self).__name__}({arguments})"


def _as_float32(logits: tf.Tensor) -> tf.Tensor:
    logits = tf.convert_to_tensor(logits)
    return tf.cast(logits, tf.float32) if logits.dtype != tf.float32 else logits


@keras.saving.register_keras_serializable(package="tfscones")
class SoftmaxHead(OutputHead):
    """The standard softmax output layer: one distribution over the vocabulary.

    Example:
    >>> SoftmaxHead().log_scores(tf.constant([0.0, 0.0])).numpy()
    array([-0.6931472, -0.6931472], dtype=float32)
    """

    name = "softmax"

    def probabilities(self, logits):
        return tf.nn.softmax(_as_float32(logits), axis=-1)

    def log_scores(self, logits):
        return tf.nn.log_softmax(_as_float32(logits), axis=-1)

    def loss(self, **kwargs):
        return losses.SequenceCrossEntropy(**kwargs)


@keras.saving.register_keras_serializable(package="tfscones")
class SigmoidHead(OutputHead):
    """The SCONES head: every token its own binary classifier, P(z=1 | x, y<i·w) = σ(z_w).

    The probabilities are not normalised, so two valid continuations can both score near 1
    (SCONES eq. 4). Search scores are log σ(z) = -softplus(-z), exact for any logit.

    The output bias starts at -log|V| (each token's prior probability about 1/|V|), so that
    training does not begin by pushing |V| logits from σ = 1/2 down (|V| ln 2 of negative loss).

    Example:
    >>> SigmoidHead().probabilities(tf.constant([0.0, 100.0])).numpy()
    array([0.5, 1. ], dtype=float32)
    """

    name = "sigmoid"

    def probabilities(self, logits):
        return tf.sigmoid(_as_float32(logits))

    def log_scores(self, logits):
        return -tf.nn.softplus(-_as_float32(logits))

    def loss(self, **kwargs):
        return losses.SconesLoss(**kwargs)

    def output_bias_initializer(self, vocab_size):
        return keras.initializers.Constant(-math.log(vocab_size))


@keras.saving.register_keras_serializable(package="tfscones")
class EntmaxHead(OutputHead):
    """A sparse head: α-entmax probabilities with exact zeros (α = 2 sparsemax, 1.5 entmax-1.5).

    Zero-probability tokens score -inf, so no decoder ever extends a hypothesis with them.

    Args:
        alpha: Entmax α > 1.
        n_iter: Bisection steps for α other than 1.5 and 2.

    Example:
    >>> EntmaxHead(alpha=2.0).log_scores(tf.constant([2.0, 1.0, -1.0])).numpy()
    array([  0., -inf, -inf], dtype=float32)
    """

    name = "entmax"

    def __init__(self, alpha: float = 1.5, n_iter: int = 50):
        self.alpha = activations.validate_entmax_alpha(alpha)
        self.n_iter = int(n_iter)

    def probabilities(self, logits):
        return activations.entmax(_as_float32(logits), self.alpha, self.n_iter)

    def log_scores(self, logits):
        return tf.math.log(self.probabilities(logits))

    def loss(self, **kwargs):
        if self.alpha == 2.0:
            return losses.SparsemaxLoss(**kwargs)
        return losses.EntmaxLoss(alpha=self.alpha, n_iter=self.n_iter, **kwargs)

    def get_config(self):
        return {"alpha": self.alpha, "n_iter": self.n_iter}


_NAMED_HEADS = {
    "softmax": SoftmaxHead,
    "sigmoid": SigmoidHead,
    "scones": SigmoidHead,
    "entmax": EntmaxHead,
    "entmax15": lambda: EntmaxHead(alpha=1.5),
    "sparsemax": lambda: EntmaxHead(alpha=2.0),
}


def get(identifier: str | dict | OutputHead) -> OutputHead:
    """Returns the head an identifier names.

    Args:
        identifier: A head; a name (`softmax`, `sigmoid` or `scones`, `entmax`, `entmax15`,
            `sparsemax`); or a dict `{"class_name": ..., "config": {...}}` from `serialize`, or
            `{"name": ..., **config}` as written in a YAML config.

    Returns:
        The `OutputHead`.

    Raises:
        ValueError: If the identifier names no head.
    """
    if isinstance(identifier, OutputHead):
        return identifier
    if isinstance(identifier, str):
        key = identifier.lower().replace("-", "").replace("_", "").replace("1.5", "15")
        if key not in _NAMED_HEADS:
            raise ValueError(f"unknown head {identifier!r}; known heads: {sorted(_NAMED_HEADS)}.")
        return _NAMED_HEADS[key]()
    if isinstance(identifier, dict) and "class_name" in identifier:
        return keras.saving.deserialize_keras_object(identifier)
    if isinstance(identifier, dict) and "name" in identifier:
        config = dict(identifier)
        named = get(config.pop("name"))
        return type(named)(**{**named.get_config(), **config})
    raise ValueError(f"cannot make an output head from {identifier!r}.")


def serialize(head: OutputHead) -> dict:
    """The Keras serialization of a head, for a model's `get_config`."""
    return keras.saving.serialize_keras_object(head)
