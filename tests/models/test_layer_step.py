"""The lean decoding step: per-layer growing cache, weights read once, fewer ops per step."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from tests import harness
from tfscones.decoding import common
from tfscones.decoding.greedy import greedy_decode
from tfscones.models.stepping import GrowingCache, SlotCache, SourceGroups, layer_step
from tfscones.models.stepping.transformer import _sinusoid_timescales

VOCAB = 23
SOURCE = np.array([[5, 6, 7, 8, 1, 0, 0], [9, 10, 1, 0, 0, 0, 0], [4, 11, 12, 13, 14, 15, 1]])
TARGET_IN = np.array([[3, 4, 5, 6, 1, 0], [3, 7, 8, 9, 10, 11], [3, 12, 1, 0, 0, 0]])


def test_layer_norm_equals_the_keras_layer_exactly():
    norm = keras.layers.LayerNormalization(epsilon=1e-5)
    norm.build((None, 16))
    rng = np.random.default_rng(0)
    norm.gamma.assign(rng.normal(size=16).astype(np.float32))
    norm.beta.assign(rng.normal(size=16).astype(np.float32))
    x = tf.constant(rng.normal(size=[7, 16]).astype(np.float32) * 3 + 1)
    weights = layer_step.norm_weights(norm, tf.float32)
    assert weights.gamma is not None
    np.testing.assert_array_equal(layer_step.layer_norm(weights, x).numpy(), norm(x).numpy())


def test_layer_norm_calls_the_layer_when_it_cannot_compute_it():
    norm = keras.layers.LayerNormalization(center=False)
    norm.build((None, 8))
    weights = layer_step.norm_weights(norm, tf.float32)
    assert weights.gamma is None
    x = tf.random.normal([3, 8])
    np.testing.assert_array_equal(layer_step.layer_norm(weights, x).numpy(), norm(x).numpy())


@pytest.mark.parametrize("hidden_dim", [8, 32, 256])
def test_sinusoid_timescales_equal_the_per_step_computation(hidden_dim):
    # The power that `_step_embedding` computed at every step before it became a constant.
    features = ops.arange(hidden_dim)
    min_frequency = ops.cast(1 / 10000.0, "float32")
    expected = ops.power(
        min_frequency,
        ops.cast(2 * (features // 2), "float32") / ops.cast(hidden_dim, "float32"),
    )
    timescales, even = _sinusoid_timescales(hidden_dim, 10000.0, "float32")
    assert timescales.dtype == np.float32
    np.testing.assert_array_equal(timescales, ops.convert_to_numpy(expected))
    np.testing.assert_array_equal(even, np.arange(hidden_dim) % 2 == 0)


def _steps(model, cache, count, weights=None):
    stepper = model.stepper()
    source = tf.constant(SOURCE, tf.int32)
    encoder_outputs, mask = stepper.encode(source)
    cross = stepper.cross_attention_cache(encoder_outputs)
    logits, caches = [], []
    for t in range(count):
        step_logits, cache = stepper.decode_step(
            TARGET_IN[:, t], encoder_outputs, mask, cache, t, cross, step_weights=weights
        )
        logits.append(step_logits.numpy())
        caches.append(cache)
    return np.stack(logits, axis=1), caches


@pytest.mark.parametrize("overrides", [{}, {"normalize_first": True, "tie_embeddings": True}])
def test_step_weights_made_once_give_the_logits_of_weights_made_per_step(overrides):
    model = harness.small_model(VOCAB, **overrides)
    stepper = model.stepper()
    per_step, _ = _steps(model, stepper.growing_cache(3), 4)
    once, _ = _steps(model, stepper.growing_cache(3), 4, stepper.step_weights())
    np.testing.assert_array_equal(once, per_step)
    fixed, _ = _steps(model, stepper.initial_cache(3, 6), 4, stepper.step_weights())
    np.testing.assert_allclose(fixed, per_step, atol=1e-5)


@pytest.mark.parametrize("overrides", [{}, {"normalize_first": True}])
@pytest.mark.parametrize("fixed_cache", [False, True])
def test_rows_sharing_a_source_step_as_rows_with_the_source_repeated(overrides, fixed_cache):
    """`rows_per_source=2`: two rows per sentence read its encoder's tensors, given once, as
    two rows that each get their own copy of them."""
    model = harness.small_model(VOCAB, **overrides)
    stepper = model.stepper()
    encoder_outputs, mask = stepper.encode(tf.constant(SOURCE, tf.int32))
    cross = stepper.cross_attention_cache(encoder_outputs)
    repeat = lambda t: tf.repeat(t, 2, axis=0)  # noqa: E731
    # Each sentence's two rows decode different targets: its own and the next sentence's.
    targets = np.stack([TARGET_IN, np.roll(TARGET_IN, -1, axis=0)], axis=1).reshape([6, -1])
    weights = stepper.step_weights()
    caches = [stepper.initial_cache(6, 6) if fixed_cache else stepper.growing_cache(6)] * 2
    for t in range(5):
        shared, caches[0] = stepper.decode_step(
            targets[:, t], encoder_outputs, mask, caches[0], t, cross, weights, rows_per_source=2
        )
        repeated, caches[1] = stepper.decode_step(
            targets[:, t],
            repeat(encoder_outputs),
            repeat(mask),
            caches[1],
            t,
            tf.nest.map_structure(repeat, cross),
            weights,
        )
        np.testing.assert_allclose(shared.numpy(), repeated.numpy(), rtol=1e-5, atol=1e-6)


def test_source_groups_give_each_source_width_places_its_rows_in_order():
    # Sources 2, 0, 2, 1, 2, 0: source 2 has the most rows (3), so every source gets 3 places.
    groups = SourceGroups.of(tf.constant([2, 0, 2, 1, 2, 0]))
    assert int(groups.width) == 3
    np.testing.assert_array_equal(groups.places.numpy(), [6, 0, 7, 3, 8, 1])


@pytest.mark.parametrize("overrides", [{}, {"normalize_first": True}])
@pytest.mark.parametrize("in_graph", [False, True])
def test_rows_grouped_by_source_step_as_rows_with_their_sources_gathered(overrides, in_graph):
    """`SourceGroups`: rows in any number and order per sentence read its encoder's tensors,
    given once, as rows that each get their own copy of them (exact search's steps)."""
    model = harness.small_model(VOCAB, **overrides)
    stepper = model.stepper()
    encoder_outputs, mask = stepper.encode(tf.constant(SOURCE, tf.int32))
    cross = stepper.cross_attention_cache(encoder_outputs)
    row_sources = tf.constant([1, 0, 1, 1, 2, 0, 1])
    rows = len(row_sources)
    targets = tf.constant(np.resize(TARGET_IN[:, :4].T.ravel(), rows), tf.int32)
    positions = tf.constant([3, 0, 1, 2, 3, 2, 0])
    weights = stepper.step_weights()
    cache = SlotCache(
        tf.random.stateless_normal(
            [rows, model.num_decoder_layers, 2, model.num_heads, 4, model.head_dim], seed=[1, 2]
        )
    )

    def both(cache):
        gather = lambda t: tf.gather(t, row_sources)  # noqa: E731
        grouped, _ = stepper.decode_step(
            targets,
            encoder_outputs,
            mask,
            cache,
            positions,
            cross,
            weights,
            rows_per_source=SourceGroups.of(row_sources),
        )
        gathered, _ = stepper.decode_step(
            targets,
            gather(encoder_outputs),
            gather(mask),
            cache,
            positions,
            tf.nest.map_structure(gather, cross),
            weights,
        )
        return grouped, gathered

    grouped, gathered = (tf.function(both) if in_graph else both)(cache)
    np.testing.assert_allclose(grouped.numpy(), gathered.numpy(), rtol=1e-5, atol=1e-6)


def test_growing_cache_holds_one_pair_per_layer_and_only_appends():
    model = harness.small_model(VOCAB, num_decoder_layers=3)
    stepper = model.stepper()
    _, caches = _steps(model, stepper.growing_cache(3), 4, stepper.step_weights())
    for t, cache in enumerate(caches):
        assert len(cache.layers) == 3
        for keys, values in cache.layers:
            assert keys.shape == values.shape == (3, model.num_heads, t + 1, model.head_dim)
    # A step appends its position and leaves the earlier ones as they were.
    for before, after in zip(caches[2].layers, caches[3].layers, strict=True):
        for old, new in zip(before, after, strict=True):
            np.testing.assert_array_equal(new[:, :, :3].numpy(), old.numpy())


def _loop_body_ops(function, *args) -> list[tuple[str, str]]:
    """`(type, name)` of the ops of the largest `while` body in the traced graph of `function`."""
    graph_def = function.get_concrete_function(*args).graph.as_graph_def()
    bodies = [f for f in graph_def.library.function if "while_body" in f.signature.name]
    body = max(bodies, key=lambda f: len(f.node_def))
    return [(node.op, node.name) for node in body.node_def]


def test_the_decoding_loop_copies_neither_the_cache_nor_the_output_projection():
    model = harness.small_model(VOCAB, normalize_first=True, tie_embeddings=True)
    decode = tf.function(lambda source: greedy_decode(model, source, max_length=6))
    body = _loop_body_ops(decode, tf.TensorSpec([None, None], tf.int32))
    types = [op for op, _ in body]
    # The tied output projection is transposed once, before the loop; the timescales are
    # constants; the cache is appended to per layer (a concatenation per keys and values
    # tensor), never sliced out and stacked back.
    assert "Transpose" not in types and "Pow" not in types
    assert not [name for _, name in body if "cache_stack" in name or "cache_slices" in name]
    assert types.count("ConcatV2") == 2 * model.num_decoder_layers
    # The same search still decodes what a step-by-step loop without prepared weights does.
    expected = greedy_decode(model, tf.constant(SOURCE, tf.int32), max_length=6)
    found = decode(tf.constant(SOURCE, tf.int32))
    np.testing.assert_array_equal(found.ids.numpy(), expected.ids.numpy())


def test_search_cache_is_fixed_when_the_caller_compiles_with_xla():
    stepper = harness.small_model(VOCAB).stepper()
    assert isinstance(common.search_cache(stepper, 2, 5).cache, GrowingCache)
    fixed = common.search_cache(stepper, 2, 5, jit_compile=True)
    assert isinstance(fixed.cache, SlotCache)
    assert fixed.shape_invariant.entries == fixed.cache.entries.shape
