import numpy as np

from tfscones import synthetic


def test_tempered_matches_hand_computed_values():
    np.testing.assert_allclose(synthetic.tempered([0.5, 0.25, 0.25], 0.5), [2 / 3, 1 / 6, 1 / 6])
    root = np.sqrt([0.5, 0.25, 0.25])
    np.testing.assert_allclose(synthetic.tempered([0.5, 0.25, 0.25], 2.0), root / root.sum())
    probabilities = np.array([[0.1, 0.2, 0.7], [0.0, 0.4, 0.6]])
    np.testing.assert_allclose(synthetic.tempered(probabilities, 1.0), probabilities)
    cold = synthetic.tempered(probabilities, 0.01)
    assert cold[1, 0] == 0.0
    np.testing.assert_allclose(cold, [[0, 0, 1], [0, 0, 1]], atol=1e-12)
    assert synthetic.tempered([0.0, 1e-300, 1.0], 1e-3).tolist() == [0.0, 0.0, 1.0]
