"""The decoders' model interface: the models and the adapters that decoders take satisfy it."""

import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tests.decoding.prefix_table import PrefixTableModel, make_table
from tfscones import heads
from tfscones.decoding import (
    FrozenStepModel,
    ParallelExperts,
    StepModel,
    beam_search,
    greedy_decode,
)
from tfscones.models import LatentExpertTransformer

SIZES = dict(num_encoder_layers=1, num_decoder_layers=1, hidden_dim=8, intermediate_dim=16)


def test_seq2seq_transformer_is_a_step_model():
    model = harness.small_model(13, "sigmoid", **SIZES)
    assert isinstance(model, StepModel)
    assert isinstance(model.head, heads.OutputHead)


def test_expert_adapter_is_a_step_model():
    model = harness.small_model(13, model_class=LatentExpertTransformer, num_experts=2, **SIZES)
    assert isinstance(model, StepModel)
    experts = ParallelExperts(model)
    assert isinstance(experts, StepModel)
    source = experts.tile_sources(tf.constant([[5, 6, 1]]))
    assert greedy_decode(experts, source, max_length=3).ids.shape == (2, 3)


def test_the_tests_fake_model_is_a_step_model():
    assert isinstance(PrefixTableModel(make_table(0), "softmax"), StepModel)


def test_an_object_without_decode_step_is_no_step_model():
    class EncoderOnly:
        head = heads.get("softmax")
        max_sequence_length = 4

        def encode(self, source_ids):
            return source_ids, source_ids > 0

    assert not isinstance(EncoderOnly(), StepModel)


def test_frozen_step_model_keeps_the_transposed_tied_table_in_a_variable():
    model = harness.small_model(13, tie_embeddings=True, **SIZES)
    frozen = FrozenStepModel(model)
    kernel = frozen.step_weights().output_kernel
    assert isinstance(kernel, tf.Variable) and not kernel.trainable
    np.testing.assert_array_equal(kernel.numpy(), tf.transpose(model.token_embedding.embeddings))
    assert frozen.step_weights() is frozen.step_weights()
    assert isinstance(frozen, StepModel)
    assert frozen.max_sequence_length == model.max_sequence_length
    assert any(variable is kernel for variable in frozen.variables)


def test_frozen_step_model_uses_an_untied_kernel_as_it_is():
    model = harness.small_model(13, **SIZES)
    assert FrozenStepModel(model).step_weights().output_kernel is model.output_projection.kernel


def test_frozen_step_weights_are_copies_that_do_not_follow_training():
    model = harness.small_model(13, tie_embeddings=True, **SIZES)
    frozen = FrozenStepModel(model)
    before = frozen.step_weights().output_kernel.numpy()
    model.token_embedding.embeddings.assign(model.token_embedding.embeddings + 1.0)
    np.testing.assert_array_equal(frozen.step_weights().output_kernel.numpy(), before)


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("head", ["softmax", "sigmoid"])
def test_a_frozen_step_model_decodes_as_its_model(tied, head):
    model = harness.small_model(13, head, tie_embeddings=tied, **SIZES)
    frozen = FrozenStepModel(model)
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
