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


def test_config_round_trip():
    layer = OutputProjection(9, tied=True, bias_initializer=keras.initializers.Constant(-1.5))
    clone = OutputProjection.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    assert clone.dtype_policy.name == "float32"
