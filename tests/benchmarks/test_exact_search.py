from types import SimpleNamespace

from benchmarks.exact_search import step_flops


def test_step_flops_counts_the_small_presets_matrix_products():
    small = SimpleNamespace(
        num_decoder_layers=3, hidden_dim=256, intermediate_dim=1024, vocabulary_size=8000
    )
    # Per layer 6 projections of 256 x 256 and 256 x 1024 twice; output 256 x 8000; x2 for FMA.
    assert step_flops(small) == 2 * (3 * (6 * 65_536 + 2 * 262_144) + 2_048_000) == 9_601_024
