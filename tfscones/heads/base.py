"""`OutputHead`: what a model's logits mean, how decoders score them, how the model is trained."""

from __future__ import annotations

import dataclasses

import keras
import tensorflow as tf

KERAS_LOSS_ARGUMENTS = ("name", "reduction", "dtype")
"""Keywords every `keras.losses.Loss` takes, accepted by every head's `loss`."""


def as_float32(logits) -> tf.Tensor:
    """Logits as a float32 tensor (heads and losses compute in float32 under mixed precision)."""
    logits = tf.convert_to_tensor(logits)
    return tf.cast(logits, tf.float32) if logits.dtype != tf.float32 else logits


def log_mean_exp(log_values: tf.Tensor) -> tf.Tensor:
    """log(mean_i exp(x_i)) over the first axis, stably: logsumexp_i x_i - log N.

    Args:
        log_values: float32 `[N, ...]`, logs of the values to average.

    Returns:
        float32 `[...]`; -inf where every value is 0.
    """
    count = tf.cast(tf.shape(log_values)[0], log_values.dtype)
    return tf.reduce_logsumexp(log_values, axis=0) - tf.math.log(count)


@dataclasses.dataclass(frozen=True)
class ScoreKind:
    """What a head's log scores are, declared as data for decoders, exports and confidences.

    Attributes:
        function: How the scores follow from the logits: `log_softmax`, `log_entmax`,
            `log_sigmoid` (SCONES) or `log_half_tanh` (tanh-SCONES, log (1 + tanh z) / 2). An
            engine that computes one of these itself decodes the head exactly (CTranslate2
            computes `log_softmax`).
        normalised: Whether each row's probabilities sum to 1, a distribution over the
            vocabulary: then a translation's summed score is its log-probability P(y | x),
            which several good translations share. Otherwise each token is its own binary
            classifier, and the sum is the log-probability that the translation is adequate.
        sparse: Whether tokens can score -inf (probability exactly 0).
        confidence: What exp of a translation's summed scores means, in words.
    """

    function: str
    normalised: bool
    sparse: bool
    confidence: str


NORMALISED_CONFIDENCE = (
    "the sequence probability P(y | x), the product of its tokens' probabilities"
)
ADEQUACY_CONFIDENCE = (
    "the probability that y is an adequate translation of x: the product over its tokens of "
    "P(z=1 | x, y<i, y_i), each token's probability of keeping the prefix valid (Stahlberg & "
    "Kumar 2022, §2)"
)


class OutputHead:
    """Base class of output heads: the one object that models, losses and decoders share.

    A head holds no weights. It says what the logits `z` of a step mean (`probabilities`), how
    a decoder scores a token (`log_scores`), how the model is trained (`loss`, `metrics`) and
    where the output bias starts (`output_bias_initializer`). Decoders never ask which head
    they have; they rely on this contract, which every head keeps:

    1. Scores are log-probabilities and never positive: `log_scores(z) = log probabilities(z)
       ≤ 0`. A prefix's summed score therefore only falls as it grows, which makes beam
       search's early stop exact and gives exact search its admissible bound (Stahlberg &
       Byrne 2019). The probabilities need not sum to one (the SCONES head's do not).
    2. Order is kept: a larger logit never gets a lower score within a row, so
       `argmax z = argmax log_scores(z)` and greedy search may take the argmax of the raw logits
       (Stahlberg & Kumar 2022, footnote 7).
    3. -inf marks the tokens the head gives probability exactly zero (entmax's pruned tokens,
       not a float underflow); decoders never extend a hypothesis with them, and samplers
       never draw them. Finite logits never give a NaN or +inf score.
    4. Both compute in float32 whatever the logits' dtype.

    `ensemble_logits` combines the logits of N models of one head into logits that keep this
    contract and whose probabilities are the mean of the N models' probabilities, so that an
    ensemble scores a token by the log of its mean probability, as fairseq's `EnsembleModel`
    does (Ott et al. 2019), and decoders step an ensemble as they step one model
    (`tfscones.decoding.Ensemble`).

    A head is built from a name or a config by `tfscones.heads.get`; `get_config` returns every
    constructor argument, and two heads are equal when their type and config are.

    Subclasses define `probabilities`, `log_scores`, `ensemble_logits`, `build_loss`, and,
    where they apply, `loss_arguments`, `metrics`, `output_bias_initializer`,
    `logit_thresholds` and `get_config`.
    """

    name: str = "head"
    score_kind: ScoreKind
    """What the head's log scores are (`ScoreKind`): the one thing code outside `tfscones.heads`
    asks of a head, never its class."""
    loss_arguments: tuple[str, ...] = ("label_smoothing", "pad_id")
    """Keywords `loss` passes on to the head's loss, besides `KERAS_LOSS_ARGUMENTS`."""

    def probabilities(self, logits: tf.Tensor) -> tf.Tensor:
        """P(token | prefix) for every vocabulary entry, computed in float32.

        Args:
            logits: Logits `[..., V]`, any float dtype.

        Returns:
            float32 tensor `[..., V]` with values in [0, 1].
        """
        raise NotImplementedError

    def log_scores(self, logits: tf.Tensor) -> tf.Tensor:
        """Per-token search scores: the log-probabilities decoders add up, in float32.

        Args:
            logits: Logits `[..., V]`, any float dtype.

        Returns:
            float32 tensor `[..., V]` of values ≤ 0; -inf marks tokens with zero probability.
        """
        raise NotImplementedError

    def ensemble_logits(self, stacked_logits: tf.Tensor) -> tf.Tensor:
        """Logits of the mean of N models' probabilities: one model's logits for an ensemble.

        `probabilities` of the result are the mean over the first axis of `probabilities` of
        `stacked_logits` (up to float32 rounding), so its `log_scores` are the log of the mean
        probability, and its argmax is that of the mean probability. Zero mean probability
        stays exactly zero (-inf scores), and finite logits give finite results.

        Args:
            stacked_logits: Logits `[N, ..., V]` of N models, any float dtype.

        Returns:
            float32 logits `[..., V]`.
        """
        raise NotImplementedError

    def logit_thresholds(self, score_thresholds: tf.Tensor) -> tf.Tensor | None:
        """The logits above which a token's log score exceeds `score_thresholds`, if it can tell.

        A head whose log score of a token depends on that token's logit alone (the SCONES
        heads) returns `u` with `log_scores(z) > t` exactly when `z > u`, up to float32
        rounding, so that a search can find the tokens that score above a bound from the
        logits and compute the log scores of those alone (`tfscones.decoding.exact`). Heads
        whose scores depend on the whole row (softmax, entmax) return None, the default.

        Args:
            score_thresholds: float32 `[...]`, thresholds on log scores.

        Returns:
            float32 `[...]`, +inf where no logit scores above the threshold; or None.
        """
        del score_thresholds
        return None

    def loss(self, **kwargs) -> keras.losses.Loss:
        """The loss this head is trained with, built from config keywords.

        Args:
            **kwargs: Keywords of `loss_arguments` (for example `label_smoothing`, and `alpha`
                for the SCONES heads) and of `keras.losses.Loss` (`name`, `reduction`).

        Returns:
            A `keras.losses.Loss`.

        Raises:
            ValueError: Naming the first keyword the head's loss does not take (`alpha` for the
                softmax head, say), or a value out of range.
        """
        for key in kwargs:
            if not self.takes_loss_argument(key):
                raise ValueError(self._unused_argument_message(key))
        return self.build_loss(**kwargs)

    def takes_loss_argument(self, key: str) -> bool:
        """Whether `loss` accepts the keyword `key`."""
        return key in self.loss_arguments + KERAS_LOSS_ARGUMENTS

    def build_loss(self, **kwargs) -> keras.losses.Loss:
        """Builds the loss from keywords that `loss` has checked; defined by each head."""
        raise NotImplementedError

    def metrics(self) -> list[keras.metrics.Metric]:
        """Keras metrics that show what the head's loss is made of (none by default).

        Returns:
            New metric objects, to pass to `model.compile(metrics=...)` next to `loss()`.
        """
        return []

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

    def _unused_argument_message(self, key: str) -> str:
        accepted = ", ".join(self.loss_arguments)
        message = f"the {self.name} head takes no {key} (its loss takes {accepted})"
        if key in self.get_config():
            message += f"; {key} is set on the head itself, {type(self).__name__}({key}=...)"
        return message + "."

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.get_config() == other.get_config()

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self.get_config().items()))))

    def __repr__(self) -> str:
        arguments = ", ".join(f"{key}={value!r}" for key, value in self.get_config().items())
        return f"{type(self).__name__}({arguments})"
