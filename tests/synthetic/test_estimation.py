import collections

import numpy as np
import pytest

from tfscones import synthetic

SMOOTHING = synthetic.EstimationOptions().fertility_smoothing
WIDTH = synthetic.EstimationOptions().max_fertility + 1


def assert_distributions(rows):
    rows = np.asarray(rows)
    assert np.all(rows >= 0)
    np.testing.assert_allclose(rows.sum(axis=-1), 1.0, atol=1e-9)


def test_estimated_tables_are_distributions(model):
    for source_id in range(len(model.source_vocabulary)):
        targets, probabilities = model.t_row(source_id)
        assert len(targets) >= 1 and len(set(targets.tolist())) == len(targets)
        assert_distributions(probabilities)
    assert_distributions(model.fertility)
    assert model.fertility.shape == (len(model.source_vocabulary), WIDTH)
    for lengths in [(1, 1), (3, 4), (7, 7), (17, 3), (2, 40)]:
        assert_distributions(model.distortion_matrix(*lengths))
    assert_distributions(model.offset_buckets)
    assert 0 <= model.p1 < 1 and model.p0 == pytest.approx(1 - model.p1)
    summary = model.summary()
    assert summary["source_vocabulary"] == 32 and summary["target_vocabulary"] == 91


def test_estimation_recovers_a_word_for_word_dictionary(word_for_word_pairs, translate):
    sources = [s for s, _ in word_for_word_pairs]
    model = synthetic.estimate_ibm3(
        sources, [t for _, t in word_for_word_pairs], synthetic.EstimationOptions(em_iterations=10)
    )
    counts = collections.Counter(word for source in sources for word in source.split())
    frequent = [word for word, count in counts.items() if count >= 3]
    assert len(frequent) > 100
    for word in frequent:
        source_id = model.source_ids([word])[0]
        targets, probabilities = model.t_row(source_id)
        best = int(np.argmax(probabilities))
        assert model.target_vocabulary[targets[best]] == translate(word)
        assert probabilities[best] > 0.95
        # every occurrence had fertility 1: n(1|f) is the smoothed relative frequency of 1
        expected = (counts[word] + SMOOTHING) / (counts[word] + WIDTH * SMOOTHING)
        assert model.fertility[source_id, 1] == pytest.approx(expected)
    assert model.p1 == 0.0


def test_rare_and_unseen_words_share_the_unk_row(word_for_word_pairs):
    sources = [s for s, _ in word_for_word_pairs]
    model = synthetic.estimate_ibm3(sources, [t for _, t in word_for_word_pairs])
    counts = collections.Counter(word for source in sources for word in source.split())
    rare = [word for word, count in counts.items() if count == 1]
    assert rare and set(model.source_vocabulary[2:]) == {w for w, c in counts.items() if c > 1}
    ids = model.source_ids([*rare, "never-seen", synthetic.NULL_WORD, synthetic.UNK_WORD])
    assert np.all(ids == synthetic.UNK_WORD_ID)
    assert_distributions(model.t_row(synthetic.UNK_WORD_ID)[1])


def test_estimation_rejects_unusable_input():
    with pytest.raises(ValueError, match="2 source sentences but 1 targets"):
        synthetic.estimate_ibm3(["a", "b"], ["x"])
    with pytest.raises(ValueError, match="sentence pair 2 has an empty"):
        synthetic.estimate_ibm3(["a", "  "], ["x", "y"])
    with pytest.raises(ValueError, match="em_iterations must be ≥ 1"):
        synthetic.EstimationOptions(em_iterations=0)
