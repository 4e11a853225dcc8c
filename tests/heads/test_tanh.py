import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tests.decoding.prefix_table import (
    SOURCE,
    UNLIMITED,
    VOCAB,
    WIDTH,
    PrefixTableModel,
    brute_force_best,
    hypotheses,
    make_table,
)
from tests.heads.cases import HEAD_LOGITS, SEQUENCE_LOGITS, SEQUENCE_TARGETS
from tfscones import heads
from tfscones.decoding.beam import beam_search
from tfscones.decoding.greedy import greedy_decode
from tfscones.heads import tanh


def tanh_probability(z):
    """The head's definition, in float64: tanh rescaled from (-1, 1) into (0, 1)."""
    return (1.0 + np.tanh(np.asarray(z, np.float64))) / 2.0


def tanh_scones_by_hand(logits, gold, alpha, smoothing):
    """SCONES eq. 6 with eq. 11-12 applied to p = (1 + tanh z)/2, as the equations state them."""
    p = tanh_probability(logits)
    positive = -(1 - smoothing) * np.log(p[gold]) - smoothing * np.log(1 - p[gold])
    others = np.delete(p, gold)
    negative = np.sum(-(1 - smoothing) * np.log(1 - others) - smoothing * np.log(others))
    return positive, negative, positive + alpha * negative


def test_probabilities_are_tanh_rescaled_into_the_unit_interval():
    head = tanh.TanhHead()
    logits = np.linspace(-6.0, 6.0, 13, dtype=np.float32)
    np.testing.assert_allclose(head.probabilities(logits), tanh_probability(logits), atol=1e-7)
    np.testing.assert_allclose(head.log_scores(logits), np.log(tanh_probability(logits)), 1e-5)
    # Unnormalised, like the sigmoid head: several tokens can be near-certain at once.
    assert head.probabilities(tf.constant([5.0, 5.0, -5.0])).numpy().sum() > 1.9


def test_log_scores_are_exact_where_the_naive_form_underflows():
    scores = tanh.TanhHead().log_scores(HEAD_LOGITS).numpy()
    assert np.all(scores <= 0)
    assert scores[0, 3] == pytest.approx(-60.0, rel=1e-6)  # log((1 + tanh(-30))/2) ≈ -60
    assert scores[1, 1] == pytest.approx(-2e4)
    assert scores[1, 0] == 0.0
    assert scores[0, 0] == pytest.approx(math.log(tanh_probability(2.0)), rel=1e-6)
    with np.errstate(divide="ignore"):
        naive = np.log((1.0 + np.tanh(np.float32(-30.0))) / 2.0)
    assert naive == -np.inf  # what the exact form avoids


def test_loss_of_a_hand_computed_example():
    # p = (0.75, 0.25) at z = atanh(±0.5): L+ = -log 0.75, L- = -log(1 - 0.25) = -log 0.75.
    logits = np.array([[math.atanh(0.5), math.atanh(-0.5)]], np.float32)
    loss = tanh.TanhSconesLoss(alpha=0.5)
    assert float(loss(np.array([0]), logits)) == pytest.approx(-1.5 * math.log(0.75), rel=1e-6)
    smoothed = tanh.TanhSconesLoss(alpha=1.0, label_smoothing=0.2)(np.array([0]), logits)
    # λ = 0.2: L+ = -0.8 log 0.75 - 0.2 log 0.25, and L- is the same for the other token.
    expected = 2 * (-0.8 * math.log(0.75) - 0.2 * math.log(0.25))
    assert float(smoothed) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("alpha, smoothing", [(1.0, 0.0), (0.5, 0.0), (0.2, 0.1), (0.7, 0.3)])
def test_loss_matches_the_equations_by_hand_with_padding(alpha, smoothing):
    per_token = [
        tanh_scones_by_hand(SEQUENCE_LOGITS[b, t], SEQUENCE_TARGETS[b, t], alpha, smoothing)[2]
        for b in range(2)
        for t in range(4)
        if SEQUENCE_TARGETS[b, t] != 0
    ]
    loss = tanh.TanhSconesLoss(alpha=alpha, label_smoothing=smoothing)
    np.testing.assert_allclose(loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS), np.mean(per_token), 1e-5)


@pytest.mark.parametrize("alpha, smoothing", [(1.0, 0.0), (0.4, 0.2)])
def test_gradient_is_the_closed_form_and_equals_finite_differences(alpha, smoothing):
    logits = tf.constant(SEQUENCE_LOGITS[:1, :2] / 3)
    targets = tf.constant(SEQUENCE_TARGETS[:1, :2])
    loss = tanh.TanhSconesLoss(alpha=alpha, label_smoothing=smoothing)
    theoretical, numerical = tf.test.compute_gradient(
        lambda z: loss(targets, z), [logits], delta=1e-3
    )
    np.testing.assert_allclose(theoretical[0], numerical[0], atol=5e-3)
    # ∂L/∂z_w = 2α(p_w - λ) off the gold token and 2(p_y - (1-λ)) on it, over 2 tokens.
    p = tanh_probability(logits.numpy())
    expected = 2 * alpha * (p - smoothing)
    gold = targets.numpy()[..., None] == np.arange(p.shape[-1])
    expected[gold] = 2 * (p[gold] - (1 - smoothing))
    with tf.GradientTape() as tape:
        tape.watch(logits)
        value = loss(targets, logits)
    np.testing.assert_allclose(tape.gradient(value, logits), expected / 2, atol=1e-6)


def test_pads_get_no_loss_and_no_gradient():
    loss = tanh.TanhSconesLoss(alpha=0.5)
    logits = tf.constant(SEQUENCE_LOGITS)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        value = loss(SEQUENCE_TARGETS, logits)
    assert np.all(tape.gradient(value, logits).numpy()[SEQUENCE_TARGETS == 0] == 0)
    noisy = SEQUENCE_LOGITS + 50.0 * (SEQUENCE_TARGETS == 0)[..., None]
    np.testing.assert_allclose(loss(SEQUENCE_TARGETS, noisy), value, rtol=1e-6)


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_metrics_are_the_loss_terms_averaged_over_non_pad_tokens(smoothing):
    terms = [
        tanh_scones_by_hand(SEQUENCE_LOGITS[b, t], SEQUENCE_TARGETS[b, t], 1.0, smoothing)
        for b, t in zip(*np.nonzero(SEQUENCE_TARGETS), strict=True)
    ]
    positive = tanh.TanhPositiveTerm(label_smoothing=smoothing)
    negative = tanh.TanhNegativeTerm(label_smoothing=smoothing)
    positive.update_state(SEQUENCE_TARGETS, SEQUENCE_LOGITS)
    negative.update_state(SEQUENCE_TARGETS, SEQUENCE_LOGITS)
    assert float(positive.result()) == pytest.approx(np.mean([t[0] for t in terms]), rel=1e-5)
    assert float(negative.result()) == pytest.approx(np.mean([t[1] for t in terms]), rel=1e-5)
    alpha = 0.4
    loss = tanh.TanhSconesLoss(alpha=alpha, label_smoothing=smoothing)
    assert float(loss(SEQUENCE_TARGETS, SEQUENCE_LOGITS)) == pytest.approx(
        float(positive.result()) + alpha * float(negative.result()), rel=1e-5
    )


def test_head_builds_its_loss_and_metrics_and_round_trips():
    head = heads.get("tanh")
    assert head == tanh.TanhHead() == heads.get({"name": "tanh"})
    loss = head.loss(alpha=0.3, label_smoothing=0.1)
    assert isinstance(loss, tanh.TanhSconesLoss) and (loss.alpha, loss.label_smoothing) == (
        0.3,
        0.1,
    )
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(loss))
    assert type(clone) is tanh.TanhSconesLoss and clone.get_config() == loss.get_config()
    assert heads.get(heads.serialize(head)) == head
    assert [type(metric) for metric in head.metrics()] == [
        tanh.TanhPositiveTerm,
        tanh.TanhNegativeTerm,
    ]


def test_output_bias_gives_each_token_the_sigmoid_heads_prior():
    bias = tanh.TanhHead().output_bias_initializer(32000)(shape=(4,))
    np.testing.assert_allclose(
        tanh.TanhHead().probabilities(bias),
        heads.SigmoidHead().probabilities(tf.fill([4], -math.log(32000))),
        rtol=1e-6,
    )


@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_a_wide_beam_finds_the_brute_force_n_best(length_penalty):
    table = make_table(seed=1)
    model = PrefixTableModel(table, "tanh")
    output = beam_search(
        model,
        SOURCE,
        beam_size=VOCAB ** (WIDTH - 1),
        num_hypotheses=3,
        length_penalty=length_penalty,
        **UNLIMITED,
    )
    for b, expected in enumerate(brute_force_best(table, "tanh", 3, length_penalty)):
        assert hypotheses(output, b) == [tokens for tokens, _ in expected]
        np.testing.assert_allclose(
            output.log_scores[b].numpy(), [score for _, score in expected], rtol=1e-5
        )
    greedy = greedy_decode(model, SOURCE, **UNLIMITED)
    beam_of_one = beam_search(model, SOURCE, beam_size=1, **UNLIMITED)
    np.testing.assert_array_equal(beam_of_one.ids[:, 0].numpy(), greedy.ids.numpy())
    np.testing.assert_allclose(beam_of_one.log_scores[:, 0], greedy.scores, rtol=1e-5)


def test_a_tiny_transformer_trains_decodes_and_survives_saving(tmp_path):
    model = harness.tiny_model(16, "tanh")
    assert isinstance(model.head, tanh.TanhHead)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=model.head.loss(alpha=0.5))
    source = np.array([[5, 6, 7, 1, 0], [8, 9, 1, 0, 0]])
    target_in = np.array([[3, 5, 6, 7], [3, 8, 9, 0]])
    target_out = np.array([[5, 6, 7, 1], [8, 9, 1, 0]])
    x = {"source_ids": source, "target_in_ids": target_in}
    history = model.fit(x, target_out, epochs=1, verbose=0).history
    assert np.isfinite(history["loss"]).all()
    greedy = greedy_decode(model, source, max_length=5)
    beam = beam_search(model, source, beam_size=3, max_length=5)
    for scores in (greedy.scores.numpy(), beam.scores[:, 0].numpy()):
        assert np.all(np.isfinite(scores)) and np.all(scores <= 0)
    restored = harness.saved_and_loaded(model, tmp_path)
    assert restored.head == model.head
    np.testing.assert_array_equal(
        restored(x, training=False).numpy(), model(x, training=False).numpy()
    )
    np.testing.assert_array_equal(greedy_decode(restored, source, max_length=5).ids, greedy.ids)
