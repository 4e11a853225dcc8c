"""Sampling: draw translations from the distribution the model's head defines, step by step.

The head decides what is sampled. At every step the next token is drawn with probability

    p(w) ∝ exp(head.log_scores(z)_w / temperature)

where `z` are the step's logits, so a decoder never asks which head it has (`tfscones.heads`);
it only calls `model.head.log_scores`:

| head             | p(w) at temperature T                | zero-probability tokens       |
|------------------|--------------------------------------|-------------------------------|
| softmax          | softmax(z / T): the usual sampling   | none                          |
| sigmoid (SCONES) | σ(z_w)^(1/T), normalised             | none                          |
| entmax(α)        | entmax_α(z)_w^(1/T), normalised      | log score -inf: never sampled |

Hard-coding `softmax(logits / T)`, as every public TensorFlow sampler does, would sample a SCONES
or entmax model from a distribution it was never trained to produce, and would give entmax's
pruned tokens back a positive probability. At T = 1 each head is sampled from its own
probabilities (normalised for SCONES, whose σ(z) do not sum to one).

Two filters then cut the tail, each by setting the scores of the tokens it drops to -inf:
top-k keeps the `top_k` highest-scoring tokens, then top-p (nucleus) keeps the smallest set of
the remaining tokens, highest first, whose tempered and normalised probability mass reaches
`top_p` (always at least one token). Both filters act on the head's tempered scores, so they too
are head-aware; applying top-k before top-p follows Hugging Face's `generate`.

Sampling uses the Gumbel-max trick, `argmax(scores + Gumbel noise)`, with noise made from
`tf.random.stateless_uniform` bits of a per-step seed `stateless_fold_in(seed, step)`. This draws
from the same categorical distribution as `tf.random.stateless_categorical`, but
unlike that op (and unlike float `stateless_uniform`), whose XLA kernels compute different
samples from the same seed, the integer bits and their conversion here are the same eagerly, in
`tf.function` and under `jit_compile=True`: one seed gives one set of samples everywhere.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import tensorflow as tf

from tfscones.decoding import common, registry
from tfscones.decoding.registry import NBest, check_settings, decoder_arguments, setting
from tfscones.models.stepping import Decodable
from tfscones.ranges import NUCLEUS_MASS, SAMPLING_SEED, SEARCH_COUNT, TEMPERATURE, TOP_K

_MANTISSA_BITS = 23


class SamplingOutput(NamedTuple):
    """What `sample_decode` returns.

    Attributes:
        ids: int32 `[batch, num_samples, max_output_length]`: each sample's tokens, its EOS
            included (when it produced one before its length limit), then PAD (0). The width is
            static, so the function compiles once under XLA.
        lengths: int32 `[batch, num_samples]`, the number of tokens produced, EOS included.
        scores: float32 `[batch, num_samples]`, the sum of `model.head.log_scores` of the sampled
            tokens: the model's own scores, neither tempered nor filtered.
        token_log_scores: float32 `[batch, num_samples, max_output_length]`, each sampled
            token's `model.head.log_scores` (the terms of `scores`), then 0.
    """

    ids: tf.Tensor
    lengths: tf.Tensor
    scores: tf.Tensor
    token_log_scores: tf.Tensor


def sample_decode(
    model: Decodable,
    source_ids: tf.Tensor,
    num_samples: int = 1,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: tuple[int, int] | tf.Tensor = (0, 0),
    max_length: int | None = None,
    max_length_a: float = common.DEFAULT_MAX_LENGTH_A,
    max_length_b: float = common.DEFAULT_MAX_LENGTH_B,
    jit_compile: bool = False,
) -> SamplingOutput:
    """Draws `num_samples` translations of every source sentence, sampling each token from the head.

    The source is encoded once and tiled `num_samples` times, so every sample of every sentence
    decodes in one batched loop with the model's cache. At each step the token is drawn from the
    head's tempered, filtered distribution (see the module docstring). Each sample stops after
    its EOS or at its sentence's length limit, `min(floor(max_length_a * source_length +
    max_length_b), max_length)` tokens, exactly as in `greedy_decode`; the loop stops when every
    sample has stopped. All shapes are fixed, so the function runs eagerly, in `tf.function` and
    with `jit_compile=True`, with the same samples for the same `seed`.

    Example:
    ```python
    model = Seq2SeqTransformer.from_preset("tiny", vocabulary_size=100, head="sigmoid")
    decode = tf.function(
        lambda source: sample_decode(
            model, source, num_samples=4, top_p=0.9, seed=(1, 2), jit_compile=True
        ),
        jit_compile=True,
    )
    output = decode(tf.constant([[5, 6, 1, 0], [7, 1, 0, 0]]))
    output.ids  # [2, 4, 128] int32; output.lengths, output.scores: [2, 4]
    ```

    Args:
        model: A `Decodable` (`tfscones.models.stepping`): a model such as a
            `Seq2SeqTransformer`, or a `StepModel`.
        source_ids: int `[batch, source_length]`, each row ending with EOS, padded with 0.
        num_samples: Samples per source sentence, at least 1.
        temperature: T in [1e-30, 1e30]: the sampled distribution is ∝ exp(log_scores / T).
            Below 1 it sharpens the head's distribution (T → 0 is greedy search), above 1 it
            flattens it (`tfscones.ranges.TEMPERATURE` says why these ends).
        top_k: Keep only the `top_k` highest-scoring tokens at each step; 0 keeps all.
        top_p: Nucleus mass, 0 < top_p ≤ 1: keep the smallest set of highest-scoring tokens whose
            tempered probability reaches `top_p`; 1 keeps all.
        seed: Two integers in [0, 2**63 - 1] (a tuple, or an int tensor of shape `[2]`, whose
            values are not checked). The same seed gives the same samples, eagerly, in
            `tf.function` and under XLA.
        max_length: Most tokens any sample may produce, EOS included: the static length of the
            decoding cache and the width of `ids`. Defaults to `model.max_sequence_length`.
        max_length_a: Output tokens allowed per source token (default 1.5).
        max_length_b: Output tokens allowed in addition (default 10).
        jit_compile: True when the caller compiles this with XLA (see `greedy_decode`).

    Returns:
        A `SamplingOutput` `(ids, lengths, scores, token_log_scores)`.

    Raises:
        ValueError: If an argument is outside its range (`tfscones.ranges`: `num_samples`
            outside `SEARCH_COUNT`, `temperature` outside `TEMPERATURE`, `top_k` outside
            `TOP_K`, `top_p` outside `NUCLEUS_MASS`, `seed` not two numbers of `SAMPLING_SEED`,
            `max_length` not positive, `max_length_a` or `max_length_b` negative).
    """
    validate_sampling_arguments(num_samples, temperature, top_k, top_p)
    seed = _as_seed(seed)
    model = model.stepper()
    width = common.max_output_length(model, max_length)
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    source = common.encode_source(model, source_ids, width, max_length_a, max_length_b)
    source = tf.nest.map_structure(lambda t: tf.repeat(t, num_samples, axis=0), source)

    def choose(step, logits, log_scores):
        del logits
        step_seed = tf.random.experimental.stateless_fold_in(seed, step)
        return _sample_tokens(log_scores, step_seed, temperature, top_k, top_p)

    output = common.decode_token_by_token(model, source, width, choose, jit_compile)
    return SamplingOutput(
        ids=tf.reshape(output.ids, [-1, num_samples, width]),
        lengths=tf.reshape(output.lengths, [-1, num_samples]),
        scores=tf.reshape(output.scores, [-1, num_samples]),
        token_log_scores=tf.reshape(output.token_log_scores, [-1, num_samples, width]),
    )


def _sample_tokens(
    log_scores: tf.Tensor,
    seed: tf.Tensor,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
) -> tf.Tensor:
    """Draws one token per row with probability ∝ exp(log_scores / temperature), after filtering.

    Args:
        log_scores: float32 `[batch, vocabulary_size]`, a head's `log_scores` (-inf for
            zero-probability tokens, at least one finite score per row).
        seed: int `[2]`, the stateless seed of this draw.
        temperature: T > 0 (see `sample_decode`).
        top_k: Tokens kept by the top-k filter; 0 keeps all.
        top_p: Mass kept by the nucleus filter, in (0, 1]; 1 keeps all.

    Returns:
        int32 `[batch]`, the sampled token ids.
    """
    tempered = _tempered(log_scores, temperature)
    if top_k == 0 and top_p == 1.0:
        return _gumbel_argmax(tempered, seed)
    values, token_ids = tf.math.top_k(tempered, k=_kept_count(tempered, top_k))
    if top_p < 1.0:
        values = _nucleus(values, top_p)
    return tf.gather(token_ids, _gumbel_argmax(values, seed), batch_dims=1)


def _tempered(log_scores: tf.Tensor, temperature: float) -> tf.Tensor:
    """`(log_scores - max) / temperature`: the same distribution, and no overflow for tiny T."""
    log_scores = tf.convert_to_tensor(log_scores, tf.float32)
    shifted = log_scores - tf.reduce_max(log_scores, axis=-1, keepdims=True)
    return shifted / temperature


def _kept_count(scores: tf.Tensor, top_k: int) -> int | tf.Tensor:
    """How many sorted tokens the filters look at: `top_k` (0 for all) capped at the vocabulary."""
    vocabulary_size = scores.shape[-1]
    if vocabulary_size is None:
        vocabulary_size = tf.shape(scores)[-1]
        return vocabulary_size if top_k == 0 else tf.minimum(top_k, vocabulary_size)
    return vocabulary_size if top_k == 0 else min(top_k, vocabulary_size)


def _nucleus(sorted_scores: tf.Tensor, top_p: float) -> tf.Tensor:
    """Sets to -inf the tokens after the smallest prefix whose probability mass reaches `top_p`.

    Args:
        sorted_scores: `[batch, k]` tempered scores, sorted in descending order.
        top_p: The mass to reach, in (0, 1).

    Returns:
        `sorted_scores` with the tokens outside the nucleus at -inf. A token is kept when the
        mass of the tokens before it is below `top_p`, so the first token always is.
    """
    probabilities = tf.nn.softmax(sorted_scores, axis=-1)
    mass_before = tf.math.cumsum(probabilities, axis=-1, exclusive=True)
    return tf.where(mass_before < top_p, sorted_scores, float("-inf"))


def _gumbel_argmax(scores: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """A sample of `Categorical(softmax(scores))` per row: the argmax of scores + Gumbel noise.

    The noise is built from raw 32-bit random integers, whose values XLA and the TensorFlow
    kernels agree on, turned into uniforms in (0, 1) by exact float32 arithmetic.
    """
    bits = tf.random.stateless_uniform(
        tf.shape(scores), seed, minval=None, maxval=None, dtype=tf.uint32, alg="philox"
    )
    mantissa = tf.cast(tf.bitwise.right_shift(bits, 32 - _MANTISSA_BITS), tf.float32)
    uniform = (mantissa + 0.5) * 2.0**-_MANTISSA_BITS
    gumbel = -tf.math.log(-tf.math.log(uniform))
    return tf.argmax(scores + gumbel, axis=-1, output_type=tf.int32)


def _as_seed(seed: tuple[int, int] | tf.Tensor) -> tf.Tensor:
    """The seed as an int64 tensor of shape `[2]`.

    Raises:
        ValueError: If the seed is not two integers, or (unless a tensor) not two numbers of
            `SAMPLING_SEED`.
    """
    refusal = f"seed must be two whole numbers in {SAMPLING_SEED} (got {seed!r})."
    if not tf.is_tensor(seed):
        values = list(seed) if isinstance(seed, (tuple, list)) else [seed]
        if len(values) != 2 or not all(SAMPLING_SEED.allows(value) for value in values):
            raise ValueError(refusal)
    tensor = tf.convert_to_tensor(seed, dtype_hint=tf.int64)
    if not tensor.dtype.is_integer or tensor.shape.rank != 1 or tensor.shape[0] != 2:
        raise ValueError(refusal)
    return tf.cast(tensor, tf.int64)


TOP_K_HINT = "0 keeps all tokens."
TOP_P_HINT = "1 keeps all tokens."
TEMPERATURE_HINT = f"Below {TEMPERATURE.low:g} sampling is greedy search: use greedy search."


def validate_sampling_arguments(
    num_samples: int, temperature: float, top_k: int, top_p: float
) -> None:
    """Raises a ValueError naming the first argument outside its allowed range."""
    SEARCH_COUNT.check("num_samples", num_samples)
    TEMPERATURE.check("temperature", temperature, TEMPERATURE_HINT)
    TOP_K.check("top_k", top_k, TOP_K_HINT)
    NUCLEUS_MASS.check("top_p", top_p, TOP_P_HINT)


@dataclasses.dataclass(frozen=True)
class SamplingSettings:
    """The settings of `sample_decode` (see there); checked when made."""

    num_hypotheses: int = setting(1, None, "samples per sentence, in the order drawn", SEARCH_COUNT)
    temperature: float = setting(
        1.0, "--temperature", "sampling temperature", TEMPERATURE, TEMPERATURE_HINT
    )
    top_k: int = setting(0, "--top-k", "sample among the k best tokens (0: all)", TOP_K, TOP_K_HINT)
    top_p: float = setting(
        1.0, "--top-p", "sample within the nucleus of this mass (1: all)", NUCLEUS_MASS, TOP_P_HINT
    )
    seed: int = setting(
        0, "--seed", "sampling seed: the same seed draws the same samples", SAMPLING_SEED
    )

    def __post_init__(self):
        check_settings(self)


def _sampled_nbest(stepper, source_ids, settings: SamplingSettings, limits, jit_compile) -> NBest:
    arguments = decoder_arguments(settings, limits)
    arguments["num_samples"] = arguments.pop("num_hypotheses")
    arguments["seed"] = (settings.seed, 0)
    output = sample_decode(stepper, source_ids, **arguments, jit_compile=jit_compile)
    return NBest(
        ids=output.ids,
        lengths=output.lengths,
        scores=output.scores,
        log_scores=output.scores,
        token_log_scores=output.token_log_scores,
    )


SAMPLING = registry.register(
    registry.Decoder(
        "sample",
        "samples from the distribution the head defines (top-k, nucleus, temperature)",
        SamplingSettings,
        _sampled_nbest,
        hypotheses=registry.settings_count,
        rows_per_sentence=registry.settings_count,
    )
)
