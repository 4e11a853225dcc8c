import pytest

from tfscones import heads
from tfscones.models import PRESETS, Seq2SeqTransformer


def expected_parameters(vocab, layers_enc, layers_dec, hidden, mlp, tied, normalize_first=False):
    attention = 4 * (hidden * hidden + hidden)
    mlp_block = hidden * mlp + mlp + mlp * hidden + hidden
    norm = 2 * hidden
    encoder_layer = attention + mlp_block + 2 * norm
    decoder_layer = 2 * attention + mlp_block + 3 * norm
    embeddings = (1 if tied else 3) * vocab * hidden
    final_norms = 2 * norm if normalize_first else 0
    return (
        layers_enc * encoder_layer + layers_dec * decoder_layer + embeddings + vocab + final_norms
    )


@pytest.mark.parametrize("tied", [False, True])
def test_base_preset_parameter_count(tied):
    model = Seq2SeqTransformer.from_preset("base", vocabulary_size=32_000, tie_embeddings=tied)
    expected = expected_parameters(32_000, 6, 6, 512, 2048, tied)
    assert model.count_params() == expected
    # SCONES Table 1's hyperparameters with 32K vocabulary: 93.3M untied (the table says 121M,
    # which these hyperparameters do not give; see tfscones/models/presets.py), 60.6M tied.
    assert model.count_params() == (60_554_496 if tied else 93_322_496)


@pytest.mark.parametrize("preset", ["small", "tiny"])
@pytest.mark.parametrize("vocab", [8_000, 32_000])
@pytest.mark.parametrize("tied, normalize_first", [(False, False), (True, True)])
def test_small_presets_parameter_counts(preset, vocab, tied, normalize_first):
    model = Seq2SeqTransformer.from_preset(
        preset, vocabulary_size=vocab, tie_embeddings=tied, normalize_first=normalize_first
    )
    arguments = PRESETS[preset]
    expected = expected_parameters(
        vocab,
        arguments["num_encoder_layers"],
        arguments["num_decoder_layers"],
        arguments["hidden_dim"],
        arguments["intermediate_dim"],
        tied,
        normalize_first,
    )
    assert model.count_params() == expected


def test_presets_build_and_override():
    model = Seq2SeqTransformer.from_preset(
        "tiny", vocabulary_size=50, head="sparsemax", dropout=0.0
    )
    assert model.num_encoder_layers == PRESETS["tiny"]["num_encoder_layers"]
    assert model.dropout == 0.0
    assert model.head == heads.EntmaxHead(alpha=2.0)
    assert model.count_params() == expected_parameters(50, 2, 2, 128, 512, False)
    with pytest.raises(ValueError, match="unknown preset"):
        Seq2SeqTransformer.from_preset("huge", vocabulary_size=50)


def test_constructor_rejects_heads_that_do_not_divide_hidden_dim():
    with pytest.raises(ValueError, match="multiple of num_heads"):
        Seq2SeqTransformer.from_preset("tiny", vocabulary_size=50, num_heads=3)
