import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tests.heads.cases import HEAD_LOGITS
from tfscones import heads

ALL_HEADS = list(harness.EVERY_HEAD_AND_BISECTION.values())
HEAD_IDS = list(harness.EVERY_HEAD_AND_BISECTION)
# What each head's metrics() shows next to its loss, by metric name.
METRIC_NAMES = {
    "softmax": set(),
    "sigmoid": {"scones_positive", "scones_negative"},
    "tanh": {"tanh_positive", "tanh_negative"},
    "entmax": {"entmax_support_size"},
}


def test_heads_compute_in_float32():
    half = tf.cast(HEAD_LOGITS[:1], tf.float16)
    for head in ALL_HEADS:
        assert head.log_scores(half).dtype == tf.float32
        assert head.probabilities(half).dtype == tf.float32


@pytest.mark.parametrize("head", ALL_HEADS, ids=HEAD_IDS)
def test_every_head_keeps_the_contract_decoders_rely_on(head):
    logits = tf.constant(
        np.concatenate(
            [np.random.default_rng(4).normal(size=(3, 7)) * 4, [[0, 0, 1, 1, -20, 20, 3]]]
        ),
        tf.float32,
    )
    probabilities = head.probabilities(logits).numpy()
    scores = head.log_scores(logits).numpy()
    assert np.all((probabilities >= 0) & (probabilities <= 1))
    assert not np.isnan(scores).any() and np.all(scores <= 0)  # a prefix's score only falls
    np.testing.assert_array_equal(np.isneginf(scores), probabilities == 0)
    kept = probabilities > 1e-30
    np.testing.assert_allclose(np.exp(scores[kept]), probabilities[kept], rtol=1e-5, atol=1e-7)
    # Order is kept: greedy search may take the argmax of the raw logits.
    np.testing.assert_array_equal(scores.argmax(-1), logits.numpy().argmax(-1))
    order = np.argsort(logits.numpy(), axis=-1, kind="stable")
    ordered = np.nan_to_num(np.take_along_axis(scores, order, -1), neginf=-1e30)
    assert np.all(np.diff(ordered, axis=-1) >= 0)


def test_sigmoid_logit_thresholds_match_hand_computed_values():
    # log σ(0) = -log 2 and log σ(2) = -log(1 + e^-2): those logits back; no logit scores
    # above 0; far below 0, u = t - log(1 - e^t) is t to float32 precision.
    score_thresholds = tf.constant([-math.log(2.0), -math.log1p(math.exp(-2.0)), 0.0, 3.0, -100.0])
    expected = [0.0, 2.0, math.inf, math.inf, -100.0]
    sigmoid = heads.SigmoidHead().logit_thresholds(score_thresholds).numpy()
    np.testing.assert_allclose(sigmoid, expected, atol=1e-6)
    tanh = heads.TanhHead().logit_thresholds(score_thresholds).numpy()
    np.testing.assert_allclose(tanh, np.array(expected) / 2, atol=1e-6)


@pytest.mark.parametrize("head", ALL_HEADS, ids=HEAD_IDS)
@pytest.mark.parametrize("jit_compile", [False, True])
def test_logit_thresholds_tell_the_tokens_that_score_above_a_threshold(head, jit_compile):
    """Where a head gives logit thresholds, `z > u` selects the tokens whose log score
    exceeds t, bar those within float32 rounding of it; softmax and entmax give none."""
    logits = tf.random.stateless_normal([64, 300], seed=[3, 4]) * 6.0
    score_thresholds = -tf.random.stateless_uniform([64], seed=[5, 6], maxval=8.0)
    logit_thresholds = tf.function(head.logit_thresholds, jit_compile=jit_compile)
    if type(head) in (heads.SoftmaxHead, heads.EntmaxHead):
        assert head.logit_thresholds(score_thresholds) is None
        return
    above = (logits > logit_thresholds(score_thresholds)[:, None]).numpy()
    margin = (head.log_scores(logits) - score_thresholds[:, None]).numpy()
    assert above[margin > 1e-5].all()
    assert not above[margin < -1e-5].any()
    assert above.any() and not above.all()


@pytest.mark.parametrize("head", ALL_HEADS, ids=HEAD_IDS)
def test_every_head_trains_with_its_loss_and_metrics_which_round_trip(head):
    metrics = head.metrics()
    assert {metric.name for metric in metrics} == METRIC_NAMES[head.name]
    for metric in metrics:
        clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(metric))
        assert type(clone) is type(metric) and clone.get_config() == metric.get_config()
    loss = head.loss(label_smoothing=0.1, pad_id=0, name="head_loss")
    assert (loss.label_smoothing, loss.pad_id, loss.name) == (0.1, 0, "head_loss")
    targets = np.array([[4, 2, 0], [1, 0, 0]])
    model = keras.Sequential(
        [keras.Input((3,), dtype="int32"), keras.layers.Embedding(5, 8), keras.layers.Dense(5)]
    )
    model.compile(optimizer="adam", loss=loss, metrics=metrics)
    history = model.fit(targets, targets, epochs=2, verbose=0).history
    assert METRIC_NAMES[head.name] <= set(history)
    assert all(np.isfinite(values).all() for values in history.values())


@pytest.mark.parametrize(
    "head, key",
    [
        (heads.SoftmaxHead(), "alpha"),
        (heads.EntmaxHead(1.5), "alpha"),
        (heads.EntmaxHead(2.0), "n_iter"),
        (heads.SigmoidHead(), "n_iter"),
        (heads.TanhHead(), "temperature"),
    ],
)
def test_a_keyword_the_heads_loss_does_not_take_is_a_value_error_naming_it(head, key):
    assert not head.takes_loss_argument(key)
    with pytest.raises(ValueError, match=f"^the {head.name} head takes no {key} "):
        head.loss(**{key: 0.5})


def test_the_error_for_a_head_argument_says_it_belongs_to_the_head():
    with pytest.raises(ValueError, match=r"alpha is set on the head itself, EntmaxHead\(alpha"):
        heads.EntmaxHead(1.5).loss(alpha=1.5)
    with pytest.raises(ValueError, match=r"the softmax head takes no alpha \(its loss takes "):
        heads.SoftmaxHead().loss(alpha=0.5, label_smoothing=0.1)
    assert heads.SigmoidHead().takes_loss_argument("alpha")
    assert heads.TanhHead().takes_loss_argument("alpha")


def test_default_losses_follow_the_head():
    assert isinstance(heads.SoftmaxHead().loss(label_smoothing=0.1), heads.SequenceCrossEntropy)
    scones = heads.SigmoidHead().loss(alpha=0.5)
    assert isinstance(scones, heads.SconesLoss) and scones.alpha == 0.5
    assert isinstance(heads.EntmaxHead(2.0).loss(), heads.SparsemaxLoss)
    entmax = heads.EntmaxHead(1.3, n_iter=20).loss(label_smoothing=0.1)
    assert (entmax.alpha, entmax.n_iter, entmax.label_smoothing) == (1.3, 20, 0.1)


@pytest.mark.parametrize(
    "identifier, expected",
    [
        ("softmax", heads.SoftmaxHead()),
        ("scones", heads.SigmoidHead()),
        ("sigmoid", heads.SigmoidHead()),
        ("sparsemax", heads.EntmaxHead(2.0)),
        ("tanh", heads.TanhHead()),
        ("entmax-1.5", heads.EntmaxHead(1.5)),
        ({"name": "entmax", "alpha": 1.2}, heads.EntmaxHead(1.2)),
        ({"name": "sparsemax", "n_iter": 10}, heads.EntmaxHead(2.0, n_iter=10)),
        (heads.serialize(heads.EntmaxHead(1.7)), heads.EntmaxHead(1.7)),
    ],
)
def test_get_builds_heads_from_names_and_configs(identifier, expected):
    assert heads.get(identifier) == expected


def test_get_rejects_unknown_heads_and_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown head 'tanhmax'.*sparsemax"):
        heads.get("tanhmax")
    with pytest.raises(ValueError, match=r"alpha must be a finite number in \(1, inf\)"):
        heads.get({"name": "entmax", "alpha": 0.9})


@pytest.mark.parametrize("head", ALL_HEADS, ids=HEAD_IDS)
def test_keras_serialization_round_trip(head):
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(head))
    assert clone == head and repr(clone) == repr(head)


REGISTERED = [
    heads.SoftmaxHead,
    heads.SigmoidHead,
    heads.EntmaxHead,
    heads.TanhHead,
    heads.SequenceCrossEntropy,
    heads.SconesLoss,
    heads.EntmaxLoss,
    heads.SparsemaxLoss,
    heads.TanhSconesLoss,
    heads.SconesPositiveTerm,
    heads.SconesNegativeTerm,
    heads.EntmaxSupportSize,
    heads.TanhPositiveTerm,
    heads.TanhNegativeTerm,
]


@pytest.mark.parametrize("cls", REGISTERED, ids=lambda cls: cls.__name__)
def test_keras_names_are_those_saved_models_use(cls):
    assert keras.saving.get_registered_name(cls) == f"tfscones>{cls.__name__}"


def test_objects_saved_under_the_old_module_paths_still_load():
    for obj, old_module in [
        (heads.SconesLoss(alpha=0.3), "tfscones.losses"),
        (heads.SconesPositiveTerm(), "tfscones.loss_metrics"),
        (heads.EntmaxHead(1.5), "tfscones.heads"),
    ]:
        config = keras.saving.serialize_keras_object(obj)
        config["module"] = old_module
        clone = keras.saving.deserialize_keras_object(config)
        assert type(clone) is type(obj) and clone.get_config() == obj.get_config()
