import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tfscones.heads.entmax import entmax_token_loss
from tfscones.ops import entmax as ops


def random_logits(shape, scale=2.0, seed=0):
    return tf.constant(np.random.default_rng(seed).normal(size=shape) * scale, tf.float32)


def test_sparsemax_matches_hand_computed_values():
    # Sorted z = (0.5, 0.3, 0.1): all three satisfy 1 + k z_(k) > Σ_{j<=k} z_(j), so
    # τ = (0.9 - 1) / 3 and p = z - τ.
    probabilities = ops.sparsemax(tf.constant([[0.5, 0.3, 0.1], [2.0, 1.0, -1.0]]))
    tau = (0.9 - 1.0) / 3.0
    expected = [[0.5 - tau, 0.3 - tau, 0.1 - tau], [1.0, 0.0, 0.0]]
    np.testing.assert_allclose(probabilities, expected, atol=1e-6)


def test_entmax15_matches_hand_computed_values():
    # z/2 = (0.5, 0, -5); with support {1, 2}, (0.5 - τ)² + τ² = 1 gives 2τ² - τ - 0.75 = 0.
    tau = (1.0 - np.sqrt(7.0)) / 4.0
    expected = [(0.5 - tau) ** 2, tau**2, 0.0]
    probabilities = ops.entmax15(tf.constant([1.0, 0.0, -10.0]))
    np.testing.assert_allclose(probabilities, expected, atol=1e-6)


@pytest.mark.parametrize("shape", [(7,), (4, 9), (2, 3, 33)])
@pytest.mark.parametrize(
    "mapping",
    [ops.sparsemax, ops.entmax15, lambda z: ops.entmax_bisect(z, 1.3)],
    ids=["sparsemax", "entmax15", "bisect-1.3"],
)
def test_outputs_lie_on_the_simplex(mapping, shape):
    probabilities = mapping(random_logits(shape)).numpy()
    assert probabilities.shape == shape
    assert (probabilities >= 0).all()
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)


def test_sparse_mappings_produce_exact_zeros():
    logits = random_logits((8, 50), scale=3.0)
    assert (ops.sparsemax(logits).numpy() == 0).any()
    assert (ops.entmax15(logits).numpy() == 0).any()


@pytest.mark.parametrize("mapping, alpha", [(ops.sparsemax, 2.0), (ops.entmax15, 1.5)])
def test_sort_based_algorithms_equal_bisection(mapping, alpha):
    logits = random_logits((16, 40), seed=1)
    np.testing.assert_allclose(
        mapping(logits), ops.entmax_bisect(logits, alpha, n_iter=80), atol=1e-5
    )


def test_alpha_near_one_approaches_softmax():
    logits = random_logits((4, 12), seed=2)
    distance_far = np.abs(ops.entmax_bisect(logits, 1.5) - tf.nn.softmax(logits)).max()
    distance_near = np.abs(ops.entmax_bisect(logits, 1.001) - tf.nn.softmax(logits)).max()
    assert distance_near < 2e-3 < distance_far


@pytest.mark.parametrize("alpha", [1.0, 0.5, -2.0, float("nan"), float("inf")])
def test_alpha_at_most_one_is_rejected_with_a_pointer_to_softmax(alpha):
    with pytest.raises(ValueError, match=r"alpha must be a finite number in \(1, inf\).*softmax"):
        ops.entmax_bisect(tf.zeros([3]), alpha)
    with pytest.raises(ValueError, match="softmax"):
        ops.Entmax(alpha=alpha)


@pytest.mark.parametrize(
    "mapping",
    [
        ops.sparsemax,
        ops.entmax15,
        lambda z: ops.entmax_bisect(z, 1.3, n_iter=60),
        lambda z: ops.entmax_bisect(z, 2.5, n_iter=60),
    ],
    ids=["sparsemax", "entmax15", "bisect-1.3", "bisect-2.5"],
)
def test_gradients_equal_finite_differences(mapping):
    logits = random_logits((3, 6), scale=1.0, seed=3)
    # A fixed random projection makes the output a scalar whose gradient mixes all entries.
    projection = random_logits((3, 6), seed=4)
    theoretical, numerical = tf.test.compute_gradient(
        lambda z: tf.reduce_sum(mapping(z) * projection, axis=-1), [logits], delta=1e-3
    )
    np.testing.assert_allclose(theoretical[0], numerical[0], atol=2e-2)


def test_gradient_is_zero_outside_the_support_and_sums_to_zero():
    logits = tf.constant([[3.0, 1.0, -1.0, 0.5]])
    upstream = tf.constant([[0.3, -1.0, 2.0, 0.7]])
    with tf.GradientTape() as tape:
        tape.watch(logits)
        probabilities = ops.entmax15(logits)
    gradient = tape.gradient(probabilities, logits, output_gradients=upstream).numpy()
    assert np.all(gradient[probabilities.numpy() == 0] == 0)
    np.testing.assert_allclose(gradient.sum(), 0.0, atol=1e-6)


@pytest.mark.parametrize(
    "mapping, scales",
    [
        (ops.sparsemax, (5.0, 0.1, 0.01)),
        (ops.entmax15, (5.0, 0.5, 0.05)),
        (lambda z, top_k: ops.entmax_bisect(z, 1.25, top_k=top_k), (30.0, 3.0, 0.01)),
    ],
    ids=["sparsemax", "entmax15", "bisect-1.25"],
)
def test_partial_sort_equals_full_sort_at_every_fallback_level(mapping, scales):
    # top_k = 8 on 300 logits: bisection tries the 8 largest, then the 64 largest, then all 300;
    # sparsemax and entmax-1.5 try at most 64 candidates (8 blocks of 8), then Newton's method
    # over all 300. The scales give supports that fit in 8, fit in 64 but not 8, and
    # exceed 64.
    assert ops.partial_sort_sizes(8, 300) == [8, 64]
    support_bounds = [(0, 8), (8, 64), (64, 301)]
    for scale, (low, high) in zip(scales, support_bounds, strict=True):
        logits = random_logits((6, 300), scale=scale, seed=5)
        full = mapping(logits, top_k=None)
        supports = (full.numpy() > 0).sum(-1)
        assert supports.max() >= low and supports.max() < high
        partial = mapping(logits, top_k=8)
        np.testing.assert_allclose(partial, full, atol=1e-6)
        np.testing.assert_allclose(partial.numpy().sum(-1), 1.0, atol=1e-5)


def test_logit_blocks_pad_the_last_block_with_negative_infinity():
    logits = tf.constant([[0.0, 5.0, 1.0, 1.0, 7.0]])
    blocks, block_maxima = ops.logit_blocks(logits, 2)
    np.testing.assert_array_equal(blocks, [[[0.0, 5.0], [1.0, 1.0], [7.0, -np.inf]]])
    np.testing.assert_array_equal(block_maxima, [[5.0, 1.0, 7.0]])


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_candidate_logits_move_the_kept_blocks_to_the_front(jit_compile):
    # Blocks of 2; the first row keeps blocks 1 and 3 (of 4), the second keeps all four but
    # has room for 3, the third keeps none.
    blocks = tf.reshape(tf.range(24, dtype=tf.float32), [3, 4, 2])
    keep = tf.constant([[False, True, False, True], [True] * 4, [False] * 4])
    select = tf.function(lambda b, k: ops.candidate_logits(b, k, 3), jit_compile=jit_compile)
    candidates, kept = select(blocks, keep)
    inf = np.inf
    np.testing.assert_array_equal(
        candidates,
        [[2, 3, 6, 7, -inf, -inf], [8, 9, 10, 11, 12, 13], [-inf] * 6],
    )
    np.testing.assert_array_equal(
        kept, [[False, True, False, True], [True, True, True, False], [False] * 4]
    )


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_candidate_logits_find_kept_blocks_across_groups(jit_compile):
    # 100 blocks make four groups of 32, the last padded; rows keep 0 to 100 blocks, room for 40.
    rng = np.random.default_rng(21)
    blocks = tf.constant(rng.normal(size=(6, 100, 3)), tf.float32)
    keep = rng.random((6, 100)) < np.array([0.0, 0.05, 0.3, 0.5, 0.9, 1.0])[:, np.newaxis]
    select = tf.function(lambda b, k: ops.candidate_logits(b, k, 40), jit_compile=jit_compile)
    candidates, kept = select(blocks, tf.constant(keep))
    for row in range(6):
        indices = np.flatnonzero(keep[row])[:40]
        expected = np.full((40, 3), -np.inf, np.float32)
        expected[: len(indices)] = blocks.numpy()[row, indices]
        np.testing.assert_array_equal(candidates[row], expected.reshape(-1))
        np.testing.assert_array_equal(np.flatnonzero(kept[row]), indices)


@pytest.mark.parametrize("alpha", [2.0, 1.5])
@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_candidates_certify_tau_only_when_they_hold_the_support(alpha, jit_compile):
    # 64 candidates (8 blocks of 8) of 1,001 logits: spread logits have a support of a few
    # entries, which the candidates certify; nearly equal ones have a support of hundreds, so
    # the statistics come from the fallback.
    def statistics(logits):
        def fallback(rows, floor):
            return (tf.fill([tf.shape(rows)[0], 1], -123.0),) * 3

        return ops._candidate_statistics(logits, alpha, 64, fallback)

    compiled = tf.function(statistics, jit_compile=jit_compile)
    spread = random_logits((3, 2, 1001), scale=4.0, seed=18)
    expected_tau, expected_support = sorted_threshold(spread, alpha)
    assert expected_support.max() < 64
    tau, p_dot_logits, power_sum = compiled(spread)
    z = spread.numpy().astype(np.float64)
    p = np.maximum((alpha - 1.0) * z - expected_tau, 0.0) ** (1.0 / (alpha - 1.0))
    np.testing.assert_allclose(tau, expected_tau, atol=1e-6)
    np.testing.assert_allclose(p_dot_logits[..., 0], (p * z).sum(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(power_sum[..., 0], (p**alpha).sum(-1), rtol=1e-5, atol=1e-6)
    nearly_equal = random_logits((3, 2, 1001), scale=0.01, seed=19)
    assert np.all(compiled(nearly_equal)[0].numpy() == -123.0)


@pytest.mark.parametrize("mapping", [ops.sparsemax, ops.entmax15])
def test_empty_batches_of_long_rows_map_to_empty_batches(mapping):
    logits = tf.zeros([0, 3, 2000])
    assert mapping(logits).shape == (0, 3, 2000)
    assert tf.function(mapping, jit_compile=True)(logits).shape == (0, 3, 2000)


def sorted_threshold(logits, alpha):
    """τ and support size (non-zero probabilities) of the sort-based algorithm, in float64."""
    scaled, tau = harness.sort_based_entmax_threshold(logits.numpy(), alpha)
    return tau, (scaled > tau + 1e-9).sum(-1)  # a logit tied with τ gets probability 0


@pytest.mark.parametrize("alpha", [2.0, 1.5])
@pytest.mark.parametrize(
    "logits",
    [
        random_logits((4, 500), scale=0.01, seed=10),  # nearly uniform: everything in support
        random_logits((4, 500), scale=0.25, seed=11),  # a fresh model's logits
        random_logits((4, 500), scale=3.0, seed=12),
        tf.constant(np.round(np.random.default_rng(13).normal(size=(4, 500)), 1), tf.float32),
        tf.concat([tf.fill([2, 2], 5.0), random_logits((2, 298), seed=14)], axis=-1),
        tf.zeros([2, 7]),
    ],
    ids=["uniform", "fresh-model", "spread", "ties", "tied-top", "all-equal"],
)
def test_newton_threshold_certifies_the_sort_based_threshold(alpha, logits):
    tau, support, certified = ops.newton_threshold(logits, alpha)
    expected_tau, expected_support = sorted_threshold(logits, alpha)
    assert certified.numpy().all()
    np.testing.assert_array_equal(support.numpy()[..., 0], expected_support)
    # Before the refinement of `entmax_statistics`, a support of hundreds of nearly equal logits
    # certified far from τ carries float32 cancellation of order 1e-6.
    np.testing.assert_allclose(tau, expected_tau, atol=1e-5)


def test_newton_threshold_reports_rows_it_could_not_certify():
    logits = random_logits((4, 500), scale=0.25, seed=11)
    _, _, certified = ops.newton_threshold(logits, 1.5, max_steps=1)
    assert not certified.numpy().any()


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_first_marked_rows_are_found_in_order(jit_compile):
    marked = tf.constant([False, True, True, False, False, True, False])
    find = tf.function(lambda m: ops.first_marked_rows(m, 4), jit_compile=jit_compile)
    positions, filled = find(marked)
    np.testing.assert_array_equal(filled, [True, True, True, False])
    np.testing.assert_array_equal(positions[:3], [1, 2, 5])
    assert 0 <= positions[3] < 7


@pytest.mark.parametrize("alpha", [2.0, 1.5])
@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("fraction", [1, 8, 1000], ids=["all-gathered", "an-eighth", "one-row"])
def test_newton_threshold_steps_the_last_rows_alone_to_the_same_threshold(
    alpha, jit_compile, fraction, monkeypatch
):
    # 32 spread rows certify in a step or two, 4 rows of a fresh model's logits take more; those
    # are stepped alone once at most 1/`fraction` of the rows (at least one) are left.
    rows = np.concatenate(
        [random_logits((32, 500), scale=3.0, seed=22), random_logits((4, 500), 0.25, seed=23)]
    )
    logits = tf.constant(np.random.default_rng(24).permutation(rows).reshape(4, 9, 500))
    monkeypatch.setattr(ops, "FEW_ROWS_FRACTION", fraction)
    threshold = tf.function(lambda z: ops.newton_threshold(z, alpha), jit_compile=jit_compile)
    tau, support, certified = threshold(logits)
    expected_tau, expected_support = sorted_threshold(logits, alpha)
    assert certified.numpy().all()
    np.testing.assert_array_equal(support.numpy()[..., 0], expected_support)
    np.testing.assert_allclose(tau, expected_tau, atol=1e-5)


@pytest.mark.parametrize("alpha", [2.0, 1.5])
def test_statistics_fall_back_to_bisection_when_newton_gives_up(alpha, monkeypatch):
    logits = random_logits((4, 500), scale=0.25, seed=11)
    reference = ops.entmax_statistics(logits, alpha, top_k=None)
    assert not ops.newton_threshold(logits, alpha, max_steps=1)[2].numpy().all()
    monkeypatch.setattr(ops, "MAX_NEWTON_STEPS", 1)
    statistics = ops._newton_statistics(logits, alpha)
    for value, expected in zip(statistics, reference, strict=True):
        # Bisection places τ within float32 rounding of the mass Σ [x - τ]_+^(1/(α-1)).
        np.testing.assert_allclose(value, expected, atol=5e-6)


@pytest.mark.parametrize("alpha", [2.0, 1.5])
@pytest.mark.parametrize("scale", [0.01, 0.25, 3.0])
def test_newton_statistics_equal_a_float64_reference(alpha, scale):
    logits = random_logits((4, 500), scale=scale, seed=15)
    tau, p_dot_logits, power_sum = ops.entmax_statistics(logits, alpha, top_k=8)
    expected_tau, _ = sorted_threshold(logits, alpha)
    z = logits.numpy().astype(np.float64)
    p = np.maximum((alpha - 1.0) * z - expected_tau, 0.0) ** (1.0 / (alpha - 1.0))
    np.testing.assert_allclose(tau, expected_tau, atol=1e-6)
    np.testing.assert_allclose(p_dot_logits[..., 0], (p * z).sum(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(power_sum[..., 0], (p**alpha).sum(-1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mapping", [ops.sparsemax, ops.entmax15])
@pytest.mark.parametrize("scale", [0.25, 4.0], ids=["newton", "partial-sort"])
def test_compiled_mapping_and_gradient_equal_eager(mapping, scale):
    logits = random_logits((5, 400), scale=scale, seed=16)
    projection = random_logits((5, 400), seed=17)

    def value_and_gradient(z):
        with tf.GradientTape() as tape:
            tape.watch(z)
            value = tf.reduce_sum(mapping(z, top_k=32) * projection)
        return mapping(z, top_k=32), tape.gradient(value, z)

    compiled = tf.function(value_and_gradient, jit_compile=True)
    for result, expected in zip(compiled(logits), value_and_gradient(logits), strict=True):
        np.testing.assert_allclose(result, expected, atol=1e-6)


@pytest.mark.parametrize("mapping", [ops.sparsemax, ops.entmax15])
def test_partial_sort_path_compiles_with_xla(mapping):
    logits = random_logits((5, 400), scale=4.0, seed=7)
    compiled = tf.function(lambda z: mapping(z, top_k=32), jit_compile=True)
    np.testing.assert_allclose(compiled(logits), mapping(logits, top_k=None), atol=1e-6)


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16])
def test_low_precision_inputs_are_computed_in_float32(dtype):
    logits = random_logits((4, 30), seed=8)
    low = tf.cast(logits, dtype)
    reference = ops.entmax15(tf.cast(low, tf.float32))
    result = ops.entmax15(low)
    assert result.dtype == dtype
    np.testing.assert_allclose(tf.cast(result, tf.float32), reference, atol=1e-2)
    with tf.GradientTape() as tape:
        tape.watch(low)
        value = tf.reduce_sum(ops.sparsemax(low) * tf.cast(logits, dtype))
    assert tape.gradient(value, low).dtype == dtype


@pytest.mark.parametrize(
    "layer",
    [ops.Sparsemax(), ops.Entmax15(), ops.Entmax(alpha=1.7, n_iter=30)],
)
def test_layers_round_trip_through_config_and_saving(layer, tmp_path):
    clone = type(layer).from_config(layer.get_config())
    assert (clone.alpha, clone.n_iter) == (layer.alpha, layer.n_iter)
    inputs = keras.Input((10,))
    model = keras.Model(inputs, layer(keras.layers.Dense(10)(inputs)))
    path = tmp_path / "model.keras"
    model.save(path)
    restored = keras.models.load_model(path)
    batch = random_logits((3, 10), seed=9)
    np.testing.assert_allclose(model(batch), restored(batch), atol=1e-6)
    assert restored.layers[-1].alpha == layer.alpha


@pytest.mark.parametrize("alpha", [2.0, 1.5])
def test_compiled_mappings_and_losses_hold_no_sort(alpha):
    # An XLA computation on a CPU that holds a sort (top-k included) compiles dropout's random
    # numbers into loops ~25x slower, which made an entmax training step 3x slower than softmax.
    logits = random_logits((4, 3000), scale=0.25, seed=20)
    targets = tf.constant([1, 2, 3, 4])

    def loss_and_gradient(z, top_k):
        with tf.GradientTape() as tape:
            tape.watch(z)
            loss = tf.reduce_sum(entmax_token_loss(targets, z, alpha))
            mapped = ops.entmax(z, alpha, top_k=top_k)
        return loss, tape.gradient(loss, z), mapped

    def compiled_hlo(top_k):
        compiled = tf.function(lambda z: loss_and_gradient(z, top_k), jit_compile=True)
        return compiled.experimental_get_compiler_ir(logits)(stage="hlo")

    assert " sort(" in compiled_hlo(None)  # the exact full sort, asked for
    default = compiled_hlo(ops.DEFAULT_TOP_K)
    assert " sort(" not in default and " topk(" not in default.lower()
