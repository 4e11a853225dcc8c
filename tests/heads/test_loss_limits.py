"""Every loss at the edges of floating point: infinite logits give the limit, in every mode.

A -inf logit rules a token out, a +inf logit makes it certain (`tfscones.heads.loss_base`); the
expected values are the limits of the equations, checked against very large finite logits where
the limit is finite.
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from tests import harness

HEADS = harness.EVERY_HEAD_AND_BISECTION
MODES = ["eager", "graph", "xla"]
ROW = [1.0, 0.5, -0.5, 2.0]  # the gold token is 0


def loss_value(head_name: str, mode: str, row: list[float], label_smoothing: float = 0.0):
    """The loss of one row with gold token 0 (a classification target, so nothing is masked)."""
    loss = HEADS[head_name].build_loss(label_smoothing=label_smoothing)

    def value(logits):
        return loss(tf.constant([0]), logits)

    if mode != "eager":
        value = tf.function(value, jit_compile=mode == "xla")
    return float(value(tf.constant([row], tf.float32)))


def with_logit(index: int, logit: float) -> list[float]:
    row = list(ROW)
    row[index] = logit
    return row


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize(
    "row", [with_logit(0, -math.inf), with_logit(1, math.inf)], ids=["gold -inf", "wrong +inf"]
)
def test_a_ruled_out_gold_token_costs_infinity(head, mode, row):
    assert loss_value(head, mode, row) == math.inf


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("head", HEADS)
def test_smoothing_onto_a_masked_token_costs_infinity(head, mode):
    assert loss_value(head, mode, with_logit(2, -math.inf), label_smoothing=0.1) == math.inf


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize(
    ("index", "limit", "large"),
    [(2, -math.inf, -100.0), (0, math.inf, 100.0)],
    ids=["masked", "sure"],
)
def test_a_finite_limit_is_the_loss_of_a_very_large_logit(head, mode, index, limit, large):
    at_limit = loss_value(head, mode, with_logit(index, limit))
    assert math.isfinite(at_limit)
    assert at_limit == pytest.approx(loss_value(head, mode, with_logit(index, large)), abs=1e-5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("head", HEADS)
def test_a_nan_logit_gives_a_nan_loss(head, mode):
    assert math.isnan(loss_value(head, mode, with_logit(3, math.nan)))


@pytest.mark.parametrize("head", HEADS)
def test_a_masked_wrong_token_gets_no_gradient_and_the_others_finite_ones(head):
    loss = HEADS[head].build_loss()
    logits = tf.constant([with_logit(2, -math.inf)])
    with tf.GradientTape() as tape:
        tape.watch(logits)
        value = loss(tf.constant([0]), logits)
    gradient = tape.gradient(value, logits).numpy()[0]
    assert np.all(np.isfinite(gradient)) and gradient[2] == 0.0
