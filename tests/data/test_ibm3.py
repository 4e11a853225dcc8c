import collections
import random

import numpy as np
import pytest

from tfscones.commands import synthetic
from tfscones.data import ibm3

SMOOTHING = ibm3.EstimationOptions().fertility_smoothing
WIDTH = ibm3.EstimationOptions().max_fertility + 1


def ambiguous_pairs(count: int = 1500, seed: int = 0) -> list[tuple[str, str]]:
    """A toy pair with known IBM-3-like structure: 30 source words, each translated to one of
    three words (probabilities 0.7/0.2/0.1) with fertility 0, 1 or 2 (0.05/0.9/0.05), and
    neighbouring target words swapped with probability 0.15."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        source = [f"s{k}" for k in rng.choices(range(30), k=rng.randint(2, 7))]
        target = []
        for word in source:
            draw = rng.random()
            fertility = 0 if draw < 0.05 else 2 if draw < 0.1 else 1
            options = [f"t{word[1:]}{suffix}" for suffix in "abc"]
            target += rng.choices(options, weights=[0.7, 0.2, 0.1], k=fertility)
        for j in range(len(target) - 1):
            if rng.random() < 0.15:
                target[j], target[j + 1] = target[j + 1], target[j]
        pairs.append((" ".join(source), " ".join(target or ["none"])))
    return pairs


@pytest.fixture(scope="module")
def pairs():
    return ambiguous_pairs()


@pytest.fixture(scope="module")
def model(pairs):
    return ibm3.estimate_ibm3(
        [s for s, _ in pairs], [t for _, t in pairs], ibm3.EstimationOptions(em_iterations=10)
    )


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


def test_estimation_recovers_a_word_for_word_dictionary(synthetic_pairs, translate):
    sources = [s for s, _ in synthetic_pairs]
    model = ibm3.estimate_ibm3(
        sources, [t for _, t in synthetic_pairs], ibm3.EstimationOptions(em_iterations=10)
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


def test_rare_and_unseen_words_share_the_unk_row(synthetic_pairs):
    sources = [s for s, _ in synthetic_pairs]
    model = ibm3.estimate_ibm3(sources, [t for _, t in synthetic_pairs])
    counts = collections.Counter(word for source in sources for word in source.split())
    rare = [word for word, count in counts.items() if count == 1]
    assert rare and set(model.source_vocabulary[2:]) == {w for w, c in counts.items() if c > 1}
    ids = model.source_ids([*rare, "never-seen", ibm3.NULL, ibm3.UNK])
    assert np.all(ids == ibm3.UNK_ID)
    assert_distributions(model.t_row(ibm3.UNK_ID)[1])


def test_tempered_matches_hand_computed_values():
    np.testing.assert_allclose(ibm3.tempered([0.5, 0.25, 0.25], 0.5), [2 / 3, 1 / 6, 1 / 6])
    root = np.sqrt([0.5, 0.25, 0.25])
    np.testing.assert_allclose(ibm3.tempered([0.5, 0.25, 0.25], 2.0), root / root.sum())
    probabilities = np.array([[0.1, 0.2, 0.7], [0.0, 0.4, 0.6]])
    np.testing.assert_allclose(ibm3.tempered(probabilities, 1.0), probabilities)
    cold = ibm3.tempered(probabilities, 0.01)
    assert cold[1, 0] == 0.0
    np.testing.assert_allclose(cold, [[0, 0, 1], [0, 0, 1]], atol=1e-12)
    assert ibm3.tempered([0.0, 1e-300, 1.0], 1e-3).tolist() == [0.0, 0.0, 1.0]


@pytest.mark.parametrize("temperature", [0, -0.5, float("nan"), float("inf")])
def test_temperature_must_be_positive_and_finite(model, temperature):
    message = rf"temperature must be in \(0, inf\).*got {temperature}"
    with pytest.raises(ValueError, match=message):
        ibm3.tempered([0.5, 0.5], temperature)
    with pytest.raises(ValueError, match=message):
        ibm3.sample_translation(model, ["s1"], temperature, np.random.default_rng(0))
    with pytest.raises(ValueError, match=message):
        ibm3.synthesize(model, ["s1 s2"], temperature, seed=0)


def sample_many(model, words, temperature, count=400):
    rng = np.random.default_rng(7)
    return [ibm3.sample_translation(model, words, temperature, rng).words for _ in range(count)]


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
    first = ibm3.synthesize(model, sources, 0.5, seed=3)
    assert ibm3.synthesize(model, sources, 0.5, seed=3) == first
    assert ibm3.synthesize(model, sources, 0.5, seed=4) != first
    assert len(first) == len(sources) and all(first)


@pytest.mark.parametrize("temperature", [0.3, 1.0, 5.0])
def test_a_sample_follows_the_generative_story(model, temperature):
    rng = np.random.default_rng(11)
    source = ["s1", "s2", "unseen", "s2", "s9"]
    rows = [ibm3.NULL_ID, *model.source_ids(source)]
    for _ in range(50):
        sample = ibm3.sample_translation(model, source, temperature, rng)
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
    model = ibm3.estimate_ibm3([s for s, _ in pairs], [t for _, t in pairs])
    assert model.fertility[model.source_ids(["a"])[0], 0] > 0.95
    rng = np.random.default_rng(0)
    for _ in range(20):
        sample = ibm3.sample_translation(model, ["a"], 0.05, rng)
        assert sample.fertilities == (0, 1) and len(sample.words) == 1
    with pytest.raises(ValueError, match="no words"):
        ibm3.sample_translation(model, [], 1.0, rng)


def test_save_and_load_round_trip(model, pairs, tmp_path):
    loaded = ibm3.IBM3Parameters.load(model.save(tmp_path / "ibm3"))
    assert loaded.source_vocabulary == model.source_vocabulary
    assert loaded.target_vocabulary == model.target_vocabulary
    assert (loaded.p1, loaded.options) == (model.p1, model.options)
    for name in ("t_offsets", "t_targets", "t_probabilities", "fertility", "offset_buckets"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    sources = [s for s, _ in pairs[:50]]
    assert ibm3.synthesize(loaded, sources, 0.7, 1) == ibm3.synthesize(model, sources, 0.7, 1)
    assert loaded.summary(0.7) == model.summary(0.7)


def test_estimation_rejects_unusable_input():
    with pytest.raises(ValueError, match="2 source sentences but 1 targets"):
        ibm3.estimate_ibm3(["a", "b"], ["x"])
    with pytest.raises(ValueError, match="sentence pair 2 has an empty"):
        ibm3.estimate_ibm3(["a", "  "], ["x", "y"])
    with pytest.raises(ValueError, match="em_iterations must be ≥ 1"):
        ibm3.EstimationOptions(em_iterations=0)


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_command_writes_corpora_parameters_and_summary(tmp_path, pairs, capsys):
    source = write(tmp_path / "train.src", [s for s, _ in pairs[:300]])
    target = write(tmp_path / "train.tgt", [t for _, t in pairs[:300]])
    dev = write(tmp_path / "dev.src", [s for s, _ in pairs[300:320]])
    out = tmp_path / "out"
    synthetic.main(
        [
            *("--source", str(source), "--target", str(target), "--out", str(out)),
            *("--dev-source", str(dev), "--temperatures", "0.1", "1", "--em-iterations", "3"),
        ]
    )
    for gamma in ("0.1", "1.0"):
        folder = out / f"gamma-{gamma}"
        for split, lines in (("train", 300), ("dev", 20)):
            copied = (folder / f"{split}.src").read_text(encoding="utf-8").splitlines()
            sampled = (folder / f"{split}.tgt").read_text(encoding="utf-8").splitlines()
            assert len(copied) == len(sampled) == lines and all(sampled)
        assert copied == [s for s, _ in pairs[300:320]]
        assert not (folder / "test.src").exists()
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "| 0.1 |" in summary and "| 1.0 |" in summary and "| original targets |" in summary
    assert ibm3.IBM3Parameters.load(out / "ibm3").p1 >= 0
    printed = capsys.readouterr().out
    assert str(out / "gamma-1.0" / "dev.tgt") in printed and str(out / "summary.md") in printed


def test_command_names_the_file_of_mismatched_inputs(tmp_path):
    source = write(tmp_path / "short.src", ["s1 s2", "s3"])
    target = write(tmp_path / "long.tgt", ["t1a t2a", "t3a", "t4a"])
    arguments = ["--source", str(source), "--target", str(target), "--temperatures", "0.5"]
    with pytest.raises(SystemExit, match="synthetic: error: .*short.src has 2 lines.*long.tgt"):
        synthetic.main([*arguments, "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_command_rejects_a_bad_temperature(tmp_path, capsys):
    with pytest.raises(SystemExit):
        synthetic.main(["--source", "a", "--target", "b", "--out", "c", "--temperatures", "-1"])
    assert "temperature must be in (0, inf)" in capsys.readouterr().err
