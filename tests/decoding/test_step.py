"""The decoders' model interface: the models and the adapters that decoders take satisfy it."""

import tensorflow as tf

from tests import harness
from tests.decoding.prefix_table import PrefixTableModel, make_table
from tfscones import heads
from tfscones.decoding import ParallelExperts, StepModel, greedy_decode
from tfscones.models import LatentExpertTransformer

SIZES = dict(num_encoder_layers=1, num_decoder_layers=1, hidden_dim=8, intermediate_dim=16)


def test_seq2seq_transformer_is_a_step_model():
    model = harness.small_model(13, "sigmoid", **SIZES)
    assert isinstance(model, StepModel)
    assert isinstance(model.head, heads.OutputHead)


def test_expert_adapter_is_a_step_model():
    model = harness.small_model(13, model_class=LatentExpertTransformer, num_experts=2, **SIZES)
    assert isinstance(model, StepModel)
    experts = model.all_experts()
    assert isinstance(experts, ParallelExperts)
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
