"""The search helpers shared by the decoders: the blockwise top-k, the search cache."""

import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tfscones.decoding import beam_search, common, greedy_decode


@pytest.mark.parametrize("length, k", [(4000 * 4, 8), (5000, 8), (300, 4)])
def test_top_k_equals_tf_top_k_ties_and_infinities_included(length, k):
    rng = np.random.default_rng(length)
    # Few distinct values, so that ties abound, and some -inf (an entmax head's zeros).
    values = rng.integers(0, 40, size=[6, length]).astype(np.float32) / 4.0
    values[rng.random(values.shape) < 0.3] = -np.inf
    values[5] = -np.inf  # a dead row: every candidate -inf
    values[4, :] = 1.0  # all tied
    expected = tf.math.top_k(tf.constant(values), k=k)
    found_values, found_indices = common.top_k(tf.constant(values), k=k)
    np.testing.assert_array_equal(found_indices.numpy(), expected.indices.numpy())
    np.testing.assert_array_equal(found_values.numpy(), expected.values.numpy())


def test_search_cache_grows_outside_xla_and_is_fixed_under_it():
    model = harness.small_model(11).stepper()
    eager = common.search_cache(model, 3, 8)
    # One (keys, values) pair per decoder layer, each `[rows, heads, 0, head_dim]`.
    assert len(eager.cache.layers) == 2
    for keys, values in eager.cache.layers:
        assert keys.shape == values.shape == (3, 2, 0, 8)
    invariants = tf.nest.flatten(eager.shape_invariant)
    assert len(invariants) == 4 and all(s.as_list() == [None] * 4 for s in invariants)

    @tf.function(jit_compile=True)
    def compiled():
        cache = common.search_cache(model, 3, 8, jit_compile=True)
        assert cache.shape_invariant.entries == cache.cache.entries.shape
        return cache.cache.entries

    assert compiled().shape == (3, 2, 2, 2, 8, 8)


@pytest.mark.parametrize("decoder", ["greedy", "beam"])
def test_an_xla_search_without_jit_compile_fails_early_and_names_the_fix(decoder):
    model = harness.small_model(11)
    search = {
        "greedy": lambda source, **kw: greedy_decode(model, source, **kw),
        "beam": lambda source, **kw: beam_search(model, source, beam_size=2, **kw),
    }[decoder]
    source = tf.constant([[5, 6, 1], [7, 1, 0]], tf.int32)
    forgotten = tf.function(search, jit_compile=True)
    with pytest.raises(ValueError, match="jit_compile=True") as raised:
        forgotten.get_concrete_function(source)
    assert "Pass jit_compile=True to the decoder" in str(raised.value)
    # Inside a plain function that an XLA function calls, the loop is compiled with XLA too.
    nested = tf.function(lambda source: tf.function(search)(source), jit_compile=True)
    with pytest.raises(ValueError, match="jit_compile=True"):
        nested.get_concrete_function(source)
    # Saying so compiles and runs; outside XLA the default still traces.
    compiled = tf.function(lambda source: search(source, jit_compile=True), jit_compile=True)
    np.testing.assert_array_equal(
        compiled(source).ids.numpy(), tf.function(search)(source).ids.numpy()
    )
