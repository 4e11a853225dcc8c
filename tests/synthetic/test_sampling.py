import collections

import numpy as np
import pytest

from tfscones import synthetic


@pytest.mark.parametrize("temperature", [0, -0.5, float("nan"), float("inf")])
def test_temperature_must_be_positive_and_finite(model, temperature):
    message = rf"temperature must be in \(0, inf\).*got {temperature}"
    with pytest.raises(ValueError, match=message):
        synthetic.tempered([0.5, 0.5], temperature)
    with pytest.raises(ValueError, match=message):
        synthetic.sample_translation(model, ["s1"], temperature, np.random.default_rng(0))
    with pytest.raises(ValueError, match=message):
        synthetic.synthesize(model, ["s1 s2"], temperature, seed=0)


def sample_many(model, words, temperature, count=400):
    rng = np.random.default_rng(7)
    return [
        synthetic.sample_translation(model, words, temperature, rng).words for _ in range(count)
    ]


def test_low_temperature_is_nearly_deterministic(model):
    samples = sample_many(model, "s0 s1 s2 s3".split(), 0.1)
    (mode, frequency), *_ = collections.Counter(samples).most_common()
    assert frequency >= 0.95 * len(samples)
    assert mode == ("t0a", "t1a", "t2a", "t3a")


def test_output_entropy_grows_with_temperature(model):
    entropies, distinct = [], []
    for temperature in (0.1, 0.5, 1.0, 2.0):
        samples = sample_many(model, "s4 s5 s6 s7".split(), temperature)
        counts = np.array(list(collections.Counter(w for s in samples for w in s).values()))
        frequencies = counts / counts.sum()
        entropies.append(-np.sum(frequencies * np.log2(frequencies)))
        distinct.append(len(set(samples)))
    assert entropies == sorted(entropies) and len(set(entropies)) == 4
    assert distinct == sorted(distinct) and len(set(distinct)) == 4


def test_a_fixed_seed_gives_the_same_corpus(model, pairs):
    sources = [s for s, _ in pairs[:200]]
    first = synthetic.synthesize(model, sources, 0.5, seed=3)
    assert synthetic.synthesize(model, sources, 0.5, seed=3) == first
    assert synthetic.synthesize(model, sources, 0.5, seed=4) != first
    assert len(first) == len(sources) and all(first)


@pytest.mark.parametrize("temperature", [0.3, 1.0, 5.0])
def test_a_sample_follows_the_generative_story(model, temperature):
    rng = np.random.default_rng(11)
    source = ["s1", "s2", "unseen", "s2", "s9"]
    rows = [synthetic.NULL_WORD_ID, *model.source_ids(source)]
    for _ in range(50):
        sample = synthetic.sample_translation(model, source, temperature, rng)
        assert len(sample.fertilities) == len(source) + 1
        assert len(sample.words) == sum(sample.fertilities) > 0
        assert len(sample.alignment) == len(sample.words)
        per_position = collections.Counter(sample.alignment)
        assert [per_position[i] for i in range(len(rows))] == list(sample.fertilities)
        for word, position in zip(sample.words, sample.alignment, strict=True):
            targets = model.t_row(rows[position])[0]
            assert word in {model.target_vocabulary[t] for t in targets}


def test_an_empty_output_is_resampled_then_falls_back_to_one_word():
    # "a" comes with ten different words, each with its own translation: it never aligns
    pairs = [(f"a b{n}", f"y{n}") for n in range(10)] * 5
    model = synthetic.estimate_ibm3([s for s, _ in pairs], [t for _, t in pairs])
    assert model.fertility[model.source_ids(["a"])[0], 0] > 0.95
    rng = np.random.default_rng(0)
    for _ in range(20):
        sample = synthetic.sample_translation(model, ["a"], 0.05, rng)
        assert sample.fertilities == (0, 1) and len(sample.words) == 1
    with pytest.raises(ValueError, match="no words"):
        synthetic.sample_translation(model, [], 1.0, rng)
