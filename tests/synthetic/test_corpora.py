"""One temperature's corpus as files: the splits' samples and the test set's references."""

import pytest

from tfscones.synthetic import synthesize
from tfscones.synthetic.corpora import corpus_files, reference_files, write_corpus


def test_further_references_are_new_samples_and_leave_the_first_as_it_was(model, pairs, tmp_path):
    splits = {"train": [s for s, _ in pairs[:50]], "test": [s for s, _ in pairs[50:70]]}
    alone = write_corpus(model, splits, 0.7, tmp_path / "one", seed=3)
    sampled = write_corpus(model, splits, 0.7, tmp_path / "three", seed=3, test_references=3)

    files = reference_files(tmp_path / "three", 0.7, 3)
    assert [path.name for path in files] == ["test.tgt", "test.2.tgt", "test.3.tgt"]
    assert files[0] == corpus_files(tmp_path / "three", 0.7, "test")[1]
    streams = [path.read_text(encoding="utf-8").splitlines() for path in files]
    assert streams[0] == alone["test"] == sampled["test"]
    assert sampled["train"] == alone["train"]
    assert streams[1] == sampled["test.2"] == synthesize(model, splits["test"], 0.7, (3, 2, 2))
    assert streams[2] == sampled["test.3"] != streams[1]
    assert not (tmp_path / "one" / "gamma-0.7" / "test.2.tgt").exists()


def test_a_count_of_references_below_one_is_refused_before_sampling(model, tmp_path):
    with pytest.raises(ValueError, match="test_references"):
        write_corpus(model, {"test": ["s1 s2"]}, 0.5, tmp_path, seed=0, test_references=0)
    assert not any(tmp_path.iterdir())
