import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tests.harness import stepwise_logits
from tfscones import heads
from tfscones.models import Seq2SeqTransformer

VOCAB = 23
SOURCE = np.array([[5, 6, 7, 8, 1, 0, 0], [9, 10, 1, 0, 0, 0, 0], [4, 11, 12, 13, 14, 15, 1]])
TARGET_IN = np.array([[3, 4, 5, 6, 1, 0], [3, 7, 8, 9, 10, 11], [3, 12, 1, 0, 0, 0]])
INPUTS = harness.model_inputs(SOURCE, TARGET_IN)


@pytest.mark.parametrize(
    "head, overrides",
    [
        ("softmax", {}),
        ("sigmoid", {"normalize_first": True}),
        ("sigmoid", {"tie_embeddings": True}),
        ("entmax15", {"num_decoder_layers": 1}),
    ],
)
@pytest.mark.parametrize("use_cross_cache", [False, True])
@pytest.mark.parametrize("growing", [False, True])
def test_cached_decoding_equals_full_forward(head, overrides, use_cross_cache, growing):
    model = harness.small_model(VOCAB, head, **overrides)
    full = model(INPUTS, training=False)
    stepped = stepwise_logits(
        model, SOURCE, TARGET_IN, use_cross_cache, max_length=8, growing=growing
    )
    assert stepped.dtype == tf.float32
    np.testing.assert_allclose(stepped.numpy(), full.numpy(), atol=1e-4)


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("use_cross_cache", [False, True])
def test_cached_decoding_runs_in_a_graph_while_loop(jit_compile, use_cross_cache):
    model = harness.small_model(VOCAB, "sigmoid", num_encoder_layers=1, num_decoder_layers=1)
    length = TARGET_IN.shape[1]
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(jit_compile=jit_compile, input_signature=[spec, spec])
    def decode(source, target_in):
        encoder_outputs, padding_mask = model.encode(source)
        cross_cache = model.cross_attention_cache(encoder_outputs) if use_cross_cache else None

        def body(index, cache, logits):
            step_logits, cache = model.decode_step(
                target_in[:, index],
                encoder_outputs,
                padding_mask,
                cache,
                index,
                cross_attention_cache=cross_cache,
            )
            return index + 1, cache, logits.write(index, step_logits)

        _, _, logits = tf.while_loop(
            lambda index, *_: index < length,
            body,
            (
                tf.constant(0),
                model.initial_cache(tf.shape(source)[0], length),
                tf.TensorArray(tf.float32, size=length),
            ),
        )
        return tf.transpose(logits.stack(), [1, 0, 2])

    stepped = decode(tf.constant(SOURCE, tf.int32), tf.constant(TARGET_IN, tf.int32))
    full = model(INPUTS, training=False)
    np.testing.assert_allclose(stepped.numpy(), full.numpy(), atol=1e-4)


def test_source_padding_does_not_change_logits():
    model = harness.small_model(VOCAB, "sigmoid")
    padded_source = np.pad(SOURCE, [[0, 0], [0, 5]])
    logits = model(INPUTS, training=False)
    padded_logits = model(harness.model_inputs(padded_source, TARGET_IN), training=False)
    np.testing.assert_allclose(padded_logits.numpy(), logits.numpy(), atol=1e-5)
    # The mask matters: a pad that is not masked (a real token id) does change the outputs.
    unmasked_source = np.pad(SOURCE, [[0, 0], [0, 5]], constant_values=4)
    unmasked_logits = model(harness.model_inputs(unmasked_source, TARGET_IN), training=False)
    assert np.abs(unmasked_logits.numpy() - logits.numpy()).max() > 1e-3


@pytest.fixture
def global_policy():
    previous = keras.config.dtype_policy()
    yield keras.mixed_precision.set_global_policy
    keras.mixed_precision.set_global_policy(previous)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_logits_are_float32_under_mixed_precision(global_policy, policy):
    global_policy(policy)
    model = harness.small_model(VOCAB, "sigmoid", tie_embeddings=policy == "mixed_bfloat16")
    assert model.compute_dtype != "float32"
    logits = model(INPUTS, training=False)
    assert logits.dtype == tf.float32
    encoder_outputs, padding_mask = model.encode(SOURCE)
    assert encoder_outputs.dtype.name == model.compute_dtype
    cache = model.initial_cache(3, 4)
    step_logits, cache = model.decode_step(TARGET_IN[:, 0], encoder_outputs, padding_mask, cache, 0)
    assert step_logits.dtype == tf.float32
    assert cache.dtype.name == model.compute_dtype
    tolerance = 0.05 if policy == "mixed_float16" else 0.3
    np.testing.assert_allclose(step_logits.numpy(), logits[:, 0].numpy(), atol=tolerance)


def test_output_bias_starts_at_the_heads_prior():
    sigmoid_bias = harness.small_model(VOCAB, "sigmoid").output_projection.bias.numpy()
    np.testing.assert_allclose(sigmoid_bias, np.full(VOCAB, -math.log(VOCAB)), rtol=1e-6)
    softmax_bias = harness.small_model(VOCAB, "softmax").output_projection.bias.numpy()
    np.testing.assert_array_equal(softmax_bias, np.zeros(VOCAB))


def embedding_sized(model):
    return [v for v in model.trainable_variables if sorted(v.shape) == sorted([VOCAB, 16])]


def test_tied_embeddings_share_one_matrix():
    untied = harness.small_model(VOCAB, "sigmoid")
    tied = harness.small_model(VOCAB, "sigmoid", tie_embeddings=True)
    assert len(embedding_sized(untied)) == 3
    assert len(embedding_sized(tied)) == 1
    assert len(untied.trainable_variables) - len(tied.trainable_variables) == 2
    assert untied.count_params() - tied.count_params() == 2 * VOCAB * 16
    # The one matrix is the output projection too: changing it changes the logits through it.
    source_only = {"source_ids": tf.constant(SOURCE), "target_in_ids": tf.constant(TARGET_IN)}
    before = tied(source_only, training=False)
    (matrix,) = embedding_sized(tied)
    with tf.GradientTape() as tape:
        logits = tied(source_only, training=False)
        loss = tf.reduce_sum(logits[..., 17])
    gradient = tf.convert_to_tensor(tape.gradient(loss, matrix.value))
    # Row 17 (never an input token) only receives gradient through the output projection.
    assert np.abs(gradient.numpy()[17]).max() > 0
    matrix.assign(matrix.value * 2.0)
    assert np.abs(tied(source_only, training=False).numpy() - before.numpy()).max() > 1e-3


def test_get_config_round_trip():
    model = harness.small_model(
        VOCAB, heads.EntmaxHead(alpha=1.3), normalize_first=True, tie_embeddings=True
    )
    config = model.get_config()
    assert config["head"]["class_name"] == "EntmaxHead"
    clone = Seq2SeqTransformer.from_config(config)
    assert clone.get_config() == config
    assert clone.head == heads.EntmaxHead(alpha=1.3)
    clone.set_weights(model.get_weights())
    np.testing.assert_array_equal(
        clone(INPUTS).numpy(),
        model(INPUTS).numpy(),
    )


@pytest.mark.parametrize(
    "head, overrides",
    [
        (heads.SigmoidHead(), {"tie_embeddings": True, "normalize_first": True}),
        (heads.EntmaxHead(alpha=1.3, n_iter=30), {}),
    ],
)
def test_save_and_load_give_identical_outputs(tmp_path, head, overrides):
    model = harness.small_model(VOCAB, head, **overrides)
    restored = harness.saved_and_loaded(model, tmp_path)
    assert isinstance(restored, Seq2SeqTransformer)
    assert restored.head == head
    assert restored.get_config() == model.get_config()
    np.testing.assert_array_equal(
        restored(INPUTS, training=False).numpy(),
        model(INPUTS, training=False).numpy(),
    )


def copy_task(batch_size=64, length=5, seed=0):
    rng = np.random.default_rng(seed)
    content = rng.integers(4, 12, size=(batch_size, length))
    eos = np.ones((batch_size, 1), np.int64)
    bos = np.full((batch_size, 1), 3)
    source = np.concatenate([content, eos], axis=1)
    return {"source_ids": source, "target_in_ids": np.concatenate([bos, content], axis=1)}, source


@pytest.mark.parametrize("head", ["softmax", "sigmoid", "entmax15"])
def test_tiny_model_learns_copy_task(head):
    model = harness.small_model(
        12, head, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=32, intermediate_dim=64
    )
    loss = model.head.loss()
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=loss)
    x, y = copy_task()
    before = float(loss(y, model(x, training=False)))
    model.fit(x, y, batch_size=16, epochs=8, verbose=0)
    after = float(loss(y, model(x, training=False)))
    assert np.isfinite(before) and after < 0.7 * before


def test_summary_lists_every_layer():
    model = harness.small_model(VOCAB, "sigmoid", tie_embeddings=True, normalize_first=True)
    lines = []
    model.summary(print_fn=lambda line, **_: lines.append(line))
    text = "\n".join(lines)
    assert "decoder_layer_1" in text and "output_projection" in text
    assert f"{model.count_params():,}" in text


POSITIONS = np.array([2, 5, 0], np.int32)


def _noisy_cache_after_teacher_forcing(model):
    """Teacher forcing's logits, the source tensors, the cache, and the cache with noise.

    Returns:
        `(logits, (encoder outputs, mask, cross cache), cache, noisy cache)`, the noise at
        each row's positions from `POSITIONS[row]` on.
    """
    full = model(INPUTS, training=False).numpy()
    encoder_outputs, padding_mask = model.encode(SOURCE)
    cross_cache = model.cross_attention_cache(encoder_outputs)
    cache = model.initial_cache(3, 8)
    for t in range(TARGET_IN.shape[1]):
        _, cache = model.decode_step(
            TARGET_IN[:, t], encoder_outputs, padding_mask, cache, t, cross_cache
        )
    later = np.arange(8)[None, :] >= POSITIONS[:, None]
    noise = np.random.default_rng(0).normal(size=cache.shape).astype(np.float32)
    noisy_cache = np.where(later[:, None, None, None, :, None], noise, cache.numpy())
    return full, (encoder_outputs, padding_mask, cross_cache), cache, noisy_cache


@pytest.mark.parametrize("overrides", [{}, {"normalize_first": True, "tie_embeddings": True}])
def test_rows_at_their_own_positions_step_like_the_full_forward_pass(overrides):
    """Rows stepped at different positions from one cache: the logits of teacher forcing.

    Each row's positions from its own on hold noise, which the step must neither attend to
    nor leave at the row's position.
    """
    model = harness.small_model(VOCAB, "softmax", **overrides)
    full, source, cache, noisy_cache = _noisy_cache_after_teacher_forcing(model)
    tokens = TARGET_IN[np.arange(3), POSITIONS]
    encoder_outputs, padding_mask, cross_cache = source
    logits, stepped_cache = model.decode_step(
        tokens, encoder_outputs, padding_mask, noisy_cache, tf.constant(POSITIONS), cross_cache
    )
    np.testing.assert_allclose(logits.numpy(), full[np.arange(3), POSITIONS], atol=1e-4)
    for row, position in enumerate(POSITIONS):
        np.testing.assert_allclose(
            stepped_cache[row, :, :, :, : position + 1].numpy(),
            cache[row, :, :, :, : position + 1].numpy(),
            atol=1e-5,
        )


@pytest.mark.parametrize("overrides", [{}, {"normalize_first": True, "tie_embeddings": True}])
def test_rows_stepped_on_their_prefixes_give_teacher_forcing_and_their_own_entries(overrides):
    """A `PrefixCache` of each row's positions (noise after them): the logits of teacher
    forcing, and the keys and values of the row's own position, as the full cache holds them."""
    model = harness.small_model(VOCAB, "softmax", **overrides)
    full, source, cache, noisy_cache = _noisy_cache_after_teacher_forcing(model)
    logits, entries = _step_on_prefixes_from_a_shuffled_pool(model, source, noisy_cache)
    np.testing.assert_allclose(logits.numpy(), full[np.arange(3), POSITIONS], atol=1e-4)
    expected = cache.numpy()[np.arange(3), :, :, :, POSITIONS]
    np.testing.assert_allclose(entries.numpy(), expected, atol=1e-5)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_rows_stepped_on_their_prefixes_under_mixed_precision(global_policy, policy):
    """Prefix steps keep the model's compute dtype in their entries and float32 logits."""
    global_policy(policy)
    model = harness.small_model(VOCAB, "sigmoid")
    full, source, _, noisy_cache = _noisy_cache_after_teacher_forcing(model)
    logits, entries = _step_on_prefixes_from_a_shuffled_pool(model, source, noisy_cache)
    assert logits.dtype == tf.float32
    assert entries.dtype.name == model.compute_dtype
    tolerance = 0.05 if policy == "mixed_float16" else 0.3
    np.testing.assert_allclose(logits.numpy(), full[np.arange(3), POSITIONS], atol=tolerance)


def _step_on_prefixes_from_a_shuffled_pool(model, source, noisy_cache):
    """`decode_step` of the rows at `POSITIONS` on a `PrefixCache` from a shuffled pool.

    The rows' entries `[layers, 2, heads, head_dim]` are pooled in a random order, as exact
    search pools them, and gathered back by their slots.

    Returns:
        `(logits, the entries of the rows' own positions)`.
    """
    entries = tf.transpose(tf.cast(noisy_cache, model.compute_dtype), [0, 4, 1, 2, 3, 5])
    rows, slots = entries.shape[:2]
    order = np.random.default_rng(0).permutation(rows * slots)
    pool = tf.gather(tf.reshape(entries, [rows * slots, *entries.shape[2:]]), order)
    prefixes = model.prefix_cache(pool, np.argsort(order).reshape(rows, slots).astype(np.int32))
    tokens = TARGET_IN[np.arange(3), POSITIONS]
    encoder_outputs, padding_mask, cross_cache = source
    logits, own_position = model.decode_step(
        tokens, encoder_outputs, padding_mask, prefixes, tf.constant(POSITIONS), cross_cache
    )
    return logits, model.prefix_entries(own_position)
