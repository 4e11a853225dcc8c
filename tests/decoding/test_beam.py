import itertools

import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tests.decoding.prefix_table import (
    HEADS,
    SOURCE,
    UNLIMITED,
    VOCAB,
    WIDTH,
    PrefixTableModel,
    brute_force_best,
    code_of,
    hypotheses,
    make_table,
    sentence_index,
)
from tfscones import heads
from tfscones.data.vocab_ids import EOS_ID
from tfscones.decoding import common
from tfscones.decoding.beam import beam_search, diverse_beam_search, length_penalty_factor
from tfscones.decoding.greedy import greedy_decode
from tfscones.ops import entmax


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_a_wide_beam_finds_the_brute_force_n_best(head, length_penalty):
    table = make_table(seed=1)
    # Beam VOCAB**(WIDTH-1) keeps every prefix alive: the search is exhaustive.
    output = beam_search(
        PrefixTableModel(table, head),
        SOURCE,
        beam_size=VOCAB ** (WIDTH - 1),
        num_hypotheses=3,
        length_penalty=length_penalty,
        **UNLIMITED,
    )
    for b, expected in enumerate(brute_force_best(table, head, 3, length_penalty)):
        assert hypotheses(output, b) == [tokens for tokens, _ in expected]
        found = len(expected)  # Sparse heads may allow fewer than 3 hypotheses.
        np.testing.assert_allclose(
            output.log_scores[b, :found].numpy(), [score for _, score in expected], rtol=1e-5
        )
        assert np.all(np.isneginf(output.scores[b, found:].numpy()))
    lengths = tf.cast(output.lengths, tf.float32)
    np.testing.assert_allclose(
        output.scores.numpy(),
        output.log_scores.numpy() / ((5.0 + lengths.numpy()) / 6.0) ** length_penalty,
        rtol=1e-5,
    )


def test_beam_finds_the_optimum_that_greedy_misses():
    table = make_table(seed=2)
    # Sentence 0: word 4 is the best first token, but only a poor continuation follows it,
    # while word 5 is followed by an almost certain EOS.
    table[0, code_of(()), [EOS_ID, 4, 5]] = [-8.0, 2.0, 1.8]
    table[0, code_of((5,)), EOS_ID] = 10.0
    for prefix in itertools.product([4, 5], repeat=1), itertools.product([4, 5], repeat=2):
        for tokens in prefix:
            if tokens[0] == 4:
                table[0, code_of(tokens), [EOS_ID, 4, 5]] = 0.0
    model = PrefixTableModel(table, "softmax")
    best = brute_force_best(table, "softmax", 1)
    greedy = greedy_decode(model, SOURCE, **UNLIMITED)
    missed = [b for b in range(4) if greedy.scores[b].numpy() < best[b][0][1] - 1e-4]
    assert missed, "the table should have a sentence whose optimum greedy search misses"
    output = beam_search(model, SOURCE, beam_size=8, **UNLIMITED)
    for b in missed:
        assert hypotheses(output, b)[0] == best[b][0][0]
        assert output.scores[b, 0].numpy() > greedy.scores[b].numpy() + 1e-4


@pytest.mark.parametrize("head", HEADS)
def test_beam_of_one_is_greedy(head):
    model = PrefixTableModel(make_table(seed=3), head)
    greedy = greedy_decode(model, SOURCE, **UNLIMITED)
    beam = beam_search(model, SOURCE, beam_size=1, **UNLIMITED)
    np.testing.assert_array_equal(beam.ids[:, 0].numpy(), greedy.ids.numpy())
    np.testing.assert_array_equal(beam.lengths[:, 0].numpy(), greedy.lengths.numpy())
    np.testing.assert_allclose(beam.log_scores[:, 0].numpy(), greedy.scores.numpy(), rtol=1e-5)


def test_scones_scores_are_sums_of_log_sigmoids():
    table = make_table(seed=4)
    output = beam_search(
        PrefixTableModel(table, "sigmoid"), SOURCE, beam_size=4, num_hypotheses=4, **UNLIMITED
    )
    for b, row in enumerate(SOURCE.numpy()):
        for i, tokens in enumerate(hypotheses(output, b)):
            logits = [
                table[sentence_index(row), code_of(tokens[:j]), t] for j, t in enumerate(tokens)
            ]
            expected = np.sum(np.log(1.0 / (1.0 + np.exp(-np.array(logits, np.float64)))))
            np.testing.assert_allclose(output.log_scores[b, i].numpy(), expected, rtol=1e-5)


@pytest.mark.parametrize("alpha", [1.5, 2.0])
def test_entmax_never_emits_a_zero_probability_token(alpha):
    table = make_table(seed=5, scale=4.0)
    probabilities = entmax.entmax(tf.constant(table), alpha).numpy()
    assert np.mean(probabilities == 0.0) > 0.3, "the table should make entmax sparse"
    output = beam_search(
        PrefixTableModel(table, heads.EntmaxHead(alpha)),
        SOURCE,
        beam_size=8,
        num_hypotheses=8,
        **UNLIMITED,
    )
    for b, row in enumerate(SOURCE.numpy()):
        for tokens in hypotheses(output, b):
            for j, token in enumerate(tokens):
                assert probabilities[sentence_index(row), code_of(tokens[:j]), token] > 0.0
    # Fewer hypotheses exist than slots asked for: empty slots are marked, not invented.
    empty = output.lengths.numpy() == 0
    assert np.all(np.isneginf(output.scores.numpy()[empty]))


def eos_first_table():
    """EOS is by far the best first token, so beam search can stop after its first step."""
    table = make_table(seed=6)
    table[:, code_of(()), EOS_ID] = 12.0
    return table


@pytest.mark.parametrize("head", HEADS)
def test_early_stop_is_exact(head):
    for table in (make_table(seed=6), eos_first_table()):
        early_model = PrefixTableModel(table, head)
        early = beam_search(early_model, SOURCE, beam_size=3, num_hypotheses=2, **UNLIMITED)
        padded_model = PrefixTableModel(table, head)
        padded = beam_search(
            padded_model, SOURCE, beam_size=3, num_hypotheses=2, padded=True, **UNLIMITED
        )
        for field in ("ids", "lengths", "scores", "log_scores"):
            np.testing.assert_allclose(getattr(early, field), getattr(padded, field), rtol=1e-6)
        assert padded_model.steps == WIDTH
    # With EOS far ahead, the best finished hypothesis (EOS alone) beats every alive prefix's
    # bound after one step for one hypothesis, and the search stops there.
    early_model = PrefixTableModel(eos_first_table(), head)
    output = beam_search(early_model, SOURCE, beam_size=3, num_hypotheses=1, **UNLIMITED)
    np.testing.assert_array_equal(output.ids[:, 0, 0].numpy(), [EOS_ID] * 4)
    assert early_model.steps == 1


def test_length_limit_cuts_hypotheses_without_eos():
    table = make_table(seed=7)
    table[..., EOS_ID] = -8.0  # EOS is never chosen: every hypothesis runs to its limit.
    output = beam_search(
        PrefixTableModel(table, "softmax"),
        SOURCE,
        beam_size=4,
        num_hypotheses=2,
        max_length_a=1.0,
        max_length_b=0.0,
    )
    # Limits are the source lengths: 3, 2, 3 and 3 tokens.
    np.testing.assert_array_equal(output.lengths.numpy(), [[3, 3], [2, 2], [3, 3], [3, 3]])
    assert not np.any(output.ids.numpy() == EOS_ID)
    best = brute_force_best(table, "softmax", 2, limit=2)
    assert hypotheses(output, 1) == [tokens for tokens, _ in best[1]]


def test_length_penalty_factor_is_gnmt():
    lengths = tf.constant([1, 4, 10])
    np.testing.assert_allclose(
        length_penalty_factor(lengths, 0.6).numpy(), [(6 / 6) ** 0.6, (9 / 6) ** 0.6, 2.5**0.6]
    )
    np.testing.assert_allclose(length_penalty_factor(lengths, 0.0).numpy(), [1.0, 1.0, 1.0])


def test_diverse_groups_differ_and_keep_model_scores():
    table = make_table(seed=8)
    model = PrefixTableModel(table, "softmax")
    plain = beam_search(model, SOURCE, beam_size=4, num_hypotheses=2, **UNLIMITED)
    diverse = diverse_beam_search(
        model, SOURCE, beam_size=4, num_groups=2, diversity_strength=100.0, **UNLIMITED
    )
    log_scores = heads.get("softmax").log_scores(table).numpy()
    for b, row in enumerate(SOURCE.numpy()):
        first, second = hypotheses(diverse, b)
        # The second group was pushed off the first group's first token.
        assert first[0] != second[0]
        for i, tokens in enumerate((first, second)):
            expected = sum(
                log_scores[sentence_index(row), code_of(tokens[:j]), t]
                for j, t in enumerate(tokens)
            )
            np.testing.assert_allclose(diverse.log_scores[b, i].numpy(), expected, rtol=1e-5)
        assert diverse.scores[b, 0] >= diverse.scores[b, 1]
    # Plain beam search's two best share their first token somewhere; diversity changes that.
    assert any(hypotheses(plain, b)[0][0] == hypotheses(plain, b)[1][0] for b in range(4))


def test_diverse_beam_with_one_group_is_beam_search():
    model = PrefixTableModel(make_table(seed=9), "sigmoid")
    plain = beam_search(model, SOURCE, beam_size=4, num_hypotheses=2, **UNLIMITED)
    diverse = diverse_beam_search(
        model, SOURCE, beam_size=4, num_groups=1, hypotheses_per_group=2, **UNLIMITED
    )
    for field in ("ids", "lengths", "scores", "log_scores"):
        np.testing.assert_allclose(getattr(plain, field), getattr(diverse, field), rtol=1e-6)


def test_arguments_out_of_range_are_rejected():
    model = PrefixTableModel(make_table(seed=0), "softmax")
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, SOURCE, beam_size=0)
    with pytest.raises(ValueError, match=r"num_hypotheses must be a whole number in \[1, 2\]"):
        beam_search(model, SOURCE, beam_size=2, num_hypotheses=3)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(model, SOURCE, length_penalty=-0.5)
    with pytest.raises(ValueError, match="multiple of num_groups"):
        diverse_beam_search(model, SOURCE, beam_size=5, num_groups=2)
    with pytest.raises(ValueError, match="diversity_strength"):
        diverse_beam_search(model, SOURCE, diversity_strength=float("nan"))
    with pytest.raises(ValueError, match="hypotheses_per_group"):
        diverse_beam_search(model, SOURCE, beam_size=4, num_groups=2, hypotheses_per_group=3)


# A real, randomly initialised model: XLA, tf.function and eager agree; padded equals dynamic.

REAL_VOCAB = 24
REAL_SOURCE = tf.constant(
    [[5, 6, 7, 8, 9, 1, 0], [10, 1, 0, 0, 0, 0, 0], [11, 12, 13, 14, 15, 16, 1]], tf.int32
)


@pytest.fixture(scope="module")
def tiny_model():
    return harness.tiny_model(REAL_VOCAB, "sigmoid", max_sequence_length=12, eos_bias=3.0)


def test_xla_function_and_eager_agree(tiny_model):
    def search(source, jit_compile=False):
        return beam_search(
            tiny_model,
            source,
            beam_size=3,
            num_hypotheses=2,
            length_penalty=0.6,
            jit_compile=jit_compile,
        )

    eager = search(REAL_SOURCE)
    xla = tf.function(lambda source: search(source, jit_compile=True), jit_compile=True)
    for compiled in (tf.function(search), xla):
        output = compiled(REAL_SOURCE)
        np.testing.assert_array_equal(output.ids.numpy(), eager.ids.numpy())
        np.testing.assert_array_equal(output.lengths.numpy(), eager.lengths.numpy())
        np.testing.assert_allclose(output.scores.numpy(), eager.scores.numpy(), rtol=1e-4)


def test_padded_mode_and_padded_source_equal_dynamic(tiny_model):
    dynamic = beam_search(tiny_model, REAL_SOURCE, beam_size=3, num_hypotheses=3)
    wider_source = tf.pad(REAL_SOURCE, [[0, 0], [0, 9]])
    padded = beam_search(tiny_model, wider_source, beam_size=3, num_hypotheses=3, padded=True)
    np.testing.assert_array_equal(padded.ids.numpy(), dynamic.ids.numpy())
    np.testing.assert_array_equal(padded.lengths.numpy(), dynamic.lengths.numpy())
    np.testing.assert_allclose(padded.scores.numpy(), dynamic.scores.numpy(), rtol=1e-4, atol=1e-5)


def fixed_cache_only(model):
    """The model's stepper without `grows_cache`: the decoders use its `initial_cache`."""
    return harness.restricted(model, grows_cache=False)


@pytest.mark.parametrize("head", list(harness.EVERY_HEAD))
def test_growing_and_fixed_caches_give_the_same_search(head):
    """The growing cache (outside XLA) and the fixed one (XLA's) find the same hypotheses."""
    model = harness.tiny_model(REAL_VOCAB, head, max_sequence_length=12, eos_bias=1.0)
    fixed_model = fixed_cache_only(model)
    assert model.stepper().capabilities.grows_cache
    assert not fixed_model.capabilities.grows_cache
    for search in (
        lambda m: beam_search(m, REAL_SOURCE, beam_size=3, num_hypotheses=3, length_penalty=0.6),
        lambda m: greedy_decode(m, REAL_SOURCE),
    ):
        growing, fixed = search(model), search(fixed_model)
        np.testing.assert_array_equal(growing.ids.numpy(), fixed.ids.numpy())
        np.testing.assert_array_equal(growing.lengths.numpy(), fixed.lengths.numpy())
        np.testing.assert_allclose(growing.scores.numpy(), fixed.scores.numpy(), rtol=1e-5)


@pytest.mark.parametrize(
    "head, jit_compile",
    [("softmax", False), ("sigmoid", False), ("entmax15", False), ("softmax", True)],
)
def test_beams_sharing_their_sentence_cross_attention_search_as_repeated_sources(head, jit_compile):
    """Beams read their sentence's cross-attention keys once (`rows_per_source`): the same search
    as with the keys repeated to every beam, for plain and diverse beam search, with the growing
    cache and under XLA."""
    model = harness.tiny_model(REAL_VOCAB, head, max_sequence_length=12, eos_bias=1.0)
    # Beam search repeats the encoder's tensors to every beam, as for every model before sharing.
    repeated = harness.restricted(model, shares_sources=False)
    assert model.stepper().capabilities.shares_sources
    searches = (
        lambda m, s: beam_search(
            m, s, beam_size=3, num_hypotheses=3, length_penalty=0.6, jit_compile=jit_compile
        ),
        lambda m, s: diverse_beam_search(
            m, s, beam_size=4, num_groups=2, hypotheses_per_group=2, jit_compile=jit_compile
        ),
    )
    for search in searches:
        shared, tiled = (
            tf.function(lambda s, m=m, f=search: f(m, s), jit_compile=jit_compile)(REAL_SOURCE)
            for m in (model, repeated)
        )
        np.testing.assert_array_equal(shared.ids.numpy(), tiled.ids.numpy())
        np.testing.assert_array_equal(shared.lengths.numpy(), tiled.lengths.numpy())
        np.testing.assert_allclose(shared.scores.numpy(), tiled.scores.numpy(), rtol=1e-6)
        np.testing.assert_allclose(shared.log_scores.numpy(), tiled.log_scores.numpy(), rtol=1e-6)


def test_the_search_loop_takes_the_blockwise_top_k_of_a_large_vocabulary(monkeypatch):
    """The candidates' row, `beam_size * vocabulary` scores, keeps its static length in the
    loop (the batch is dynamic), so `common.top_k` cuts it into blocks: three top-k ops for the
    candidates (block maxima, `tf.sort` of the blocks chosen, within them), besides the alive
    and finished sets' own; the search is the same as with `tf.math.top_k`."""
    vocabulary_size = 8 * 8 * common.TOP_K_BLOCK // 4 + 1
    model = harness.small_model(vocabulary_size)

    def search():
        return tf.function(lambda source: beam_search(model, source, beam_size=4, max_length=5))

    blockwise = search()
    graph = blockwise.get_concrete_function(tf.TensorSpec([None, None], tf.int32)).graph
    bodies = [f for f in graph.as_graph_def().library.function if "while_body" in f.signature.name]
    # Two loops: over every sentence (for a batch of one), over the sentences still going.
    searching = [f for f in bodies if any(n.op == "TopKV2" for n in f.node_def)]
    assert len(searching) == 2
    for body in searching:
        assert sum(node.op == "TopKV2" for node in body.node_def) == 5
    found = blockwise(REAL_SOURCE)
    monkeypatch.setattr(common, "TOP_K_BLOCK", vocabulary_size)  # too long a block: tf's top-k
    expected = search()(REAL_SOURCE)
    np.testing.assert_array_equal(found.ids.numpy(), expected.ids.numpy())
    # Two graphs sum the same log scores with other fusions and thread splits, so the sums may
    # differ in their last bits (-31.708464 against -31.708466 seen): a few float32 ulps.
    np.testing.assert_allclose(found.scores.numpy(), expected.scores.numpy(), rtol=1e-6)


@pytest.mark.parametrize("head", ["softmax", "entmax15"])
@pytest.mark.parametrize("num_groups", [1, 2])
def test_done_sentences_leave_the_batch_and_the_search_is_the_same(head, num_groups):
    model = harness.tiny_model(REAL_VOCAB, head, max_sequence_length=12, eos_bias=0.5)
    source = tf.concat([REAL_SOURCE, REAL_SOURCE[::-1]], axis=0)

    def search(m):
        # Length limits of 2 to 7 tokens, so that sentences are done at different steps.
        return diverse_beam_search(
            m,
            source,
            beam_size=4,
            num_groups=num_groups,
            diversity_strength=1.0,
            max_length_a=1.0,
            max_length_b=0.0,
        )

    counting = harness.RowCounting(model)
    found, expected = search(counting), search(fixed_cache_only(model))
    # Sentences were done at different steps and left the batch then, with all their beams.
    assert counting.rows[0] == 6 * 4 and counting.rows[-1] < counting.rows[0]
    assert all(rows % 4 == 0 for rows in counting.rows)
    np.testing.assert_array_equal(found.ids.numpy(), expected.ids.numpy())
    np.testing.assert_array_equal(found.lengths.numpy(), expected.lengths.numpy())
    np.testing.assert_allclose(found.scores.numpy(), expected.scores.numpy(), rtol=1e-5)
    np.testing.assert_allclose(found.log_scores.numpy(), expected.log_scores.numpy(), rtol=1e-5)
