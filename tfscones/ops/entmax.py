"""Sparse probability mappings: sparsemax, entmax-1.5 and α-entmax by bisection.

α-entmax (Peters et al. 2019; Peters & Martins 2021, eq. 4) maps logits z to the simplex:

    entmax_α(z)_i = [(α - 1) z_i - τ]_+ ^ (1 / (α - 1)),

with τ the unique threshold that makes the output sum to one. α = 2 is sparsemax, α = 1.5 is
entmax-1.5, and α → 1 recovers softmax. Tokens below the threshold get exactly zero probability.

All functions act on the last axis, compute in float32 whatever the input dtype (float16 and
bfloat16 inputs are upcast, and the result is cast back), and have closed-form gradients
(Peters et al. 2019, §3.3): with p the output and s = p^(2-α) on the support (0 elsewhere),

    ∂L/∂z = s ⊙ g - (Σ s ⊙ g / Σ s) s,        g = ∂L/∂p,

so no gradient ever flows through the sort or the bisection loop.

Sorting (or bisecting over) the full vocabulary is the costly step. Sparsemax and entmax-1.5
find τ without any sort: the logits are cut into blocks of √(8·`top_k`) consecutive entries
(`logit_blocks`), the threshold of the block maxima bounds τ from below, and only the blocks
whose maximum lies above that bound can hold the support; up to √(8·`top_k`) of them are moved
to the front of the row (`candidate_logits`, running counts by triangular products). There
`newton_threshold` finds and certifies τ, and every block left out must have its maximum at or
below τ: then every logit of the support was kept and τ is exact. Otherwise (and at once
when some row has more such blocks than there is room for) sparsemax and entmax-1.5 run
Newton's method over all logits from the same bound, a few passes, and certify each row's τ
exactly; once at most an eighth of the rows are left, those are gathered and stepped alone.
Only if that fails within `MAX_NEWTON_STEPS` steps does the batch bisect over all logits.
Other α take τ from the `top_k` (then 8·`top_k`) largest logits (`tf.math.top_k`) when every
row's support is smaller than that, and bisect over all logits otherwise.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from tfscones.ranges import BISECTION_STEPS, ENTMAX_ALPHA

DEFAULT_TOP_K = 128
"""Partial-sort size of bisection; sparsemax and entmax-1.5 take 8 times as many candidates."""

MAX_NEWTON_STEPS = 16
"""Newton steps of `newton_threshold` before sparsemax and entmax-1.5 fall back to bisection."""

GROUP_SIZE = 32
"""Blocks per group when `candidate_logits` looks for the kept blocks."""

FEW_ROWS_FRACTION = 8
"""`newton_threshold` steps the rows left uncertified alone once at most 1/8 of them are left."""

FALLBACK_BISECTION_STEPS = 50
"""Bisection steps of sparsemax and entmax-1.5 for rows Newton's method did not certify."""


def validate_entmax_alpha(alpha: float) -> float:
    """Checks that α selects a sparse entmax mapping (`tfscones.ranges.ENTMAX_ALPHA`).

    Args:
        alpha: The entmax α.

    Returns:
        α as a Python float.

    Raises:
        ValueError: If α is not a finite number greater than 1.
    """
    return ENTMAX_ALPHA.check(
        "entmax alpha",
        alpha,
        "alpha = 2 is sparsemax, alpha = 1.5 is entmax-1.5, and alpha -> 1 is softmax: use "
        "tf.nn.softmax or SoftmaxHead for that.",
    )


def validate_bisection_steps(n_iter: int) -> int:
    """Checks the number of bisection steps (`tfscones.ranges.BISECTION_STEPS`).

    Raises:
        ValueError: If `n_iter` is not a whole number in [1, 1000].
    """
    return BISECTION_STEPS.check("n_iter", n_iter)


def _as_float32(logits: tf.Tensor) -> tf.Tensor:
    return tf.cast(logits, tf.float32) if logits.dtype != tf.float32 else logits


def _is_sort_based(alpha: float) -> bool:
    return alpha in (1.5, 2.0)


def _sparsemax_threshold(z_sorted: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
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


def _entmax15_threshold(halved_sorted: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Entmax-1.5 threshold τ and support size from descending-sorted halved logits z/2.

    Exact sort-based algorithm of Peters et al. (2019, Alg. 2): for each candidate support size
    k, τ_k = mean_k - sqrt((1 - k·var_k) / k) solves Σ_{i≤k} (z_(i)/2 - τ)² = 1, and the support
    is the largest k with τ_k ≤ z_(k)/2. Computed relative to the largest value for precision.
    """
    shift = halved_sorted[..., :1]
    shifted = halved_sorted - shift
    ranks = tf.range(1, tf.shape(shifted)[-1] + 1, dtype=shifted.dtype)
    mean = tf.cumsum(shifted, axis=-1) / ranks
    mean_of_squares = tf.cumsum(tf.square(shifted), axis=-1) / ranks
    scaled_variance = ranks * (mean_of_squares - tf.square(mean))
    delta = tf.nn.relu((1.0 - scaled_variance) / ranks)
    tau_candidates = mean - tf.sqrt(delta)
    support_size = tf.reduce_sum(tf.cast(tau_candidates <= shifted, tf.int32), -1, keepdims=True)
    tau = tf.gather(tau_candidates, support_size - 1, batch_dims=shifted.shape.rank - 1)
    return tau + shift, support_size


def _bisection_threshold(scaled: tf.Tensor, alpha: float, n_iter: int):
    """α-entmax threshold by bisection on x = (α - 1) z (any order), and the support size.

    With d values, τ lies in [max(x) - 1, max(x) - (1/d)^(α-1)]: the first bound gives the
    largest entry probability 1, the second gives every entry at most 1/d. `n_iter` halvings of
    that bracket locate τ (the entmax package's algorithm, Blondel et al. 2019); the loop stops
    earlier once halving no longer changes τ in float32.
    """
    exponent = 1.0 / (alpha - 1.0)
    num_values = tf.cast(tf.shape(scaled)[-1], scaled.dtype)
    tau_low = tf.reduce_max(scaled, axis=-1, keepdims=True) - 1.0
    width = tf.broadcast_to(1.0 - tf.pow(1.0 / num_values, alpha - 1.0), tf.shape(tau_low))

    def bisection_step(step, tau_low, width):
        width = 0.5 * width
        tau_mid = tau_low + width
        mass = tf.reduce_sum(tf.pow(tf.nn.relu(scaled - tau_mid), exponent), -1, keepdims=True)
        return step + 1, tf.where(mass >= 1.0, tau_mid, tau_low), width

    def can_progress(step, tau_low, width):
        return (step < n_iter) & tf.reduce_any(tau_low + 0.5 * width != tau_low)

    _, tau, _ = tf.while_loop(can_progress, bisection_step, (tf.constant(0), tau_low, width))
    return tau, support_size(scaled, tau)


def support_size(scaled: tf.Tensor, tau: tf.Tensor) -> tf.Tensor:
    """How many entries of each row have non-zero α-entmax probability: x_j = (α - 1) z_j > τ.

    Args:
        scaled: float32 `[..., V]`, the logits times α - 1.
        tau: Thresholds `[..., 1]` on that scale (`entmax_statistics`).

    Returns:
        int32 `[..., 1]`.
    """
    return tf.reduce_sum(tf.cast(scaled > tau, tf.int32), axis=-1, keepdims=True)


def newton_threshold(
    logits: tf.Tensor, alpha: float, max_steps: int = MAX_NEWTON_STEPS, start=None
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Exact sparsemax or entmax-1.5 threshold by Newton's method over unsorted logits.

    With x = (α - 1) z, τ solves g(τ) = Σ_i [x_i - τ]_+^(1/(α-1)) = 1 (the normalisation of
    Peters & Martins 2021, eq. 4): g(τ) = Σ [x_i - τ]_+ for sparsemax and Σ [x_i - τ]_+² for
    entmax-1.5. Newton's method runs on φ = g - 1 for sparsemax (Michelot's algorithm) and on
    φ = √g - 1 for entmax-1.5 (√g is the Euclidean norm of the [x_i - τ]_+, so convex, and nearly
    linear when many logits are close, where Newton on g would only halve the distance each
    step). Both φ are convex and decreasing below max x, so every step from t_0 = max x - 1 ≤ τ
    stays at or below τ and approaches it; so does every step from any other t_0 ≤ τ (`start`).
    A start above τ by rounding does no harm: its candidate is certified at once when no logit
    lies between τ and t_0, and otherwise the first step, by convexity, lands below τ.

    Each step also certifies its candidate: with S = {i : x_i > t} (k entries), τ_S solves
    Σ_{i∈S} (x_i - τ_S)^(1/(α-1)) = 1 in closed form (the τ_k of the sort-based algorithms,
    Martins & Astudillo 2016, eq. 5-6; Peters et al. 2019, Alg. 2; for entmax-1.5 the smaller
    root of the quadratic, written without cancellation). If {i : x_i > τ_S} = S as
    well, then g(τ_S) = 1, so τ_S is the threshold, exactly as the sort-based algorithm would
    find it. A row keeps the first certified τ_S. For entmax-1.5 that candidate is computed
    relative to t, so when t is far below τ (hundreds of nearly equal logits) it carries float32
    cancellation of order 1e-6; `entmax_statistics` refines it on the certified support.
    Every step passes over all rows until at most 1/`FEW_ROWS_FRACTION` of them (or one) are
    left uncertified; those are then gathered and stepped alone (`_newton_on_few_rows`).

    Args:
        logits: float32 logits `[..., V]`, any order.
        alpha: 1.5 or 2.
        max_steps: Newton steps before giving up.
        start: Optional starting points t_0 ≤ τ `[..., 1]` on the scale of (α - 1) z; by default
            max (α - 1) z - 1.

    Returns:
        `(tau, support_size, certified)`, each `[..., 1]`: τ on the scale of (α - 1) z, the
        support size, and whether the row's τ was certified (rows that were not hold their
        last Newton iterate, a lower bound of τ up to rounding).
    """
    scaled = (alpha - 1.0) * logits
    if start is None:
        start = tf.reduce_max(scaled, axis=-1, keepdims=True) - 1.0
    rows = tf.reshape(scaled, [-1, scaled.shape[-1] or tf.shape(scaled)[-1]])
    row_count = tf.shape(rows)[0]
    flat_start = tf.reshape(start, [-1, 1])
    no_support = tf.zeros_like(flat_start, tf.int32)
    state = (flat_start, flat_start, no_support, tf.zeros_like(flat_start, tf.bool))
    capacity = row_count // FEW_ROWS_FRACTION + 1

    def many_left(step, certified):
        uncertified = tf.reduce_sum(tf.cast(~certified, tf.int32))
        return (step < max_steps) & (uncertified > capacity)

    step, state = _newton_loop(rows, alpha, state, tf.constant(0), max_steps, many_left)
    if rows.shape[0] != 0:  # XLA cannot gather from no rows, even in a branch never taken
        state = tf.cond(
            tf.reduce_all(state[-1]),
            lambda: state,
            lambda: _newton_on_few_rows(rows, alpha, state, step, max_steps, capacity),
        )
    point, tau, support_size, certified = (tf.reshape(value, tf.shape(start)) for value in state)
    return tf.where(certified, tau, point), support_size, certified


def _newton_loop(scaled, alpha, state, step, max_steps, carry_on):
    """Newton steps of `newton_threshold` on rows `scaled` while `carry_on(step, certified)`.

    Args:
        scaled: float32 `[rows, V]`, the logits times (α - 1).
        alpha: 1.5 or 2.
        state: `(point, tau, support_size, certified)`, each `[rows, 1]`.
        step: Steps taken so far, a scalar int32 tensor.
        max_steps: The step after which the loop stops in any case.
        carry_on: Called with the step and `certified`; False stops the loop.

    Returns:
        `(step, state)` after the last step.
    """

    def newton_step(step, point, tau, support_size, certified):
        above_point = scaled - point
        in_set = above_point > 0.0
        excess = tf.nn.relu(above_point)
        count = tf.reduce_sum(tf.cast(in_set, tf.float32), axis=-1, keepdims=True)
        excess_sum = tf.reduce_sum(excess, axis=-1, keepdims=True)
        if alpha == 2.0:
            offset = (excess_sum - 1.0) / count
            solvable = tf.ones_like(certified)
            next_point = point + offset
        else:
            squares_sum = tf.reduce_sum(tf.square(excess), axis=-1, keepdims=True)
            discriminant = tf.square(excess_sum) - count * (squares_sum - 1.0)
            solvable = discriminant >= 0.0
            offset = (squares_sum - 1.0) / (excess_sum + tf.sqrt(tf.nn.relu(discriminant)))
            norm = tf.sqrt(squares_sum)
            next_point = point + (norm - 1.0) * norm / excess_sum
        count_above_offset = tf.reduce_sum(
            tf.cast(above_point > offset, tf.float32), axis=-1, keepdims=True
        )
        newly = solvable & tf.equal(count_above_offset, count) & ~certified
        tau = tf.where(newly, point + offset, tau)
        support_size = tf.where(newly, tf.cast(count, tf.int32), support_size)
        certified |= newly
        return step + 1, tf.where(certified, point, next_point), tau, support_size, certified

    def go_on(step, point, tau, support_size, certified):
        return carry_on(step, certified)

    step, *state = tf.while_loop(go_on, newton_step, (step, *state))
    return step, tuple(state)


def _newton_on_few_rows(scaled, alpha, state, step, max_steps, capacity):
    """Newton steps of `newton_threshold` on the (at most `capacity`) rows still uncertified.

    Late steps certify a few rows, and a step costs a pass over every row; so the rows left are
    gathered (`first_marked_rows`, no sort) and stepped alone, then put back in `state`.
    """
    positions, filled = first_marked_rows(~state[-1][:, 0], capacity)
    point, tau, support_size, certified = (tf.gather(value, positions) for value in state)
    few_state = (point, tau, support_size, certified | ~filled[:, tf.newaxis])

    def any_left(step, certified):
        return (step < max_steps) & ~tf.reduce_all(certified)

    _, few_state = _newton_loop(
        tf.gather(scaled, positions), alpha, few_state, step, max_steps, any_left
    )
    # Unfilled slots repeat a real row's position; they write to an extra row, dropped after.
    row_count = tf.shape(scaled)[0]
    targets = tf.where(filled, positions, row_count)[:, tf.newaxis]
    return tuple(
        tf.tensor_scatter_nd_update(tf.concat([value, value[:1]], 0), targets, update)[:-1]
        for value, update in zip(state, few_state, strict=True)
    )


def first_marked_rows(marked: tf.Tensor, capacity) -> tuple[tf.Tensor, tf.Tensor]:
    """The positions of the first `capacity` marked rows, without a sort.

    Args:
        marked: bool `[rows]`.
        capacity: How many positions to return, a scalar int32.

    Returns:
        `(positions, filled)`, each `[capacity]`: the j-th marked row's position, and whether
        there are j marked rows (positions beyond that repeat the last row).
    """
    running = tf.cumsum(tf.cast(marked, tf.int32))
    ordinals = tf.range(1, capacity + 1)[:, tf.newaxis]
    positions = tf.reduce_sum(tf.cast(running[tf.newaxis, :] < ordinals, tf.int32), axis=-1)
    row_count = tf.shape(marked)[0]
    return tf.minimum(positions, tf.maximum(row_count - 1, 0)), positions < row_count


def _statistics_from_threshold(logits, tau, support_size, alpha):
    """τ, Σ p_j z_j and Σ p_j^α from a certified sparsemax or entmax-1.5 threshold, in one pass.

    With u = [(α - 1) z - τ]_+ and Σ p = 1: for sparsemax p = u, so p·z = Σ u² + τ and
    Σ p² = Σ u². For entmax-1.5, τ is first refined on its certified support S (k entries): a
    candidate computed far from τ carries float32 cancellation, and with a = Σ u, b = Σ u² the
    exact τ + δ solves Σ_S (u - δ)² = 1, δ = (b - 1)/(a + √(a² - k(b - 1))); then p = (u - δ)²
    and z = 2(u - δ + τ + δ) on S give Σ p^1.5 = Σ (u - δ)³ and p·z = 2(Σ p^1.5 + τ + δ).
    """
    excess = tf.nn.relu((alpha - 1.0) * logits - tau)
    squares_sum = tf.reduce_sum(tf.square(excess), axis=-1, keepdims=True)
    if alpha == 2.0:
        return tau, squares_sum + tau, squares_sum
    excess_sum = tf.reduce_sum(excess, axis=-1, keepdims=True)
    cubes_sum = tf.reduce_sum(excess * tf.square(excess), axis=-1, keepdims=True)
    count = tf.cast(support_size, tf.float32)
    discriminant = tf.nn.relu(tf.square(excess_sum) - count * (squares_sum - 1.0))
    shift = (squares_sum - 1.0) / (excess_sum + tf.sqrt(discriminant))
    power_sum = cubes_sum - shift * (3.0 * squares_sum - shift * (3.0 * excess_sum - count * shift))
    tau += shift
    return tau, 2.0 * (power_sum + tau), power_sum


def logit_blocks(logits: tf.Tensor, block_size: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Rows cut into blocks of `block_size` consecutive logits, and each block's maximum.

    Args:
        logits: float32 `[rows, V]`, V static.
        block_size: Logits per block; the last block is padded with -inf.

    Returns:
        `(blocks, block_maxima)`: `[rows, ⌈V / block_size⌉, block_size]` and
        `[rows, ⌈V / block_size⌉]`.
    """
    vocab_size = logits.shape[-1]
    count = -(-vocab_size // block_size)
    if count * block_size > vocab_size:
        padding = [[0, 0], [0, count * block_size - vocab_size]]
        logits = tf.pad(logits, padding, constant_values=-math.inf)
    blocks = tf.reshape(logits, [-1, count, block_size])
    return blocks, tf.reduce_max(blocks, axis=-1)


def candidate_logits(
    blocks: tf.Tensor, keep: tf.Tensor, capacity: int
) -> tuple[tf.Tensor, tf.Tensor]:
    """The blocks marked `keep`, moved to the front of each row, without a sort.

    The i-th kept block of a row is the first whose running count of kept blocks reaches i,
    found group by group (`_running_count`), so neither TensorFlow nor XLA sorts anything: an
    XLA computation on a CPU that holds a sort or top-k anywhere compiles the random numbers of
    dropout into loops tens of times slower (`benchmarks.xla_sort_with_dropout`), which made an
    entmax training step three times slower.

    Args:
        blocks: float32 `[rows, blocks, block_size]`, from `logit_blocks`.
        keep: bool `[rows, blocks]`, the blocks to keep.
        capacity: How many blocks a row can keep; rows with more keep their first `capacity`.

    Returns:
        `(candidates, kept)`: the logits of the kept blocks `[rows, capacity · block_size]`,
        -inf where a row keeps fewer blocks, and whether each block was kept `[rows, blocks]`
        (`keep` less the blocks beyond a row's `capacity`).
    """
    block_count = blocks.shape[1]
    running = _running_count(keep)
    ordinals = tf.range(1, capacity + 1, dtype=running.dtype)[:, tf.newaxis]
    group_ends = running[:, tf.newaxis, :, -1]
    group = tf.reduce_sum(tf.cast(group_ends < ordinals, tf.int32), axis=-1)
    filled = group < running.shape[1]
    group = tf.minimum(group, running.shape[1] - 1)
    in_group = tf.gather(running, group, batch_dims=1)
    offset = tf.reduce_sum(tf.cast(in_group < ordinals, tf.int32), axis=-1)
    positions = tf.minimum(group * GROUP_SIZE + offset, block_count - 1)
    candidates = tf.gather(blocks, positions, batch_dims=1)
    candidates = tf.where(filled[..., tf.newaxis], candidates, -math.inf)
    running = tf.reshape(running, [-1, running.shape[1] * GROUP_SIZE])[:, :block_count]
    kept = keep & (running <= capacity)
    return tf.reshape(candidates, [-1, capacity * blocks.shape[-1]]), kept


def _running_count(keep: tf.Tensor) -> tf.Tensor:
    """How many blocks up to and including each one are kept, per row: float32 `[rows, G, 32]`.

    The blocks are taken in groups of `GROUP_SIZE` (the last padded with blocks not kept); a
    product with a triangular matrix of ones counts within each group and another adds the
    groups before. Counts stay far below 2^24, so float32 holds them exactly. XLA on a CPU runs
    `tf.cumsum` as a windowed reduction, several times slower.
    """
    block_count = keep.shape[1]
    groups = -(-block_count // GROUP_SIZE)
    keep = tf.pad(keep, [[0, 0], [0, groups * GROUP_SIZE - block_count]])
    counts = tf.reshape(tf.cast(keep, tf.float32), [-1, groups, GROUP_SIZE])
    within = tf.einsum("rgb,bc->rgc", counts, _triangle_of_ones(GROUP_SIZE, strict=False))
    before = tf.einsum("rg,gh->rh", within[..., -1], _triangle_of_ones(groups, strict=True))
    return within + before[..., tf.newaxis]


def _triangle_of_ones(size: int, strict: bool) -> tf.Tensor:
    """`[size, size]` float32 with ones where row < column (or ≤ unless `strict`)."""
    rows, columns = tf.meshgrid(tf.range(size), tf.range(size), indexing="ij")
    return tf.cast(rows < columns if strict else rows <= columns, tf.float32)


def _block_maxima_threshold(block_maxima: tf.Tensor, alpha: float) -> tf.Tensor:
    """A lower bound of τ (on the scale of (α - 1) z): the threshold of the block maxima.

    τ solves Σ_i [x_i - τ]_+^(1/(α-1)) = 1 (Peters & Martins 2021, eq. 4), and the sum only
    grows when logits are added, so the threshold of a subset of the logits lies at or below
    that of the whole row. Newton's method (`newton_threshold`) approaches it from below; rows
    it does not certify keep their last iterate, a looser bound.
    """
    return newton_threshold(block_maxima, alpha, MAX_NEWTON_STEPS)[0]


def _candidate_statistics(logits, alpha, count, otherwise):
    """`_statistics_from_threshold` on candidate logits when they certify τ, else `otherwise`.

    The logits are cut into blocks of b = ⌊√count⌋ (`logit_blocks`), and τ_b, the threshold of
    the block maxima, bounds τ from below (`_block_maxima_threshold`). Only blocks whose
    maximum lies above τ_b can hold a logit of the support; up to ⌊count / b⌋ of them are kept
    (`candidate_logits`) and Newton's method (`newton_threshold`) runs on their logits from
    τ_b. The candidates' τ is that of the whole row when every block left out has its maximum
    at or below τ: the logits left out then get probability zero and add nothing to the sum.
    A row with more blocks above τ_b than there is room for almost never certifies its
    candidates (the blocks are kept in order, not by their maxima), so then the whole batch
    goes to `otherwise` without trying them.

    Args:
        logits: float32 `[..., V]`.
        alpha: 1.5 or 2.
        count: About how many candidate logits to keep per row.
        otherwise: Called with the rows `[rows, V]` and τ_b `[rows, 1]` when some row is not
            certified; returns the statistics `[rows, 1]` each.
    """
    rows = tf.reshape(logits, [-1, logits.shape[-1]])
    block_size = math.isqrt(count)
    capacity = count // block_size
    blocks, block_maxima = logit_blocks(rows, block_size)
    floor = _block_maxima_threshold(block_maxima, alpha)
    keep = (alpha - 1.0) * block_maxima > floor

    def from_candidates():
        candidates, kept = candidate_logits(blocks, keep, capacity)
        tau, support_size, certified = newton_threshold(candidates, alpha, MAX_NEWTON_STEPS, floor)
        left_out = tf.reduce_max(tf.where(kept, -math.inf, block_maxima), axis=-1, keepdims=True)
        certified &= (alpha - 1.0) * left_out <= tau
        return tf.cond(
            tf.reduce_all(certified),
            lambda: _statistics_from_threshold(candidates, tau, support_size, alpha),
            lambda: otherwise(rows, floor),
        )

    kept_blocks = tf.reduce_sum(tf.cast(keep, tf.int32), axis=-1)
    statistics = tf.cond(
        tf.reduce_all(kept_blocks <= capacity), from_candidates, lambda: otherwise(rows, floor)
    )
    shape = tf.concat([tf.shape(logits)[:-1], [1]], axis=0)
    return tuple(tf.reshape(value, shape) for value in statistics)


def _threshold(values: tf.Tensor, alpha: float, n_iter: int):
    """τ (on the scale of (α - 1) z) and support size from values sorted largest first."""
    if alpha == 2.0:
        return _sparsemax_threshold(values)
    if alpha == 1.5:
        return _entmax15_threshold(0.5 * values)
    return _bisection_threshold((alpha - 1.0) * values, alpha, n_iter)


def _unnormalised_from_threshold(logits, tau, alpha):
    shifted = tf.nn.relu((alpha - 1.0) * logits - tau)
    if alpha == 2.0:
        return shifted
    if alpha == 1.5:
        return tf.square(shifted)
    return tf.pow(shifted, 1.0 / (alpha - 1.0))


def _power(probabilities, alpha):
    """Σ-ready p^α for p ≥ 0, with the cheap special cases α ∈ {1.5, 2}."""
    if alpha == 2.0:
        return tf.square(probabilities)
    if alpha == 1.5:
        return probabilities * tf.sqrt(probabilities)
    return tf.where(probabilities > 0, tf.pow(probabilities, alpha), tf.zeros_like(probabilities))


def _support_statistics(values, alpha, n_iter):
    """Per row: τ, Σ p_j z_j and Σ p_j^α, from values that hold every row's whole support."""
    tau, support_size = _threshold(values, alpha, n_iter)
    probabilities = _unnormalised_from_threshold(values, tau, alpha)
    if not _is_sort_based(alpha):
        probabilities /= tf.reduce_sum(probabilities, axis=-1, keepdims=True)
    return _statistics_of(values, tau, probabilities, alpha), support_size


def _statistics_of(values, tau, probabilities, alpha):
    """`(τ, Σ p_j z_j, Σ p_j^α)` of probabilities on the simplex, each `[..., 1]`."""
    return (
        tau,
        tf.reduce_sum(probabilities * values, axis=-1, keepdims=True),
        tf.reduce_sum(_power(probabilities, alpha), axis=-1, keepdims=True),
    )


def entmax_statistics(
    logits: tf.Tensor, alpha: float, n_iter: int = 50, top_k: int | None = DEFAULT_TOP_K
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Threshold τ, p·z and Σ p^α of α-entmax, per row, from a subset of logits when it suffices.

    For α ∈ {1.5, 2}, τ comes from `newton_threshold` on the 8·`top_k` `candidate_logits` of
    every row (exact when it certifies that the support lies among them), else from
    `newton_threshold` over all logits (a few passes, no sort), and if some row is not certified
    within `MAX_NEWTON_STEPS` steps, by bisection over all logits; none of these sorts (`top_k`
    None sorts all logits). For other α the statistics come from
    the `top_k` largest logits (`tf.math.top_k`) when every support is smaller than `top_k`, else
    from the `8 * top_k` largest, and else by bisection over all logits.

    Args:
        logits: float32 logits `[..., V]`.
        alpha: Entmax α > 1.
        n_iter: Bisection steps for α ∉ {1.5, 2}.
        top_k: Partial-sort size (8·`top_k` candidates for α ∈ {1.5, 2}); None always uses all
            logits.

    Returns:
        `(tau, p_dot_logits, power_sum)`, each `[..., 1]`; τ is on the scale of (α - 1) z, so
        that p = [(α - 1) z - τ]_+^(1/(α-1)) (up to normalisation for bisection).
    """

    def from_all_logits():
        values = tf.sort(logits, direction="DESCENDING") if _is_sort_based(alpha) else logits
        return _support_statistics(values, alpha, n_iter)[0]

    def from_largest(k, otherwise):
        def statistics():
            largest = tf.math.top_k(logits, k=k, sorted=True).values
            result, support_size = _support_statistics(largest, alpha, n_iter)
            return tf.cond(tf.reduce_all(support_size < k), lambda: result, otherwise)

        return statistics

    vocab_size = logits.shape[-1]
    if top_k is None or vocab_size is None or (_is_sort_based(alpha) and top_k >= vocab_size):
        return from_all_logits()
    if _is_sort_based(alpha):
        if 8 * top_k < vocab_size:
            return _candidate_statistics(
                logits, alpha, 8 * top_k, lambda rows, floor: _newton_statistics(rows, alpha, floor)
            )
        return _newton_statistics(logits, alpha)
    statistics = from_all_logits
    for k in reversed(partial_sort_sizes(top_k, vocab_size)):
        statistics = from_largest(k, statistics)
    return statistics()


def _newton_statistics(logits, alpha, start=None):
    """Sparsemax or entmax-1.5 statistics from `newton_threshold` over all logits.

    Rows it does not certify within `MAX_NEWTON_STEPS` steps (none has been seen outside
    tests) take τ by bisection instead (`_bisection_statistics`), which needs no sort either.
    """
    tau, support_size, certified = newton_threshold(logits, alpha, MAX_NEWTON_STEPS, start)
    return tf.cond(
        tf.reduce_all(certified),
        lambda: _statistics_from_threshold(logits, tau, support_size, alpha),
        lambda: _bisection_statistics(logits, alpha),
    )


def _bisection_statistics(logits, alpha):
    """τ, Σ p_j z_j and Σ p_j^α with τ by bisection over all logits, p normalised to sum 1."""
    tau, _ = _bisection_threshold((alpha - 1.0) * logits, alpha, FALLBACK_BISECTION_STEPS)
    probabilities = _unnormalised_from_threshold(logits, tau, alpha)
    probabilities /= tf.reduce_sum(probabilities, axis=-1, keepdims=True)
    return _statistics_of(logits, tau, probabilities, alpha)


def partial_sort_sizes(top_k: int, vocab_size: int) -> list[int]:
    """The partial-sort sizes bisection tries in turn before all logits: k, then 8k, below |V|."""
    return [k for k in (top_k, 8 * top_k) if k < vocab_size]


def probabilities_from_threshold(logits: tf.Tensor, tau: tf.Tensor, alpha: float) -> tf.Tensor:
    """α-entmax probabilities [(α - 1) z - τ]_+^(1/(α-1)) for a threshold from `entmax_statistics`.

    Args:
        logits: float32 logits `[..., V]`.
        tau: Thresholds `[..., 1]`.
        alpha: Entmax α > 1.

    Returns:
        Probabilities `[..., V]`; renormalised to sum to one when τ came from bisection.
    """
    probabilities = _unnormalised_from_threshold(logits, tau, alpha)
    if not _is_sort_based(alpha):
        probabilities /= tf.reduce_sum(probabilities, axis=-1, keepdims=True)
    return probabilities


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


def entmax_forward(
    logits: tf.Tensor, alpha: float, n_iter: int = 50, top_k: int | None = DEFAULT_TOP_K
) -> tf.Tensor:
    """α-entmax of float32 logits with the fastest exact algorithm, without a custom gradient.

    Sort-based for α ∈ {1.5, 2} (Peters et al. 2019, Alg. 2; Martins & Astudillo 2016), or their
    certified Newton thresholds on candidate logits; bisection otherwise, on the `top_k` largest
    logits when every support fits there (`entmax_statistics`).

    Args:
        logits: float32 logits; the mapping acts on the last axis.
        alpha: Entmax α > 1.
        n_iter: Bisection steps when α is neither 1.5 nor 2.
        top_k: Partial-sort size (8·`top_k` candidates for α ∈ {1.5, 2}); None always uses all
            logits.

    Returns:
        Probabilities on the simplex, same shape as `logits`.
    """
    alpha = validate_entmax_alpha(alpha)
    tau = entmax_statistics(logits, alpha, n_iter, top_k)[0]
    return probabilities_from_threshold(logits, tau, alpha)


def _with_entmax_gradient(alpha, n_iter, top_k, logits):
    """α-entmax in float32 with the closed-form gradient, returned in the input dtype."""
    logits = tf.convert_to_tensor(logits)
    input_dtype = logits.dtype

    @tf.custom_gradient
    def mapping(z):
        probabilities = entmax_forward(_as_float32(z), alpha, n_iter, top_k)

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
        top_k: 8·`top_k` candidate logits for long last axes (`entmax_statistics`); None always
            sorts fully. The result is exact either way.

    Returns:
        Probabilities on the simplex, same shape and dtype as `logits`, with exact zeros.

    Example:
    >>> sparsemax(tf.constant([[2.0, 1.0, -1.0]])).numpy()
    array([[1., 0., 0.]], dtype=float32)
    """
    return _with_entmax_gradient(2.0, 0, top_k, logits)


def entmax15(logits: tf.Tensor, top_k: int | None = DEFAULT_TOP_K) -> tf.Tensor:
    """Entmax-1.5 over the last axis (α-entmax with α = 1.5; exact sort-based algorithm).

    Args:
        logits: Float tensor of any rank; the mapping acts on the last axis.
        top_k: 8·`top_k` candidate logits for long last axes (`entmax_statistics`); None always
            sorts fully. The result is exact either way.

    Returns:
        Probabilities on the simplex, same shape and dtype as `logits`, with exact zeros.
    """
    return _with_entmax_gradient(1.5, 0, top_k, logits)


def entmax_bisect(
    logits: tf.Tensor, alpha: float = 1.5, n_iter: int = 50, top_k: int | None = DEFAULT_TOP_K
) -> tf.Tensor:
    """α-entmax over the last axis for any α > 1, by bisection on the threshold.

    Args:
        logits: Float tensor of any rank; the mapping acts on the last axis.
        alpha: Entmax α > 1 (2 is sparsemax, 1.5 entmax-1.5; values near 1 approach softmax).
        n_iter: Bisection steps; each halves the threshold's bracket (50 reaches float32 precision).
        top_k: Bisect over the `top_k` largest logits when every support fits there (exact);
            None always bisects over all logits.

    Returns:
        Probabilities on the simplex, same shape and dtype as `logits`.

    Raises:
        ValueError: If α ≤ 1 or not finite, or `n_iter` is not in [1, 1000].
    """
    alpha, n_iter = validate_entmax_alpha(alpha), validate_bisection_steps(n_iter)
    if _is_sort_based(alpha):
        alpha = math.nextafter(alpha, math.inf)  # keep the bisection algorithm
    return _with_entmax_gradient(alpha, n_iter, top_k, logits)


def entmax(
    logits: tf.Tensor, alpha: float, n_iter: int = 50, top_k: int | None = DEFAULT_TOP_K
) -> tf.Tensor:
    """α-entmax with the fastest exact algorithm: sort-based for α ∈ {1.5, 2}, bisection otherwise.

    Args:
        logits: Float tensor; the mapping acts on the last axis.
        alpha: Entmax α > 1.
        n_iter: Bisection steps when α is neither 1.5 nor 2.
        top_k: Partial-sort size (8·`top_k` candidates for α ∈ {1.5, 2}); None always uses all
            logits. The result is exact either way.

    Returns:
        Probabilities on the simplex, same shape and dtype as `logits`.

    Raises:
        ValueError: If α ≤ 1 or not finite, or `n_iter` is not in [1, 1000].
    """
    alpha, n_iter = validate_entmax_alpha(alpha), validate_bisection_steps(n_iter)
    return _with_entmax_gradient(alpha, n_iter, top_k, logits)


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
        self.n_iter = validate_bisection_steps(n_iter)

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
