import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tfscones import heads
from tfscones.models import Seq2SeqTransformer

VOCAB = 23
SOURCE = np.array([[5, 6, 7, 8, 1, 0, 0], [9, 10, 1, 0, 0, 0, 0], [4, 11, 12, 13, 14, 15, 1]])
TARGET_IN = np.array([[3, 4, 5, 6, 1, 0], [3, 7, 8, 9, 10, 11], [3, 12, 1, 0, 0, 0]])
INPUTS = harness.model_inputs(SOURCE, TARGET_IN)


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


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_logits_are_float32_under_mixed_precision(global_policy, policy):
    global_policy(policy)
    model = harness.small_model(VOCAB, "sigmoid", tie_embeddings=policy == "mixed_bfloat16")
    assert model.compute_dtype != "float32"
    logits = model(INPUTS, training=False)
    assert logits.dtype == tf.float32
    encoder_outputs, _ = model.encode(SOURCE)
    assert encoder_outputs.dtype.name == model.compute_dtype


def test_output_bias_starts_at_the_heads_prior():
    sigmoid_bias = harness.small_model(VOCAB, "sigmoid").output_projection.bias.numpy()
    np.testing.assert_allclose(sigmoid_bias, np.full(VOCAB, -math.log(VOCAB)), rtol=1e-6)
    softmax_bias = harness.small_model(VOCAB, "softmax").output_projection.bias.numpy()
    np.testing.assert_array_equal(softmax_bias, np.zeros(VOCAB))


@pytest.mark.parametrize("tied", [False, True])
def test_an_output_kernel_scale_scales_the_logits_of_the_same_weights(tied):
    unscaled = harness.small_model(VOCAB, "sparsemax", tie_embeddings=tied)
    scaled = harness.small_model(VOCAB, "sparsemax", tie_embeddings=tied, output_kernel_scale=0.125)
    scaled.set_weights(unscaled.get_weights())
    np.testing.assert_allclose(
        scaled(INPUTS, training=False).numpy(),
        0.125 * unscaled(INPUTS, training=False).numpy(),
        rtol=1e-5,
        atol=1e-6,
    )
    assert scaled.get_config()["output_kernel_scale"] == 0.125


def test_an_output_kernel_scale_out_of_range_is_refused_by_name():
    with pytest.raises(ValueError, match=r"output_kernel_scale must be .* \(got -1\.0\)"):
        harness.small_model(VOCAB, output_kernel_scale=-1.0)


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
        ("sparsemax", {"tie_embeddings": True, "output_kernel_scale": 0.125}),
    ],
)
def test_save_and_load_give_identical_outputs(tmp_path, head, overrides):
    model = harness.small_model(VOCAB, head, **overrides)
    restored = harness.saved_and_loaded(model, tmp_path)
    assert isinstance(restored, Seq2SeqTransformer)
    assert restored.head == heads.get(head)
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
