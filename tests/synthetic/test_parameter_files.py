import numpy as np
import pytest

from tfscones import synthetic


def test_save_and_load_round_trip(model, pairs, tmp_path):
    loaded = synthetic.IBM3Parameters.load(model.save(tmp_path / "ibm3"))
    assert loaded.source_vocabulary == model.source_vocabulary
    assert loaded.target_vocabulary == model.target_vocabulary
    assert (loaded.p1, loaded.options) == (model.p1, model.options)
    for name in ("t_offsets", "t_targets", "t_probabilities", "fertility", "offset_buckets"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    sources = [s for s, _ in pairs[:50]]
    assert synthetic.synthesize(loaded, sources, 0.7, 1) == synthetic.synthesize(
        model, sources, 0.7, 1
    )
    assert loaded.summary(0.7) == model.summary(0.7)


def test_a_folder_of_something_else_is_refused(model, tmp_path):
    folder = model.save(tmp_path / "ibm3")
    (folder / "ibm3.json").write_text('{"format": "other"}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"ibm3.json is not a tfscones-ibm3 file"):
        synthetic.IBM3Parameters.load(folder)
