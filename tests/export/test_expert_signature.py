"""The `translate_experts` signature of a latent-expert model, in process and exported."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfscones.decoding import OutputLimits, decode_experts
from tfscones.decoding.translate import source_ids_for_model
from tfscones.models import LatentExpertTransformer
from tfscones.serving import TranslationModule, write_savedmodel

EXPERTS = 3


@pytest.fixture(scope="module")
def expert_module(tokenizer):
    keras.utils.set_random_seed(3)
    model = LatentExpertTransformer.from_preset(
        "tiny",
        vocabulary_size=tokenizer.vocab_size,
        num_experts=EXPERTS,
        num_encoder_layers=1,
        num_decoder_layers=1,
        max_sequence_length=12,
    )
    return TranslationModule(model, tokenizer)


def test_translate_experts_gives_every_experts_greedy_translation(
    expert_module, tokenizer, sentences, tmp_path
):
    assert "translate_experts" in expert_module.signature_names
    source = tf.constant(sentences[:3] + [""])
    output = expert_module.translate_experts(source)
    assert output["translations"].shape == (4, EXPERTS)
    source_ids = source_ids_for_model(tokenizer, source[:3], 12).to_tensor()
    expected = decode_experts(expert_module.model, source_ids, limits=OutputLimits(12))
    texts = tokenizer.detokenize(tf.reshape(expected.ids, [3 * EXPERTS, -1])).numpy()
    np.testing.assert_array_equal(output["translations"][:3].numpy().reshape(-1), texts)
    np.testing.assert_allclose(output["scores"][:3], expected.scores, rtol=1e-5)
    assert output["translations"][3].numpy().tolist() == [b""] * EXPERTS

    write_savedmodel(expert_module, tmp_path / "experts" / "1")
    loaded = tf.saved_model.load(str(tmp_path / "experts" / "1"))
    exported = loaded.signatures["translate_experts"](source=source)
    np.testing.assert_array_equal(exported["translations"], output["translations"])


def test_plain_models_have_no_expert_signature(module):
    assert "translate_experts" not in module.signature_names
    assert not hasattr(module, "translate_experts")
