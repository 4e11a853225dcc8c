import pytest

from tfscones.reproduction.verdicts import (
    AGREES,
    DISAGREES,
    NO_SPREAD,
    TOO_SMALL,
    at_least_verdict,
    bleu_verdict,
    rate_verdict,
)


@pytest.mark.parametrize(
    ("difference", "spread", "verdict"),
    [(0.8, 0.5, AGREES), (0.5, 0.5, TOO_SMALL), (-0.3, 0.5, TOO_SMALL), (-0.6, 0.5, DISAGREES)],
)
def test_a_bleu_difference_counts_only_beyond_the_seed_spread(difference, spread, verdict):
    assert bleu_verdict(difference, spread) == verdict


def test_matching_is_refuted_only_below_minus_the_spread():
    assert at_least_verdict(-0.4, 0.5) == AGREES
    assert at_least_verdict(-0.6, 0.5) == DISAGREES


def test_without_a_seed_spread_nothing_is_judged():
    assert bleu_verdict(5.0, None) == NO_SPREAD
    assert at_least_verdict(-5.0, None) == NO_SPREAD


def test_rates_are_judged_at_two_standard_errors_of_their_difference():
    # Pooled rate 0.15 over 1,000 sentences each: 2 * sqrt(0.15 * 0.85 * 2 / 1000) = 0.0319.
    assert rate_verdict(0.134, 0.166, 1000) == AGREES
    assert rate_verdict(0.135, 0.165, 1000) == TOO_SMALL
    assert rate_verdict(0.166, 0.134, 1000) == DISAGREES
