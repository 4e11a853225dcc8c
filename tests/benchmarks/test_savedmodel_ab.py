"""The alternating A/B of two SavedModels: both get every request, in turns; differences count."""

import tensorflow as tf

from benchmarks.savedmodel_ab import alternate


class FakeSignature:
    """Returns each request's sentences upper-cased (or with `suffix`), and logs its calls."""

    def __init__(self, name: str, calls: list, suffix: str = ""):
        self.name, self.calls, self.suffix = name, calls, suffix

    def __call__(self, source):
        self.calls.append(self.name)
        texts = [t.decode().upper() + self.suffix for t in source.numpy()]
        return {"translations": tf.constant(texts)}


def test_both_signatures_get_every_request_first_in_turns():
    calls = []
    requests = [tf.constant(["a", "b"]), tf.constant(["c"]), tf.constant(["d"])]
    seconds, differing = alternate((FakeSignature("A", calls), FakeSignature("B", calls)), requests)
    # One warm-up call each, then A first, B first, A first.
    assert calls == ["A", "B", "A", "B", "B", "A", "A", "B"]
    assert differing == 0
    assert all(value > 0 for value in seconds)


def test_requests_translated_differently_are_counted():
    calls = []
    requests = [tf.constant(["a"]), tf.constant(["b", "c"])]
    signatures = (FakeSignature("A", calls), FakeSignature("B", calls, suffix="!"))
    assert alternate(signatures, requests)[1] == 2


def test_a_warm_pass_sends_every_request_to_each_untimed_first():
    calls = []
    requests = [tf.constant(["a"]), tf.constant(["b"])]
    alternate((FakeSignature("A", calls), FakeSignature("B", calls)), requests, warm_pass=True)
    assert calls == ["A", "A", "B", "B", "A", "B", "B", "A"]
