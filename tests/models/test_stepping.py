"""The steppers: the `StepModel` contract, cached decoding against the full forward pass, caches.

Every stepper and fake model that decoders take satisfies the contract and declares what else it
can do; each of the Transformer stepper's caches (slots, growing, prefixes) gives the logits of
teacher forcing; a frozen stepper decodes as its model; keras-hub's internals are read in one
place, which names what a keras-hub release renamed.
"""

import dataclasses

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tests.decoding.prefix_table import PrefixTableModel, make_table
from tests.harness import stepwise_logits
from tfscones import heads
from tfscones.decoding import ParallelExperts, beam_search, greedy_decode
from tfscones.models import LatentExpertTransformer
from tfscones.models.stepping import (
    EVERY_CAPABILITY,
    ExpertTransformerStepper,
    SlotCache,
    StepCapabilities,
    StepModel,
    TransformerStepper,
)
from tfscones.models.stepping.keras_hub_parts import decoder_layer_parts

VOCAB = 23
SOURCE = np.array([[5, 6, 7, 8, 1, 0, 0], [9, 10, 1, 0, 0, 0, 0], [4, 11, 12, 13, 14, 15, 1]])
TARGET_IN = np.array([[3, 4, 5, 6, 1, 0], [3, 7, 8, 9, 10, 11], [3, 12, 1, 0, 0, 0]])
INPUTS = harness.model_inputs(SOURCE, TARGET_IN)
SIZES = dict(num_encoder_layers=1, num_decoder_layers=1, hidden_dim=8, intermediate_dim=16)


def test_every_stepper_is_a_step_model_and_declares_its_capabilities():
    model = harness.small_model(13, "sigmoid", **SIZES)
    experts_model = harness.small_model(
        13, model_class=LatentExpertTransformer, num_experts=2, **SIZES
    )
    stepper = model.stepper()
    assert type(stepper) is TransformerStepper and stepper.capabilities == EVERY_CAPABILITY
    assert type(experts_model.stepper()) is ExpertTransformerStepper
    with_experts = dataclasses.replace(EVERY_CAPABILITY, latent_experts=2)
    assert experts_model.stepper().capabilities == with_experts
    experts = ParallelExperts(experts_model)
    assert experts.capabilities == dataclasses.replace(with_experts, shares_sources=False)
    fake = PrefixTableModel(make_table(0), "softmax")
    assert fake.capabilities == StepCapabilities()
    for step_model in (stepper, experts_model.stepper(), experts, fake):
        assert isinstance(step_model, StepModel)
        assert isinstance(step_model.head, heads.OutputHead)
        assert step_model.stepper() is step_model
    source = experts.tile_sources(tf.constant([[5, 6, 1]]))
    assert greedy_decode(experts, source, max_length=3).ids.shape == (2, 3)


def test_an_object_without_every_member_is_no_step_model():
    class EncoderOnly:
        head = heads.get("softmax")
        max_sequence_length = 4
        capabilities = StepCapabilities()

        def encode(self, source_ids):
            return source_ids, source_ids > 0

    assert not isinstance(EncoderOnly(), StepModel)


def test_a_capability_a_stepper_does_not_declare_is_refused_by_name():
    model = harness.small_model(13, **SIZES)
    stepper = harness.restricted(model, grows_cache=False, caches_prefixes=False)
    with pytest.raises(NotImplementedError, match="grows_cache"):
        stepper.growing_cache(2)
    with pytest.raises(NotImplementedError, match="caches_prefixes"):
        stepper.prefix_cache(tf.zeros([4, 1, 2, 2, 4]), tf.zeros([2, 1], tf.int32))
    fake = PrefixTableModel(make_table(0), "softmax")
    with pytest.raises(NotImplementedError, match="PrefixTableModel does not declare grows_cache"):
        fake.growing_cache(2)


def test_keras_hub_internals_are_found_and_a_renamed_one_is_named():
    """keras-hub keeps a decoder layer's sublayers in private attributes: if a release renames
    one, this fails with the attribute's name, not deep in a decoder."""
    model = harness.small_model(13, **SIZES)
    parts = decoder_layer_parts(model.decoder_layers[0])
    assert (parts.self_attention.num_heads, parts.self_attention.head_dim) == (2, 4)
    assert parts.cross_attention.key.kernel.shape == (8, 2, 4)
    assert isinstance(parts.intermediate, keras.layers.Dense)
    assert isinstance(parts.feedforward_norm, keras.layers.LayerNormalization)

    class Renamed(keras_hub.layers.TransformerDecoder):
        pass

    layer = Renamed(intermediate_dim=16, num_heads=2)
    layer.build((None, None, 8), (None, None, 8))
    del layer._cross_attention_layer
    with pytest.raises(AttributeError, match="has no attribute '_cross_attention_layer'"):
        decoder_layer_parts(layer)


def test_a_frozen_stepper_keeps_the_transposed_tied_table_in_a_variable():
    model = harness.small_model(13, tie_embeddings=True, **SIZES)
    frozen = model.stepper(frozen_weights=True)
    kernel = frozen.step_weights().output_kernel
    assert isinstance(kernel, tf.Variable) and not kernel.trainable
    np.testing.assert_array_equal(kernel.numpy(), tf.transpose(model.token_embedding.embeddings))
    assert frozen.step_weights() is frozen.step_weights()
    assert frozen.stepper(frozen_weights=True) is frozen
    assert model.stepper().stepper(frozen_weights=True).step_weights().output_kernel is not kernel
    assert any(variable is kernel for variable in frozen.variables)


def test_a_frozen_stepper_uses_an_untied_kernel_as_it_is():
    model = harness.small_model(13, **SIZES)
    frozen = model.stepper(frozen_weights=True)
    assert frozen.step_weights().output_kernel is model.output_projection.kernel


@pytest.mark.parametrize("tied", [True, False])
def test_a_frozen_stepper_keeps_a_scaled_kernel_as_its_model_scales_it(tied):
    model = harness.small_model(13, tie_embeddings=tied, output_kernel_scale=0.3, **SIZES)
    kernel = model.stepper(frozen_weights=True).step_weights().output_kernel
    assert isinstance(kernel, tf.Variable)
    unscaled = (
        model.token_embedding.embeddings.numpy().T if tied else model.output_projection.kernel
    )
    np.testing.assert_array_equal(kernel.numpy(), np.asarray(unscaled) * np.float32(0.3))


def test_frozen_step_weights_are_copies_that_do_not_follow_training():
    model = harness.small_model(13, tie_embeddings=True, **SIZES)
    frozen = model.stepper(frozen_weights=True)
    before = frozen.step_weights().output_kernel.numpy()
    model.token_embedding.embeddings.assign(model.token_embedding.embeddings + 1.0)
    np.testing.assert_array_equal(frozen.step_weights().output_kernel.numpy(), before)


@pytest.mark.parametrize("scale", [1.0, 0.3])
@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("head", ["softmax", "sigmoid"])
def test_a_frozen_stepper_decodes_as_its_model(tied, head, scale):
    model = harness.small_model(13, head, tie_embeddings=tied, output_kernel_scale=scale, **SIZES)
    frozen = model.stepper(frozen_weights=True)
    source = tf.constant([[5, 6, 7, 1], [8, 9, 1, 0]])

    def decoders(step_model):
        return (
            greedy_decode(step_model, source, max_length=6),
            beam_search(step_model, source, beam_size=3, num_hypotheses=2, max_length=6),
        )

    for ours, theirs in zip(decoders(frozen), decoders(model), strict=True):
        np.testing.assert_array_equal(ours.ids, theirs.ids)
        # Separate graphs: their sums of log scores may differ in the last float32 bits.
        np.testing.assert_allclose(ours.scores, theirs.scores, rtol=1e-6)


@pytest.mark.parametrize(
    "head, overrides",
    [
        ("softmax", {}),
        ("sigmoid", {"normalize_first": True}),
        ("sigmoid", {"tie_embeddings": True}),
        ("entmax15", {"num_decoder_layers": 1}),
        ("sparsemax", {"tie_embeddings": True, "output_kernel_scale": 0.3}),
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

    stepper = model.stepper()

    @tf.function(jit_compile=jit_compile, input_signature=[spec, spec])
    def decode(source, target_in):
        encoder_outputs, padding_mask = stepper.encode(source)
        cross_cache = stepper.cross_attention_cache(encoder_outputs) if use_cross_cache else None

        def body(index, cache, logits):
            step_logits, cache = stepper.decode_step(
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
                stepper.initial_cache(tf.shape(source)[0], length),
                tf.TensorArray(tf.float32, size=length),
            ),
        )
        return tf.transpose(logits.stack(), [1, 0, 2])

    stepped = decode(tf.constant(SOURCE, tf.int32), tf.constant(TARGET_IN, tf.int32))
    full = model(INPUTS, training=False)
    np.testing.assert_allclose(stepped.numpy(), full.numpy(), atol=1e-4)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_step_logits_are_float32_and_the_cache_in_the_compute_dtype(global_policy, policy):
    global_policy(policy)
    model = harness.small_model(VOCAB, "sigmoid", tie_embeddings=policy == "mixed_bfloat16")
    stepper = model.stepper()
    logits = model(INPUTS, training=False)
    encoder_outputs, padding_mask = stepper.encode(SOURCE)
    cache = stepper.initial_cache(3, 4)
    step_logits, cache = stepper.decode_step(
        TARGET_IN[:, 0], encoder_outputs, padding_mask, cache, 0
    )
    assert step_logits.dtype == tf.float32
    assert cache.entries.dtype.name == model.compute_dtype
    tolerance = 0.05 if policy == "mixed_float16" else 0.3
    np.testing.assert_allclose(step_logits.numpy(), logits[:, 0].numpy(), atol=tolerance)


POSITIONS = np.array([2, 5, 0], np.int32)


def _noisy_cache_after_teacher_forcing(model):
    """Teacher forcing's logits, the source tensors, the cache, and the cache with noise.

    Returns:
        `(logits, (encoder outputs, mask, cross cache), cache, noisy cache)`, the noise at
        each row's positions from `POSITIONS[row]` on.
    """
    stepper = model.stepper()
    full = model(INPUTS, training=False).numpy()
    encoder_outputs, padding_mask = stepper.encode(SOURCE)
    cross_cache = stepper.cross_attention_cache(encoder_outputs)
    cache = stepper.initial_cache(3, 8)
    for t in range(TARGET_IN.shape[1]):
        _, cache = stepper.decode_step(
            TARGET_IN[:, t], encoder_outputs, padding_mask, cache, t, cross_cache
        )
    cache = cache.entries
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
    logits, stepped_cache = model.stepper().decode_step(
        tokens,
        encoder_outputs,
        padding_mask,
        SlotCache(tf.constant(noisy_cache)),
        tf.constant(POSITIONS),
        cross_cache,
    )
    np.testing.assert_allclose(logits.numpy(), full[np.arange(3), POSITIONS], atol=1e-4)
    for row, position in enumerate(POSITIONS):
        np.testing.assert_allclose(
            stepped_cache.entries[row, :, :, :, : position + 1].numpy(),
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
    stepper = model.stepper()
    prefixes = stepper.prefix_cache(pool, np.argsort(order).reshape(rows, slots).astype(np.int32))
    tokens = TARGET_IN[np.arange(3), POSITIONS]
    encoder_outputs, padding_mask, cross_cache = source
    logits, own_position = stepper.decode_step(
        tokens, encoder_outputs, padding_mask, prefixes, tf.constant(POSITIONS), cross_cache
    )
    return logits, stepper.prefix_entries(own_position)
