import keras
import numpy as np
import pytest
import tensorflow as tf

from tfscones.models import OutputProjection


def test_untied_projection_is_an_affine_map_in_float32():
    layer = OutputProjection(7, bias_initializer=keras.initializers.Constant(-2.0))
    hidden = tf.random.normal([2, 3, 4], dtype=tf.float16)
    logits = layer(hidden)
    assert logits.dtype == tf.float32 and logits.shape == (2, 3, 7)
    expected = hidden.numpy().astype(np.float32) @ layer.kernel.numpy() - 2.0
    np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_tied_projection_uses_the_given_embeddings_and_owns_only_a_bias():
    layer = OutputProjection(5, tied=True)
    embeddings = tf.random.normal([5, 4])
    hidden = tf.random.normal([3, 4])
    logits = layer(hidden, embeddings)
    assert [v.shape for v in layer.weights] == [(5,)]
    np.testing.assert_allclose(logits.numpy(), hidden.numpy() @ embeddings.numpy().T, atol=1e-5)
    with pytest.raises(ValueError, match="tied"):
        layer(hidden)
    with pytest.raises(ValueError, match="tied"):
        OutputProjection(5)(hidden, embeddings)


@pytest.mark.parametrize("tied", [False, True])
def test_a_kernel_scale_multiplies_the_kernel_and_leaves_the_bias(tied):
    layer = OutputProjection(6, tied=tied, kernel_scale=0.3, bias_initializer="ones")
    hidden = tf.random.normal([2, 4], seed=3)
    embeddings = tf.random.normal([6, 4], seed=4) if tied else None
    logits = layer(hidden, embeddings)
    kernel = embeddings.numpy().T if tied else layer.kernel.numpy()
    expected = hidden.numpy() @ (0.3 * kernel) + 1.0
    np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(layer.scaled_kernel(embeddings).numpy(), kernel * np.float32(0.3))


@pytest.mark.parametrize("scale", [0.0, -0.5, float("nan"), float("inf"), "0.5"])
def test_a_kernel_scale_that_is_not_a_positive_number_is_refused(scale):
    with pytest.raises(ValueError, match=r"kernel_scale must be a finite number in \(0, inf\)"):
        OutputProjection(6, kernel_scale=scale)


def test_config_round_trip():
    layer = OutputProjection(
        9, tied=True, bias_initializer=keras.initializers.Constant(-1.5), kernel_scale=0.125
    )
    clone = OutputProjection.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    assert clone.kernel_scale == 0.125
    assert clone.dtype_policy.name == "float32"
