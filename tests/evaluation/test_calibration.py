import random

import numpy as np
import pytest
import tensorflow as tf

from tests.harness import tiny_model
from tfscones.data import Tokenizer, train_sentencepiece
from tfscones.data.vocab_ids import BOS_ID, EOS_ID
from tfscones.evaluation.calibration import (
    calibration_bins,
    compiled_force_decode,
    expected_calibration_error,
    force_decode,
)

MAX_LENGTH = 12
WORDS = "the a cat dog bird sat ran on under mat tree big small red green and with".split()
SOURCES = ["the cat sat", "a dog", "", "big red tree " * 6, "the bird", "a small cat ran"]
REFERENCES = ["a cat sat on the mat", "", "dog", "tree", "the green bird " * 6, "the cat ran"]


def test_ece_against_a_hand_computation():
    # Bins of width 0.1, right edge included: 0.95 -> (0.9, 1], 0.85 -> (0.8, 0.9],
    # 0.35 -> (0.3, 0.4], 0.3 -> (0.2, 0.3]; one prediction a bin, so each gap is |correct - c|:
    # (|1 - 0.95| + |0 - 0.85| + |1 - 0.35| + |0 - 0.3|) / 4 = (0.05 + 0.85 + 0.65 + 0.3) / 4.
    confidences, correct = [0.95, 0.85, 0.35, 0.3], [1, 0, 1, 0]
    assert expected_calibration_error(confidences, correct) == pytest.approx(0.4625)
    # One bin: |accuracy 0.5 - mean confidence 2.45 / 4| = 0.1125.
    assert expected_calibration_error(confidences, correct, num_bins=1) == pytest.approx(0.1125)
    # Two bins, (0, 0.5] and (0.5, 1]: each holds half, with gaps |0.5 - 0.9| and |0.5 - 0.325|.
    expected = 0.5 * 0.4 + 0.5 * 0.175
    assert expected_calibration_error(confidences, correct, num_bins=2) == pytest.approx(expected)


def test_ece_of_a_calibrated_model_is_zero():
    confidences = [0.75] * 4 + [0.25] * 4 + [1.0, 0.0]
    correct = [True, True, True, False, True, False, False, False, True, False]
    assert expected_calibration_error(confidences, correct) == pytest.approx(0.0, abs=1e-12)
    assert expected_calibration_error(np.array(confidences), np.array(correct, int)) == 0.0


def test_bin_edges_belong_to_the_lower_bin():
    confidences = [0.0, 0.1, 0.10001, 0.2, 0.3, 0.6, 0.7, 0.9, 1.0]
    bins = calibration_bins(confidences, [True] * len(confidences))
    np.testing.assert_array_equal(bins.counts, [2, 2, 1, 0, 0, 1, 1, 0, 1, 1])
    np.testing.assert_allclose(bins.edges, np.linspace(0.0, 1.0, 11))
    np.testing.assert_allclose(bins.mean_confidence[:2], [0.05, (0.10001 + 0.2) / 2])
    assert np.isnan(bins.accuracy[3]) and np.isnan(bins.mean_confidence[7])
    assert bins.expected_calibration_error == pytest.approx(1 - np.mean(confidences))


def test_reliability_table_of_mixed_predictions():
    bins = calibration_bins([0.15, 0.12, 0.95, 0.91, 0.99], [0, 1, 1, 1, 0], num_bins=5)
    np.testing.assert_array_equal(bins.counts, [2, 0, 0, 0, 3])
    np.testing.assert_allclose(bins.accuracy[[0, 4]], [0.5, 2 / 3])
    np.testing.assert_allclose(bins.mean_confidence[[0, 4]], [0.135, 0.95])
    expected = (2 * abs(0.5 - 0.135) + 3 * abs(2 / 3 - 0.95)) / 5
    assert bins.expected_calibration_error == pytest.approx(expected)


@pytest.mark.parametrize(
    "confidences, correct, num_bins, message",
    [
        ([0.5, 0.5], [1], 10, "shape"),
        ([], [], 10, "no predictions"),
        ([1.01], [1], 10, r"\[0, 1\]"),
        ([-0.1], [0], 10, r"\[0, 1\]"),
        ([np.nan], [0], 10, r"\[0, 1\]"),
        ([0.5], [2], 10, "0 and 1"),
        ([0.5], [1], 0, "num_bins"),
        ([0.5], [1], 2.5, "num_bins"),
    ],
)
def test_ece_rejects_invalid_inputs(confidences, correct, num_bins, message):
    with pytest.raises(ValueError, match=message):
        expected_calibration_error(confidences, correct, num_bins)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    rng = random.Random(0)
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(1, 8))) for _ in range(200)]
    folder = tmp_path_factory.mktemp("spm")
    text = folder / "train.txt"
    text.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return Tokenizer.from_file(
        train_sentencepiece([text], folder / "spm", vocab_size=32).model_file
    )


def ids_with_eos(tokenizer, text):
    pieces = tokenizer.tokenize(tf.constant(text)).numpy().tolist()
    return pieces[: MAX_LENGTH - 1] + [EOS_ID]


def one_by_one(model, tokenizer):
    """Statistics of each pair from its own unpadded model call, concatenated."""
    columns = {"confidences": [], "correct": [], "support_sizes": [], "scores": []}
    for source, reference in zip(SOURCES, REFERENCES, strict=True):
        target = ids_with_eos(tokenizer, reference)
        inputs = {
            "source_ids": tf.constant([ids_with_eos(tokenizer, source)]),
            "target_in_ids": tf.constant([[BOS_ID] + target[:-1]]),
        }
        logits = model(inputs, training=False)[0]
        probabilities = model.head.probabilities(logits).numpy()
        log_scores = model.head.log_scores(logits).numpy()
        columns["confidences"].append(probabilities.max(axis=-1))
        columns["correct"].append(np.argmax(logits.numpy(), axis=-1) == target)
        columns["support_sizes"].append(np.count_nonzero(probabilities, axis=-1))
        columns["scores"].append(log_scores[np.arange(len(target)), target].sum())
    return {key: np.hstack(values) for key, values in columns.items()}


@pytest.mark.parametrize("head", ["softmax", "sigmoid", "entmax15"])
def test_force_decode_matches_each_pair_scored_alone(tokenizer, head):
    model = tiny_model(tokenizer.vocab_size, head, max_sequence_length=MAX_LENGTH)
    forced = force_decode(model, tokenizer, SOURCES, REFERENCES, batch_size=4)
    expected = one_by_one(model, tokenizer)
    lengths = [len(ids_with_eos(tokenizer, reference)) for reference in REFERENCES]
    np.testing.assert_array_equal(forced.lengths, lengths)
    assert lengths[1] == 1 and lengths[4] == MAX_LENGTH  # empty and truncated references
    np.testing.assert_allclose(forced.confidences, expected["confidences"], rtol=1e-5)
    np.testing.assert_array_equal(forced.correct, expected["correct"])
    np.testing.assert_array_equal(forced.support_sizes, expected["support_sizes"])
    np.testing.assert_allclose(forced.sentence_scores, expected["scores"], rtol=1e-5)
    assert forced.accuracy == pytest.approx(np.mean(expected["correct"]))
    assert forced.expected_calibration_error() == pytest.approx(
        expected_calibration_error(expected["confidences"], expected["correct"]), abs=1e-6
    )
    # Two batches of different shapes, one trace.
    assert compiled_force_decode(model).experimental_get_tracing_count() == 1


@pytest.mark.parametrize("head", ["softmax", "sigmoid"])
def test_dense_heads_support_the_whole_vocabulary(tokenizer, head):
    forced = force_decode(
        tiny_model(tokenizer.vocab_size, head, max_sequence_length=MAX_LENGTH),
        tokenizer,
        SOURCES,
        REFERENCES,
    )
    assert np.all(forced.support_sizes == tokenizer.vocab_size)
    assert forced.mean_support_size == tokenizer.vocab_size


def test_entmax_support_is_sparse(tokenizer):
    model = tiny_model(tokenizer.vocab_size, "entmax15", max_sequence_length=MAX_LENGTH)
    forced = force_decode(model, tokenizer, SOURCES, REFERENCES)
    assert np.all((forced.support_sizes >= 1) & (forced.support_sizes <= tokenizer.vocab_size))
    assert forced.mean_support_size < tokenizer.vocab_size
    assert forced.mean_support_size == pytest.approx(np.mean(forced.support_sizes))


def test_sigmoid_confidence_is_the_largest_binary_probability(tokenizer):
    model = tiny_model(tokenizer.vocab_size, "sigmoid", max_sequence_length=MAX_LENGTH)
    forced = force_decode(model, tokenizer, SOURCES[:1], REFERENCES[:1])
    target = ids_with_eos(tokenizer, REFERENCES[0])
    inputs = {
        "source_ids": tf.constant([ids_with_eos(tokenizer, SOURCES[0])]),
        "target_in_ids": tf.constant([[BOS_ID] + target[:-1]]),
    }
    logits = model(inputs, training=False)[0].numpy().astype(np.float64)
    np.testing.assert_allclose(forced.confidences, 1 / (1 + np.exp(-logits.max(-1))), rtol=1e-5)


def test_force_decode_rejects_bad_arguments(tokenizer):
    model = tiny_model(tokenizer.vocab_size, "softmax", max_sequence_length=MAX_LENGTH)
    with pytest.raises(ValueError, match="2 sources but 1 references"):
        force_decode(model, tokenizer, ["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no sentences"):
        force_decode(model, tokenizer, [], [])
    with pytest.raises(ValueError, match="batch_size"):
        force_decode(model, tokenizer, ["a"], ["a"], batch_size=0)
    with pytest.raises(TypeError, match="not a string"):
        force_decode(model, tokenizer, "a", "a")
