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
from tfscones import heads
from tfscones.data.vocab_ids import BOS_ID, EOS_ID
from tfscones.decoding import ParallelExperts
from tfscones.decoding.beam import beam_search
from tfscones.decoding.exact import (
    candidate_entries,
    candidate_thresholds,
    candidates_by_row,
    exact_search,
)
from tfscones.models import LatentExpertTransformer


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


@pytest.mark.parametrize("head", HEADS)
def test_finding_the_beams_own_translation_is_no_improvement(head):
    table = make_table(seed=11)
    lengths = {"max_length_a": 0.0, "max_length_b": 2.0}
    # A beam over every prefix of two tokens finds the optimum: exact search can only confirm it.
    model = PrefixTableModel(table, head)
    for result in exact_search(model, SOURCE, beam_size=36, **lengths):
        assert result.ids == result.initial_ids
        assert not result.improved


def test_the_budget_stops_the_search_and_marks_it_incomplete():
    table = make_table(seed=13, scale=0.5)  # Flat scores: many prefixes stay worth expanding.
    model = PrefixTableModel(table, "softmax")
    unbounded = exact_search(model, SOURCE, beam_size=1, **UNLIMITED)
    assert all(result.complete for result in unbounded)
    assert max(result.states for result in unbounded) > 3
    bounded = exact_search(model, SOURCE, beam_size=1, state_budget=3, **UNLIMITED)
    for cut, full in zip(bounded, unbounded, strict=True):
        assert cut.states == min(3, full.states)
        assert cut.complete == (full.states <= 3)
        assert cut.initial_score <= cut.score <= full.score + 1e-6
    assert not all(result.complete for result in bounded)


def test_scoring_prefixes_one_row_per_call_changes_nothing():
    model = PrefixTableModel(make_table(seed=14), "sigmoid")
    batched = exact_search(model, SOURCE, beam_size=1, **UNLIMITED)
    one_by_one = exact_search(model, SOURCE, beam_size=1, rows_per_call=1, **UNLIMITED)
    assert [r.ids for r in batched] == [r.ids for r in one_by_one]
    assert [r.states for r in batched] == [r.states for r in one_by_one]


def real_model_brute_force(model, source, limit, **inputs):
    """Every sequence within `limit` tokens (ending with EOS or `limit` long), teacher-forced.

    `inputs` go to the model's `call` too (a latent-expert model's `expert`, one per source).
    """
    sequences = [
        tokens
        for length in range(1, limit + 1)
        for tokens in itertools.product(range(model.vocabulary_size), repeat=length)
        if EOS_ID not in tokens[:-1] and (length == limit or tokens[-1] == EOS_ID)
    ]
    target_out = tf.ragged.constant(sequences, tf.int32).to_tensor()
    target_in = tf.concat([tf.fill([len(sequences), 1], BOS_ID), target_out[:, :-1]], axis=1)
    sources = tf.repeat(source, len(sequences), axis=0)
    repeated = {name: tf.repeat(value, len(sequences), axis=0) for name, value in inputs.items()}
    logits = model({"source_ids": sources, "target_in_ids": target_in, **repeated})
    token_scores = tf.gather(model.head.log_scores(logits), target_out, batch_dims=2)
    mask = tf.sequence_mask([len(tokens) for tokens in sequences], limit)
    scores = tf.reduce_sum(tf.where(mask, token_scores, 0.0), axis=1).numpy()
    best = int(np.argmax(scores))
    return sequences[best], float(scores[best])


@pytest.mark.parametrize("head", list(harness.EVERY_HEAD))
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


def test_latent_experts_search_as_they_are_trained_bos_first_and_one_expert_per_row():
    """Exact search's optimum is that of teacher forcing through `call`, where BOS is expert 0."""
    model = harness.tiny_model(8, model_class=LatentExpertTransformer, num_experts=2)
    source = tf.constant([[4, 5, 6, EOS_ID], [7, 5, EOS_ID, 0]], tf.int32)
    limit = {"max_length_a": 0.0, "max_length_b": 3.0}
    for b, result in enumerate(exact_search(model, source, beam_size=1, **limit)):
        tokens, score = real_model_brute_force(model, source[b : b + 1], limit=3)
        assert (result.ids, result.complete) == (tokens, True)
        assert result.score == pytest.approx(score, rel=1e-4, abs=1e-5)
    experts = ParallelExperts(model)
    results = exact_search(experts, experts.tile_sources(source), beam_size=1, **limit)
    for row, result in enumerate(results):
        b, expert = divmod(row, 2)
        expert_input = tf.constant([expert], tf.int32)
        tokens, score = real_model_brute_force(model, source[b : b + 1], 3, expert=expert_input)
        assert (result.ids, result.complete) == (tokens, True)
        assert result.score == pytest.approx(score, rel=1e-4, abs=1e-5)


class UncachedSteps(harness.FakeStepModel):
    """A Transformer stepped without its cache: each step runs the whole prefix through it.

    How exact search scored prefixes before it kept caches. The cache holds the fed tokens;
    `decode_step` writes the token at `index` (one per row, or one for all) and teacher-forces
    the row's tokens through `model.decode`, reading the logits at `index`. Its cross-attention
    cache is unused (zeros, one per row).
    """

    def __init__(self, model):
        self.model = model
        self.head = model.head
        self.max_sequence_length = model.max_sequence_length

    def encode(self, source_ids):
        return self.model.encode(source_ids)

    def cross_attention_cache(self, encoder_outputs):
        return tf.zeros(tf.shape(encoder_outputs)[:1])

    def initial_cache(self, batch_size, max_length):
        return tf.zeros([batch_size, max_length], tf.int32)

    def decode_step(self, token_ids, encoder_outputs, padding_mask, cache, index, **_):
        index = tf.broadcast_to(index, tf.shape(token_ids))
        written = tf.range(tf.shape(cache)[1])[tf.newaxis] == index[:, tf.newaxis]
        cache = tf.where(written, token_ids[:, tf.newaxis], cache)
        logits = self.model.decode(cache, encoder_outputs, padding_mask, training=False)
        return tf.gather(logits, index, batch_dims=1), cache


_SEARCH_VARIANTS = [
    pytest.param(head, budget, hidden, id=f"{name}-{budget}-{head}")
    for name, hidden, head_names in [
        ("prefixes-grouped", {}, ["softmax", "sigmoid", "entmax15"]),
        ("slots-grouped", {"caches_prefixes": False}, ["softmax", "sigmoid", "entmax15"]),
        ("prefixes-copied-sources", {"shares_sources": False}, ["sigmoid"]),
    ]
    for head in head_names
    for budget in [10, 1000]
]


@pytest.mark.parametrize("head, budget, hidden", _SEARCH_VARIANTS)
def test_cached_steps_search_exactly_as_whole_prefix_scoring(head, budget, hidden):
    """Same answers, states and completeness as scoring every prefix from scratch, whether
    the steps run on each row's prefix (`PrefixCache`) or on a cache of slots, and whether a
    step reads each sentence's encoder tensors once (`SourceGroups`) or copies them to every
    row."""
    model = harness.tiny_model(10, head, eos_bias=-4.0)  # Long searches: EOS is unlikely.
    source = tf.constant([[4, 5, 6, EOS_ID], [7, 5, EOS_ID, 0], [9, EOS_ID, 0, 0]], tf.int32)
    settings = dict(beam_size=1, state_budget=budget, rows_per_call=16, max_length_a=1.0)
    searched = harness.restricted(model, **hidden)
    cached = exact_search(searched, source, max_length_b=3.0, **settings)
    uncached = exact_search(UncachedSteps(model), source, max_length_b=3.0, **settings)
    assert [r.ids for r in cached] == [r.ids for r in uncached]
    assert [r.states for r in cached] == [r.states for r in uncached]
    assert [r.complete for r in cached] == [r.complete for r in uncached]
    for mine, theirs in zip(cached, uncached, strict=True):
        assert mine.score == pytest.approx(theirs.score, rel=1e-5, abs=1e-5)
        assert mine.initial_score == pytest.approx(theirs.initial_score, rel=1e-5, abs=1e-5)
    if budget == 10:
        assert not all(result.complete for result in cached)
        assert all(result.states == budget for result in cached if not result.complete)
    else:
        assert all(result.complete for result in cached)
        assert max(result.states for result in cached) > 16


@pytest.mark.parametrize(
    "argument, value", [("state_budget", 0), ("beam_size", 0), ("rows_per_call", 0)]
)
def test_bad_settings_are_named(argument, value):
    model = PrefixTableModel(make_table(seed=0), "softmax")
    with pytest.raises(ValueError, match=argument):
        exact_search(model, SOURCE, **{argument: value})


@pytest.mark.parametrize("head_name", ["softmax", "sigmoid", "tanh"])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_candidates_are_every_child_that_beats_its_bound_and_eos(head_name, jit_compile):
    """The same candidates whether a head compares log scores (softmax) or logits (SCONES)."""
    head = heads.get(head_name)
    logits = np.array(
        [
            [1.0, -1.0, -2.0, 2.0],
            [-4.0, -4.0, -4.0, -4.0],  # No token beats this row's bound; EOS (id 1) is kept.
            [-2.0, 5.0, -7.0, -2.5],
        ],
        np.float32,
    )
    log_scores = head.log_scores(logits).numpy().astype(np.float64)
    prefix_scores = np.array([-10.0, -1.0, -3.0])
    # Row 0's token 1 ties its bound (kept, within the margin; `expand` drops it); row 2's
    # token 0 beats its bound by 1e-12, which float32 cannot tell from a tie.
    best = prefix_scores + [log_scores[0, 1], log_scores[1, 0] + 0.5, log_scores[2, 0] - 1e-12]
    thresholds = candidate_thresholds(best - prefix_scores)
    find = tf.function(candidate_entries, jit_compile=jit_compile)
    entries = [t.numpy() for t in find(head, tf.constant(logits), tf.constant(thresholds))]
    candidates = candidates_by_row(*entries, row_count=3)
    assert [tokens.tolist() for tokens, _ in candidates] == [[0, 1, 3], [1], [0, 1]]
    for row, (tokens, scores) in enumerate(candidates):
        np.testing.assert_array_equal(scores, log_scores[row, tokens].astype(np.float32))
        beating = np.flatnonzero(prefix_scores[row] + log_scores[row] > best[row])
        assert set(beating) <= set(tokens.tolist())
