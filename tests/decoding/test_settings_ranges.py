"""Every number a decoder takes has one range: its settings, its library function, its flag.

Settings fields declare their `tfscones.ranges.Range`, one registry check refuses a value
outside it before any cross-field check, and `beam_search`, `diverse_beam_search` and
`sample_decode` refuse the same values in the same words. At the ends of each range the search
still gives finite, ordered scores: the ranges are where float32 stops being able to decode.
"""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tests.decoding.prefix_table import SOURCE, UNLIMITED, PrefixTableModel, make_table
from tfscones import ranges
from tfscones.decoding import Search, greedy_decode, registry
from tfscones.decoding.beam import beam_search, diverse_beam_search, length_penalty_factor
from tfscones.decoding.sampling import _tempered, sample_decode

HUGE_SEED = 99999999999999999999


def test_every_setting_of_every_decoder_declares_its_range():
    for decoder in registry.decoders():
        for field in dataclasses.fields(decoder.settings):
            allowed = field.metadata.get("allowed")
            assert isinstance(allowed, ranges.Range), f"{decoder.name}.{field.name}"
            assert allowed.allows(field.default), f"{decoder.name}.{field.name}"


@pytest.mark.parametrize(
    ("method", "settings", "message"),
    [
        ("diverse_beam", {"num_groups": 0}, "num_groups must be a whole number in [1, "),
        ("diverse_beam", {"num_groups": 2.0}, "num_groups must be a whole number in [1, "),
        ("sample", {"seed": HUGE_SEED}, "seed must be a whole number in [0, 9223372036854775807]"),
        ("sample", {"seed": -1}, "seed must be a whole number in [0, 9223372036854775807]"),
        ("sample", {"temperature": 1e-300}, "temperature must be a finite number in [1e-30, "),
        ("sample", {"temperature": 1e300}, "temperature must be a finite number in [1e-30, 1e+30]"),
        ("sample", {"top_k": 2**40}, "top_k must be a whole number in [0, 2147483647]"),
        ("beam", {"length_penalty": 1e308}, "length_penalty must be a finite number in [0, 5]"),
        ("beam", {"beam_size": 2**40}, "beam_size must be a whole number in [1, 2147483647]"),
        (
            "diverse_beam",
            {"diversity_strength": 1e308},
            "diversity_strength must be a finite number in [0, 1000]",
        ),
    ],
)
def test_settings_out_of_range_are_refused_by_their_range(method, settings, message):
    with pytest.raises(ValueError) as refused:
        Search(method, **settings)
    assert message in str(refused.value)


def test_the_range_check_comes_before_the_cross_field_checks():
    with pytest.raises(ValueError, match=r"num_groups must be a whole number in \[1, "):
        Search("diverse_beam", beam_size=4, num_groups=0, num_hypotheses=2)
    with pytest.raises(ValueError, match=r"beam_size \(5\) must be a multiple of num_groups"):
        Search("diverse_beam", beam_size=5, num_groups=2)


def test_settings_hold_plain_python_numbers():
    search = Search("sample", temperature=np.float32(0.5), top_k=np.int64(3), seed=np.int64(7))
    values = dataclasses.asdict(search.settings)
    assert type(values["temperature"]) is float and type(values["top_k"]) is int
    assert type(values["seed"]) is int


@pytest.fixture(scope="module")
def model():
    return PrefixTableModel(make_table(seed=3), "softmax")


def refusal(function, **arguments) -> str:
    with pytest.raises(ValueError) as refused:
        function(**arguments)
    return str(refused.value)


@pytest.mark.parametrize(
    ("method", "function", "settings", "arguments"),
    [
        ("beam", beam_search, {"length_penalty": 1e308}, {"length_penalty": 1e308}),
        ("beam", beam_search, {"beam_size": 2**40}, {"beam_size": 2**40}),
        ("diverse_beam", diverse_beam_search, {"num_groups": 0}, {"num_groups": 0}),
        (
            "diverse_beam",
            diverse_beam_search,
            {"diversity_strength": float("inf")},
            {"diversity_strength": float("inf")},
        ),
        ("sample", sample_decode, {"temperature": 1e-300}, {"temperature": 1e-300}),
        ("sample", sample_decode, {"top_k": 2**40}, {"top_k": 2**40}),
        ("sample", sample_decode, {"num_hypotheses": 2**40}, {"num_samples": 2**40}),
    ],
)
def test_the_library_functions_refuse_the_same_values_in_the_same_words(
    model, method, function, settings, arguments
):
    from_settings = refusal(Search, method=method, **settings)
    from_function = refusal(function, model=model, source_ids=SOURCE, **arguments)
    name = next(iter(arguments))
    assert from_function == from_settings.replace(next(iter(settings)), name)


@pytest.mark.parametrize("seed", [(HUGE_SEED, 0), (0, -1), (1.0, 2.0), (1, 2, 3)])
def test_sample_decode_refuses_seeds_outside_int64(model, seed):
    message = refusal(sample_decode, model=model, source_ids=SOURCE, seed=seed)
    assert message == f"seed must be two whole numbers in {ranges.SAMPLING_SEED} (got {seed!r})."


def test_the_largest_seed_samples(model):
    high = ranges.SAMPLING_SEED.high
    output = sample_decode(model, SOURCE, num_samples=2, seed=(high, high), **UNLIMITED)
    assert np.all(output.lengths.numpy() > 0)
    assert np.all(np.isfinite(output.scores.numpy()))


def test_the_lowest_temperature_keeps_tempered_scores_finite_and_samples_greedily(model):
    low = ranges.TEMPERATURE.low
    tempered = _tempered(tf.constant([[0.0, -1.0, -3e8]]), low).numpy()
    assert np.all(np.isfinite(tempered)) and tempered[0, 0] == 0.0
    sampled = sample_decode(model, SOURCE, num_samples=3, temperature=low, **UNLIMITED)
    greedy = greedy_decode(model, SOURCE, **UNLIMITED)
    for s in range(3):
        np.testing.assert_array_equal(sampled.ids.numpy()[:, s], greedy.ids.numpy())


def test_the_highest_temperature_keeps_pruned_tokens_pruned():
    tempered = _tempered(tf.constant([[0.0, -2.0, float("-inf")]]), ranges.TEMPERATURE.high)
    np.testing.assert_allclose(tempered.numpy(), [[0.0, -2e-30, float("-inf")]], rtol=1e-6)


def test_the_largest_length_penalty_stays_finite_for_the_longest_outputs(model):
    high = ranges.LENGTH_PENALTY.high
    assert np.isfinite(length_penalty_factor(tf.constant([3 * 10**8]), high).numpy()).all()
    output = beam_search(model, SOURCE, beam_size=3, num_hypotheses=3, length_penalty=high)
    scores = output.scores.numpy()
    assert np.all(np.isfinite(scores)) and np.all(scores < 0.0)
    assert np.all(np.diff(scores, axis=1) <= 0.0)


def test_the_largest_diversity_strength_keeps_scores_finite(model):
    output = diverse_beam_search(
        model, SOURCE, beam_size=4, num_groups=2, diversity_strength=ranges.DIVERSITY_STRENGTH.high
    )
    assert np.all(np.isfinite(output.scores.numpy()))
    assert np.all(output.ids.numpy()[:, 0, 0] != output.ids.numpy()[:, 1, 0])
