"""Sparse probability mappings: sparsemax, entmax-1.5 and α-entmax by bisection.

α-entmax (Peters et al. 2019; seed 004, eq. 4) maps logits z to the simplex:

    entmax_α(z)_i = [(α - 1) z_i - τ]_+ ^ (1 / (α - 1)),

with τ the unique threshold that makes the output sum to one. α = 2 is sparsemax, α = 1.5 is
entmax-1.5, and α → 1 recovers softmax. Tokens below the threshold get exactly zero probability.

All functions act on the last axis, compute in float32 whatever the input dtype (float16 and
bfloat16 inputs are upcast, and the result is cast back), and have closed-form gradients
(Peters et al. 2019, §3.3): with p the output and s = p^(2-α) on the support (0 elsewhere),

    ∂L/∂z = s ⊙ g - (Σ s ⊙ g / Σ s) s,        g = ∂L/∂p,

so no gradient ever flows through the sort or the bisection loop.

Sorting the full vocabulary is the costly step. When the last axis is longer than `top_k`, the
thresholds are first computed from the `top_k` largest logits only (`tf.math.top_k`); this is exact
whenever every row's support is smaller than `top_k`, and the whole batch falls back to a full sort
otherwise.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

DEFAULT_TOP_K = 128
"""Logits sorted by the partial-sort path before falling back to a full sort."""


def validate_entmax_alpha(alpha: float) -> float:
    """Checks that α selects a sparse entmax mapping.

    Args:
        alpha: The entmax α.

    Returns:
        α as a Python float.

    Raises:
        ValueError: If α is not a finite number greater than 1.
    """
    alpha = float(alpha)
    if not math.isfinite(alpha) or alpha <= 1.0:
        raise ValueError(
            f"entmax alpha must be a finite number > 1 (got {alpha}); alpha = 2 is sparsemax, "
            "alpha = 1.5 is entmax-1.5, and alpha -> 1 is softmax: use tf.nn.softmax or "
            "SoftmaxHead for that."
        )
    return alpha


def _as_float32(logits: tf.Tensor) -> tf.Tensor:
    return tf.cast(logits, tf.float32) if logits.dtype != tf.float32 else logits


def _sorted_descending(logits: tf.Tensor, k: int | None) -> tf.Tensor:
    """The `k` largest values of each row, largest first (all of them when k is None)."""
    if k is None:
        return tf.sort(logits, axis=-1, direction="DESCENDING")
    return tf.math.top_k(logits, k=k, sorted=True).values


def _sparsemax_threshold_from_sorted(z_sorted: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Sparsemax threshold τ and support size from descending-sorted logits.

    The support is {j : 1 + j z_(j) > Σ_{i≤j} z_(i)} (Martins & Astudillo 2016, eq. 5-6) and
    τ = (Σ_{i≤k} z_(i) - 1) / k for the support size k.
    """
    ranks = tf.range(1, tf.shape(z_sorted)[-1] + 1, dtype=z_sorted.dtype)
    cumsum_minus_one = tf.cumsum(z_sorted, axis=-1) - 1.0
    in_support = ranks * z_sorted > cumsum_minus_one
    support_size = tf.reduce_sum(tf.cast(in_support, tf.int32), axis=-1, keepdims=True)
    tau = tf.gather(cumsum_minus_one, support_size - 1, batch_dims=z_sorted.shape.rank - 1)
    return tau / tf.cast(support_size, z_sorted.dtype), support_size


def _entmax15_threshold_from_sorted(z_sorted: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Entmax-1.5 threshold τ and support size from descending-sorted halved logits.

    Exact sort-based algorithm of Peters et al. (2019, Alg. 2): for each candidate support size
    k, τ_k = mean_k - sqrt((1 - k·var_k) / k) solves Σ_{i≤k} (z_(i) - τ)² = 1, and the support is
    the largest k with τ_k ≤ z_(k).
    """
    ranks = tf.range(1, tf.shape(z_sorted)[-1] + 1, dtype=z_sorted.dtype)
    mean = tf.cumsum(z_sorted, axis=-1) / ranks
    mean_of_squares = tf.cumsum(tf.square(z_sorted), axis=-1) / ranks
    scaled_variance = ranks * (mean_of_squares - tf.square(mean))
    delta = tf.nn.relu((1.0 - scaled_variance) / ranks)
    tau_candidates = mean - tf.sqrt(delta)
    support_size = tf.reduce_sum(
        tf.cast(tau_candidates <= z_sorted, tf.int32), axis=-1, keepdims=True
    )
    tau = tf.gather(tau_candidates, support_size - 1, batch_dims=z_sorted.shape.rank - 1)
    return tau, support_size


def _threshold_with_partial_sort(logits, threshold_from_sorted, top_k):
    """Threshold from the `top_k` largest logits, or from a full sort when a support fills them."""
    vocab_size = logits.shape[-1]
    if top_k is None or vocab_size is None or vocab_size <= top_k:
        return threshold_from_sorted(_sorted_descending(logits, None))[0]
    tau, support_size = threshold_from_sorted(_sorted_descending(logits, top_k))
    return tf.cond(
        tf.reduce_all(support_size < top_k),
        lambda: tau,
        lambda: threshold_from_sorted(_sorted_descending(logits, None))[0],
    )


def _entmax_backward(probabilities, upstream, alpha):
    """Closed-form vector-Jacobian product of α-entmax (Peters et al. 2019, Prop. 2)."""
    if alpha == 2.0:
        weights = tf.cast(probabilities > 0, probabilities.dtype)
    elif alpha == 1.5:
        weights = tf.sqrt(probabilities)
    else:
        weights = tf.where(
            probabilities > 0, tf.pow(probabilities, 2.0 - alpha), tf.zeros_like(probabilities)
        )
    weighted = weights * upstream
    correction = tf.reduce_sum(weighted, -1, keepdims=True) / tf.reduce_sum(
        weights, -1, keepdims=True
    )
    return weighted - correction * weights


def sparsemax_forward(logits: tf.Tensor, top_k: int | None = DEFAULT_TOP_K) -> tf.Tensor:
    """Sparsemax of float32 logits without a custom gradient (for Fenchel-Young losses)."""
    tau = _threshold_with_partial_sort(logits, _sparsemax_threshold_from_sorted, top_k)
    return tf.nn.relu(logits - tau)


def entmax15_forward(logits: tf.Tensor, top_k: int | None = DEFAULT_TOP_K) -> tf.Tensor:
    """Entmax-1.5 of float32 logits without a custom gradient (for Fenchel-Young losses)."""
    halved = 0.5 * (logits - tf.reduce_max(logits, axis=-1, keepdims=True))
    tau = _threshold_with_partial_sort(halved, _entmax15_threshold_from_sorted, top_k)
    return tf.square(tf.nn.relu(halved - tau))


def entmax_bisect_forward(logits: tf.Tensor, alpha: float, n_iter: int = 50) -> tf.Tensor:
    """α-entmax of float32 logits by bisection on τ, without a custom gradient.

    With x = (α - 1) z, the threshold lies in [max(x) - 1, max(x) - (1/d)^(α-1)] for d logits:
    the first bound gives the largest entry probability 1, the second gives every entry at most
    1/d. `n_iter` halvings of that interval locate τ; the output is renormalised to sum to one.
    """
    alpha = validate_entmax_alpha(alpha)
    exponent = 1.0 / (alpha - 1.0)
    scaled = (alpha - 1.0) * logits
    max_scaled = tf.reduce_max(scaled, axis=-1, keepdims=True)
    num_logits = tf.cast(tf.shape(scaled)[-1], scaled.dtype)
    tau_low = max_scaled - 1.0
    width = 1.0 - tf.pow(1.0 / num_logits, alpha - 1.0)

    def bisection_step(step, tau_low, width):
        width = 0.5 * width
        tau_mid = tau_low + width
        mass = tf.reduce_sum(tf.pow(tf.nn.relu(scaled - tau_mid), exponent), -1, keepdims=True)
        return step + 1, tf.where(mass >= 1.0, tau_mid, tau_low), width

    _, tau_low, _ = tf.while_loop(
        lambda step, *_: step < n_iter,
        bisection_step,
        (tf.constant(0), tau_low, tf.broadcast_to(width, tf.shape(tau_low))),
    )
    unnormalised = tf.pow(tf.nn.relu(scaled - tau_low), exponent)
    return unnormalised / tf.reduce_sum(unnormalised, axis=-1, keepdims=True)


def _with_entmax_gradient(forward, alpha, logits):
    """Applies `forward` in float32 with the closed-form α-entmax gradient, in the input dtype."""
    logits = tf.convert_to_tensor(logits)
    input_dtype = logits.dtype

    @tf.custom_gradient
    def mapping(z):
        probabilities = forward(_as_float32(z))

        def grad(upstream):
            return tf.cast(
                _entmax_backward(probabilities, _as_float32(upstream), alpha), input_dtype
            )

        return tf.cast(probabilities, input_dtype), grad

    return mapping(logits)


def sparsemax(logits: tf.Tensor, top_k: int | None = DEFAULT_TOP_K) -> tf.Tensor:
    """Sparsemax over the last axis (α-entmax with α = 2; Martins & Astudillo 2016).

    Args:
        logits: Float tensor of any rank; the mapping acts on the last axis.
        top_k: Partial-sort size for long last axes; None always sorts fully. The result is exact
            either way.

    Returns:
        Probabilities on the simplex, same shape and dtype as `logits`, with exact zeros.

    Example:
    >>> sparsemax(tf.constant([[2.0, 1.0, -1.0]])).numpy()
    array([[1., 0., 0.]], dtype=float32)
    """
    return _with_entmax_gradient(lambda z: sparsemax_forward(z, top_k), 2.0, logits)


def entmax15(logits: tf.Tensor, top_k: int | None = DEFAULT_TOP_K) -> tf.Tensor:
    """Entmax-1.5 over the last axis (α-entmax with α = 1.5; exact sort-based algorithm).

    Args:
        logits: Float tensor of any rank; the mapping acts on the last axis.
        top_k: Partial-sort size for long last axes; None always sorts fully. The result is exact
            either way.

    Returns:
        Probabilities on the simplex, same shape and dtype as `logits`, with exact zeros.
    """
    return _with_entmax_gradient(lambda z: entmax15_forward(z, top_k), 1.5, logits)


def entmax_bisect(logits: tf.Tensor, alpha: float = 1.5, n_iter: int = 50) -> tf.Tensor:
    """α-entmax over the last axis for any α > 1, by bisection on the threshold.

    Args:
        logits: Float tensor of any rank; the mapping acts on the last axis.
        alpha: Entmax α > 1 (2 is sparsemax, 1.5 entmax-1.5; values near 1 approach softmax).
        n_iter: Bisection steps; each halves the threshold's bracket (50 reaches float32 precision).

    Returns:
        Probabilities on the simplex, same shape and dtype as `logits`.

    Raises:
        ValueError: If α ≤ 1 or not finite.
    """
    alpha = validate_entmax_alpha(alpha)
    return _with_entmax_gradient(lambda z: entmax_bisect_forward(z, alpha, n_iter), alpha, logits)


def entmax_forward(logits: tf.Tensor, alpha: float, n_iter: int = 50) -> tf.Tensor:
    """α-entmax of float32 logits with the fastest exact algorithm, without a custom gradient.

    Sort-based for α ∈ {1.5, 2}, bisection otherwise. Fenchel-Young losses use this directly:
    their gradient p - q never differentiates the mapping.

    Args:
        logits: Float32 tensor; the mapping acts on the last axis.
        alpha: Entmax α > 1.
        n_iter: Bisection steps when α is neither 1.5 nor 2.

    Returns:
        Probabilities on the simplex, same shape as `logits`.
    """
    alpha = validate_entmax_alpha(alpha)
    if alpha == 2.0:
        return sparsemax_forward(logits)
    if alpha == 1.5:
        return entmax15_forward(logits)
    return entmax_bisect_forward(logits, alpha, n_iter)


def entmax(logits: tf.Tensor, alpha: float, n_iter: int = 50) -> tf.Tensor:
    """α-entmax with the fastest exact algorithm: sort-based for α ∈ {1.5, 2}, bisection otherwise.

    Args:
        logits: Float tensor; the mapping acts on the last axis.
        alpha: Entmax α > 1.
        n_iter: Bisection steps when α is neither 1.5 nor 2.

    Returns:
        Probabilities on the simplex, same shape and dtype as `logits`.

    Raises:
        ValueError: If α ≤ 1 or not finite.
    """
    alpha = validate_entmax_alpha(alpha)
    return _with_entmax_gradient(lambda z: entmax_forward(z, alpha, n_iter), alpha, logits)


@keras.saving.register_keras_serializable(package="tfscones")
class Entmax(keras.layers.Layer):
    """Keras layer applying α-entmax over the last axis.

    Args:
        alpha: Entmax α > 1: 2 is sparsemax, 1.5 entmax-1.5, other values use bisection.
        n_iter: Bisection steps for α other than 1.5 and 2.
        **kwargs: Standard layer arguments (`name`, `dtype`, ...).

    Example:
    >>> layer = Entmax(alpha=1.5)
    >>> layer(tf.constant([[3.0, 1.0, -2.0]])).numpy().round(3)
    array([[1., 0., 0.]], dtype=float32)
    """

    def __init__(self, alpha: float = 1.5, n_iter: int = 50, **kwargs):
        super().__init__(**kwargs)
        self.alpha = validate_entmax_alpha(alpha)
        self.n_iter = int(n_iter)

    def call(self, inputs):
        return entmax(inputs, self.alpha, self.n_iter)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "alpha": self.alpha, "n_iter": self.n_iter}


@keras.saving.register_keras_serializable(package="tfscones")
class Sparsemax(Entmax):
    """Keras layer applying sparsemax (α-entmax with α = 2) over the last axis.

    Args:
        **kwargs: Standard layer arguments (`name`, `dtype`, ...).
    """

    def __init__(self, **kwargs):
        kwargs.pop("alpha", None)
        super().__init__(alpha=2.0, **kwargs)


@keras.saving.register_keras_serializable(package="tfscones")
class Entmax15(Entmax):
    """Keras layer applying entmax-1.5 over the last axis.

    Args:
        **kwargs: Standard layer arguments (`name`, `dtype`, ...).
    """

    def __init__(self, **kwargs):
        kwargs.pop("alpha", None)
        super().__init__(alpha=1.5, **kwargs)
