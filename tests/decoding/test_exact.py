import itertools

import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tests.decoding.prefix_table import (
    HEADS,
    SOURCE,
    UNLIMITED,
    PrefixTableModel,
    brute_force_best,
    code_of,
    make_table,
)
from tfscones.data.vocab_ids import BOS_ID, EOS_ID
from tfscones.decoding.beam import beam_search
from tfscones.decoding.exact import exact_search


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("limit", [2, 4])
def test_exact_search_finds_the_brute_force_optimum(head, limit):
    table = make_table(seed=11)
    lengths = {"max_length_a": 0.0, "max_length_b": float(limit)}
    results = exact_search(PrefixTableModel(table, head), SOURCE, beam_size=1, **lengths)
    for result, expected in zip(
        results, brute_force_best(table, head, 1, limit=limit), strict=True
    ):
        tokens, score = expected[0]
        assert result.ids == tokens
        assert result.score == pytest.approx(score, rel=1e-5)
        assert result.complete


def optimum_behind_a_bad_start():
    """Sentence 0's best translation starts with the token that looks worse at the first step."""
    table = make_table(seed=2)
    table[0, code_of(()), [EOS_ID, 4, 5]] = [-8.0, 2.0, 1.8]
    table[0, code_of((5,)), EOS_ID] = 10.0
    table[0, code_of((4,)), [EOS_ID, 4, 5]] = 0.0
    return table


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("beam_size", [1, 2])
def test_exact_search_is_never_worse_than_beam_search(head, beam_size):
    for table in (make_table(seed=12), optimum_behind_a_bad_start()):
        model = PrefixTableModel(table, head)
        beam = beam_search(model, SOURCE, beam_size=beam_size, **UNLIMITED)
        results = exact_search(model, SOURCE, beam_size=beam_size, **UNLIMITED)
        for result, beam_score in zip(results, beam.log_scores[:, 0].numpy(), strict=True):
            assert result.initial_score == pytest.approx(beam_score)
            assert result.score >= beam_score - 1e-6


def test_exact_search_improves_on_greedy_where_greedy_misses():
    table = optimum_behind_a_bad_start()
    results = exact_search(PrefixTableModel(table, "softmax"), SOURCE, beam_size=1, **UNLIMITED)
    assert results[0].ids == (5, EOS_ID)
    assert results[0].improved


def test_the_budget_stops_the_search_and_marks_it_incomplete():
    table = make_table(seed=13, scale=0.5)  # Flat scores: many prefixes stay worth expanding.
    model = PrefixTableModel(table, "softmax")
    unbounded = exact_search(model, SOURCE, beam_size=1, **UNLIMITED)
    assert all(result.complete for result in unbounded)
    assert max(result.states for result in unbounded) > 3
    bounded = exact_search(model, SOURCE, beam_size=1, state_budget=3, **UNLIMITED)
    for cut, full in zip(bounded, unbounded, strict=True):
        assert cut.states <= 3
        assert cut.complete == (full.states <= 3)
        assert cut.initial_score <= cut.score <= full.score + 1e-6
    assert not all(result.complete for result in bounded)


def test_scoring_prefixes_one_row_per_call_changes_nothing():
    model = PrefixTableModel(make_table(seed=14), "sigmoid")
    batched = exact_search(model, SOURCE, beam_size=1, **UNLIMITED)
    one_by_one = exact_search(model, SOURCE, beam_size=1, rows_per_call=1, **UNLIMITED)
    assert [r.ids for r in batched] == [r.ids for r in one_by_one]
    assert [r.states for r in batched] == [r.states for r in one_by_one]


def real_model_brute_force(model, source, limit):
    """Every sequence within `limit` tokens (ending with EOS or `limit` long), teacher-forced."""
    sequences = [
        tokens
        for length in range(1, limit + 1)
        for tokens in itertools.product(range(model.vocabulary_size), repeat=length)
        if EOS_ID not in tokens[:-1] and (length == limit or tokens[-1] == EOS_ID)
    ]
    target_out = tf.ragged.constant(sequences, tf.int32).to_tensor()
    target_in = tf.concat([tf.fill([len(sequences), 1], BOS_ID), target_out[:, :-1]], axis=1)
    sources = tf.repeat(source, len(sequences), axis=0)
    logits = model({"source_ids": sources, "target_in_ids": target_in})
    token_scores = tf.gather(model.head.log_scores(logits), target_out, batch_dims=2)
    mask = tf.sequence_mask([len(tokens) for tokens in sequences], limit)
    scores = tf.reduce_sum(tf.where(mask, token_scores, 0.0), axis=1).numpy()
    best = int(np.argmax(scores))
    return sequences[best], float(scores[best])


@pytest.mark.parametrize("head", ["softmax", "sigmoid", "entmax15"])
def test_on_a_real_model_exact_search_finds_the_enumerated_optimum(head):
    model = harness.tiny_model(8, head)
    source = tf.constant([[4, 5, 6, EOS_ID], [7, 5, EOS_ID, 0]], tf.int32)
    limit = {"max_length_a": 0.0, "max_length_b": 3.0}
    results = exact_search(model, source, beam_size=1, rows_per_call=7, **limit)
    for b, result in enumerate(results):
        tokens, score = real_model_brute_force(model, source[b : b + 1], limit=3)
        assert result.complete
        assert result.ids == tokens
        assert result.score == pytest.approx(score, rel=1e-4, abs=1e-5)


@pytest.mark.parametrize(
    "argument, value", [("state_budget", 0), ("beam_size", 0), ("rows_per_call", 0)]
)
def test_bad_settings_are_named(argument, value):
    model = PrefixTableModel(make_table(seed=0), "softmax")
    with pytest.raises(ValueError, match=argument):
        exact_search(model, SOURCE, **{argument: value})
