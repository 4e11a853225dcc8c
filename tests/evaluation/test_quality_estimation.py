"""Unsupervised quality estimation: each measure on a tiny model, correlations and AUROC by hand."""

import math

import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tfscones.data.symbol_vocab import SymbolTokenizer
from tfscones.data.vocab_ids import BOS_ID
from tfscones.decoding import score_texts
from tfscones.evaluation.corruptions import CORRUPTIONS
from tfscones.evaluation.quality_estimation import MEASURES, auroc, correlation, quality_measures
from tfscones.evaluation.quality_report import confidence_quality

WORDS = ["cat", "dog", "bird", "fish", "tree"]
SPOKEN = ["k a t", "d o g", "b i r d", "f i s h", "t r e e"]


@pytest.fixture(scope="module")
def symbols():
    return SymbolTokenizer.build(WORDS, SPOKEN)


def test_a_correlation_and_its_interval_by_hand():
    # Deviations (-1.5, -0.5, 0.5, 1.5) and (-1.5, 0.5, -0.5, 1.5): r = 4 / 5; the ranks are the
    # values, so Spearman's ρ is 0.8 too. The NaN pair is left out.
    result = correlation([1, 2, 3, 4, math.nan], [1, 3, 2, 4, 5], resamples=200)
    assert result.pearson == pytest.approx(0.8) and result.spearman == pytest.approx(0.8)
    assert result.pairs == 4
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    noisy = correlation(x, x + rng.normal(size=200), resamples=300, seed=3)
    for estimate, (low, high) in (
        (noisy.pearson, noisy.pearson_interval),
        (noisy.spearman, noisy.spearman_interval),
    ):
        assert 0.55 < low < estimate < high < 0.85  # r = 1/√2 ≈ 0.71 in the limit
    y = x + rng.normal(size=200)
    again, reseeded = (correlation(x, y, resamples=300, seed=seed) for seed in (3, 4))
    assert again == correlation(x, y, resamples=300, seed=3)  # the seed fixes the resamples
    assert reseeded.pearson == again.pearson and reseeded.spearman == again.spearman
    assert reseeded.pearson_interval != again.pearson_interval  # the interval is resampled
    with pytest.raises(ValueError, match="3 pairs of finite numbers"):
        correlation([1, 2], [3, 4])


def test_auroc_counts_ties_half():
    # (3 > 1), (3 > 2), (2 > 1) and the tie (2, 2): 3.5 of 4 pairs.
    assert auroc([3, 2], [1, 2]) == pytest.approx(0.875)
    assert auroc([5, 6], [-math.inf, 1]) == 1.0
    with pytest.raises(ValueError, match="not NaN"):
        auroc([math.nan], [1])


@pytest.mark.parametrize("head", ["softmax", "sigmoid"])
def test_without_dropout_every_pass_is_the_deterministic_score(symbols, head):
    model = harness.tiny_model(symbols.vocab_size, head, max_sequence_length=12)
    targets = SPOKEN[::-1]
    measures = quality_measures(model, symbols, WORDS, targets, passes=3)
    scores = score_texts(model, symbols, WORDS, targets)
    np.testing.assert_allclose(measures.log_confidence, scores, rtol=1e-5)
    np.testing.assert_allclose(measures.dropout_mean, scores, rtol=1e-5)
    np.testing.assert_allclose(measures.dropout_variance, 0.0, atol=1e-6)
    lengths = [len(target.split()) + 1 for target in targets]
    np.testing.assert_allclose(measures.normalised, scores / np.array(lengths), rtol=1e-5)
    if head == "sigmoid":  # each token its own classifier: no distribution to take entropy of
        assert np.isnan(measures.mean_entropy).all()
        return
    source = symbols.tokenize(tf.constant(WORDS[:1]), add_eos=True).to_tensor()
    target = symbols.tokenize_target(tf.constant(targets[:1]), add_eos=True).to_tensor()
    inputs = harness.model_inputs(source, [[BOS_ID, *target.numpy()[0, :-1]]])
    logits = model(inputs, training=False).numpy()[0].astype(np.float64)
    p = np.exp(logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True))
    entropy = -(p * np.log(p)).sum(-1).mean()
    assert measures.mean_entropy[0] == pytest.approx(entropy, rel=1e-4)


def test_dropout_passes_vary_around_the_deterministic_score(symbols):
    model = harness.small_model(symbols.vocab_size, dropout=0.3, max_sequence_length=12)
    measures = quality_measures(model, symbols, WORDS, SPOKEN, passes=8)
    assert (measures.dropout_variance > 0).all()
    assert not np.allclose(measures.dropout_mean, measures.log_confidence)


@pytest.mark.slow  # 20 s: five sets of measures, with dropout passes, and the multi-reference set
def test_the_report_of_one_model_holds_every_figure(symbols):
    # EOS made likely, so that the random model's translations end within its positions.
    model = harness.tiny_model(symbols.vocab_size, "softmax", max_sequence_length=12, eos_bias=3.0)
    words = WORDS * 2
    report = confidence_quality(
        model,
        symbols,
        words,
        SPOKEN * 2,
        multiref=(WORDS, [[spoken, spoken.replace(" ", " ", 1)] for spoken in SPOKEN]),
        passes=3,
    )
    assert report["sentences"] == 10 and report["dropout_passes"] == 3
    assert set(report["correlation"]) == set(MEASURES)
    for name in MEASURES:
        assert 0 <= report["flagging_auroc"][name] <= 1
        assert set(report["corruption_auroc"][name]) == {*CORRUPTIONS, "all"}
        # No word of 4 characters among the phones: no reference loses a content word.
        assert report["corruption_auroc"][name]["without_a_content_word"] is None
    assert report["correlation"]["normalised"]["pairs"] == 10
    assert 0 <= report["multiref_wins"] <= 1


def test_a_scones_report_leaves_out_the_entropy_it_does_not_define(symbols):
    model = harness.tiny_model(symbols.vocab_size, "sigmoid", max_sequence_length=12, eos_bias=3.0)
    # The last reference is longer than the model reads: it is left out, never a NaN score.
    references = [*SPOKEN[:-1], " ".join(["k a t"] * 5)]
    report = confidence_quality(model, symbols, WORDS, references, passes=1)
    assert "mean_entropy" not in report["correlation"] and "normalised" in report["correlation"]
    assert 0 <= report["corruption_auroc"]["normalised"]["all"] <= 1


def test_no_dropout_passes_leave_the_dropout_measures_out(symbols):
    model = harness.tiny_model(symbols.vocab_size, "softmax", max_sequence_length=12, eos_bias=3.0)
    measures = quality_measures(model, symbols, WORDS, SPOKEN, passes=0)
    assert np.isnan(measures.dropout_mean).all() and np.isnan(measures.dropout_variance).all()
    np.testing.assert_allclose(
        measures.log_confidence, score_texts(model, symbols, WORDS, SPOKEN), rtol=1e-5
    )
    report = confidence_quality(model, symbols, WORDS, SPOKEN, passes=0)
    assert set(report["correlation"]) == {"log_confidence", "normalised", "mean_entropy"}
    with pytest.raises(ValueError, match="passes"):
        quality_measures(model, symbols, WORDS, SPOKEN, passes=-1)
