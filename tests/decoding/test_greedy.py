import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tfscones import heads
from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID
from tfscones.decoding import (
    encode_source,
    greedy_decode,
    max_output_length,
    output_length_limits,
)

VOCAB = 9
WRONG = 8  # The table model's answer when it is fed a token greedy search should not have fed.


class TableModel(harness.FakeStepModel):
    """A fake model whose step `t` logits come from a fixed table (as OpenNMT-tf's tests do).

    Row `b` of step `t` is `table[b, t]`, but only when the token fed at `t` is the previous
    step's argmax (BOS at step 0); otherwise every logit is low except `WRONG`'s. So greedy search
    reproduces the table's argmax sequence only if it feeds its own choices back. It also insists
    on the cross-attention cache.
    """

    def __init__(self, table, head, max_sequence_length=8):
        super().__init__(table, head, max_sequence_length)
        argmax = tf.argmax(self.table, axis=-1, output_type=tf.int32)
        bos = tf.fill([argmax.shape[0], 1], BOS_ID)
        self.expected_inputs = tf.concat([bos, argmax[:, :-1]], axis=1)

    def step_logits(self, token_ids, index, encoder_outputs, cross_attention_cache, cache):
        assert cross_attention_cache is not None
        expected = tf.gather(self.expected_inputs, index, axis=1)
        wrong = tf.one_hot(tf.fill(tf.shape(token_ids), WRONG), VOCAB, on_value=50.0)
        logits = tf.where(
            tf.equal(token_ids, expected)[:, None], tf.gather(self.table, index, axis=1), wrong
        )
        return logits, cache


def make_table(sequences, length, seed=0):
    """Random logits `[batch, length, VOCAB]` whose argmax at step t is `sequences[b][t]`.

    Steps past a sequence's end are filled with argmax 5. Margins are small (1 to 2), so that
    entmax keeps several tokens in its support and the heads score differently.
    """
    rng = np.random.default_rng(seed)
    table = rng.normal(size=[len(sequences), length, VOCAB]).astype(np.float32)
    table[..., WRONG] = -10.0
    for b, sequence in enumerate(sequences):
        for t in range(length):
            token = sequence[t] if t < len(sequence) else 5
            table[b, t, token] = table[b, t].max() + rng.uniform(1.0, 2.0)
    return table


# Sentence 0 ends at step 2, sentence 1 at step 3; sentence 2 never produces EOS.
SEQUENCES = [[4, 5, EOS_ID], [6, 6, 7, EOS_ID], [5, 4, 6, 7, 4, 5, 6, 7]]
# Source lengths 4, 5 and 2 (non-pad tokens): with a = 1, b = 1 the limits are 5, 6 and 3.
SOURCE = tf.constant([[4, 5, 6, 1, 0], [4, 5, 6, 7, 1], [7, 1, 0, 0, 0]], tf.int32)


def expected_scores(table, head, ids, lengths):
    log_scores = heads.get(head).log_scores(table).numpy()
    return np.array(
        [sum(log_scores[b, t, ids[b, t]] for t in range(lengths[b])) for b in range(len(ids))]
    )


@pytest.mark.parametrize(
    "head", ["softmax", "sigmoid", heads.EntmaxHead(alpha=1.5), heads.EntmaxHead(alpha=2.0)]
)
def test_greedy_follows_the_table_stops_at_eos_and_at_the_length_limit(head):
    table = make_table(SEQUENCES, 8)
    model = TableModel(table, head)
    output = greedy_decode(model, SOURCE, max_length_a=1.0, max_length_b=1.0)
    expected_ids = [
        [4, 5, EOS_ID, 0, 0, 0, 0, 0],
        [6, 6, 7, EOS_ID, 0, 0, 0, 0],
        [5, 4, 6, 0, 0, 0, 0, 0],  # Cut at its limit, 3 tokens, without EOS.
    ]
    np.testing.assert_array_equal(output.ids.numpy(), expected_ids)
    assert output.ids.dtype == tf.int32
    np.testing.assert_array_equal(output.lengths.numpy(), [3, 4, 3])
    scores = expected_scores(table, head, output.ids.numpy(), [3, 4, 3])
    assert np.all(np.isfinite(scores))
    np.testing.assert_allclose(output.scores.numpy(), scores, rtol=1e-5)
    # The loop stopped when the last sentence did (after step 3), not at the cache's length 8.
    assert model.steps == 4


def test_heads_score_the_same_choices_differently():
    table = make_table(SEQUENCES, 8)
    outputs = {
        head: greedy_decode(TableModel(table, head), SOURCE, max_length_a=1.0, max_length_b=1.0)
        for head in ("softmax", "sigmoid", "sparsemax")
    }
    ids = [output.ids.numpy() for output in outputs.values()]
    np.testing.assert_array_equal(ids[0], ids[1])
    np.testing.assert_array_equal(ids[0], ids[2])
    scores = [output.scores.numpy() for output in outputs.values()]
    assert not np.allclose(scores[0], scores[1])
    assert not np.allclose(scores[0], scores[2])


def test_max_length_caps_every_sentence():
    table = make_table(SEQUENCES, 8)
    model = TableModel(table, "softmax")
    output = greedy_decode(model, SOURCE, max_length=3, max_length_a=10.0, max_length_b=0.0)
    assert output.ids.shape == (3, 3)
    np.testing.assert_array_equal(output.ids.numpy(), [[4, 5, EOS_ID], [6, 6, 7], [5, 4, 6]])
    np.testing.assert_array_equal(output.lengths.numpy(), [3, 3, 3])


def test_default_max_length_is_the_models():
    table = make_table(SEQUENCES, 8)
    output = greedy_decode(TableModel(table, "softmax", max_sequence_length=8), SOURCE)
    assert output.ids.shape == (3, 8)
    # Default limits, floor(1.5 * source_length + 10), all exceed 8: sentence 2 runs to 8.
    np.testing.assert_array_equal(output.ids.numpy()[2], SEQUENCES[2])
    np.testing.assert_array_equal(output.lengths.numpy(), [3, 4, 8])


def test_output_length_limits_follow_the_source_length():
    source = tf.constant([[4, 1, 0, 0, 0, 0], [4, 5, 6, 7, 8, 1], [1, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(output_length_limits(source, 1.5, 1.0, 100).numpy(), [4, 10, 2])
    np.testing.assert_array_equal(output_length_limits(source, 1.5, 1.0, 5).numpy(), [4, 5, 2])
    # Never below one token.
    np.testing.assert_array_equal(output_length_limits(source, 0.0, 0.0, 5).numpy(), [1, 1, 1])
    model = TableModel(make_table(SEQUENCES, 8), "softmax", max_sequence_length=7)
    assert max_output_length(model) == 7
    assert max_output_length(model, 20) == 20
    with pytest.raises(
        ValueError, match=r"max_length must be a whole number in \[1, inf\) \(got 0\)"
    ):
        max_output_length(model, 0)
    with pytest.raises(ValueError, match="max_length_a"):
        encode_source(model, source, 7, max_length_a=-1.0)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_table_model_decodes_inside_tf_function(jit_compile):
    table = make_table(SEQUENCES, 8)
    model = TableModel(table, "entmax15")

    @tf.function(jit_compile=jit_compile)
    def decode(source):
        return greedy_decode(
            model, source, max_length_a=1.0, max_length_b=1.0, jit_compile=jit_compile
        )

    output = decode(SOURCE)
    eager = greedy_decode(model, SOURCE, max_length_a=1.0, max_length_b=1.0)
    np.testing.assert_array_equal(output.ids.numpy(), eager.ids.numpy())
    np.testing.assert_array_equal(output.lengths.numpy(), eager.lengths.numpy())
    np.testing.assert_allclose(output.scores.numpy(), eager.scores.numpy(), rtol=1e-5)


# A real, randomly initialised model: greedy search must match the full forward pass.

REAL_VOCAB = 24
REAL_SOURCE = np.array(
    [[5, 6, 7, 8, 9, 1, 0], [10, 1, 0, 0, 0, 0, 0], [11, 12, 13, 14, 15, 16, 1]], np.int32
)


def tiny_model(head):
    # Random weights rarely choose EOS; raise its bias so that some sentences end early.
    return harness.tiny_model(REAL_VOCAB, head, max_sequence_length=10, eos_bias=3.0)


def reference_greedy(model, source, limits):
    """Greedy search by full forward passes over a growing prefix, one sentence at a time."""
    sentences = []
    for b in range(len(source)):
        prefix = [BOS_ID]
        while len(prefix) - 1 < limits[b] and prefix[-1] != EOS_ID:
            logits = model(
                {"source_ids": source[b : b + 1], "target_in_ids": np.array([prefix])},
                training=False,
            )
            prefix.append(int(np.argmax(logits[0, -1])))
        sentences.append(prefix[1:])
    return sentences


@pytest.mark.parametrize("head", list(harness.EVERY_HEAD))
def test_greedy_equals_argmax_of_the_full_forward_pass(head):
    model = tiny_model(head)
    limits = output_length_limits(REAL_SOURCE, 1.0, 2.0, 10).numpy()
    output = greedy_decode(model, REAL_SOURCE, max_length_a=1.0, max_length_b=2.0)
    ids, lengths = output.ids.numpy(), output.lengths.numpy()
    expected = reference_greedy(model, REAL_SOURCE, limits)
    for b, sentence in enumerate(expected):
        assert lengths[b] == len(sentence)
        np.testing.assert_array_equal(ids[b, : lengths[b]], sentence)
        assert np.all(ids[b, lengths[b] :] == PAD_ID)
    # Both ways of stopping occur: an EOS, and the length limit.
    assert any(sentence[-1] == EOS_ID for sentence in expected)
    assert any(sentence[-1] != EOS_ID for sentence in expected)
    # Scores: the head's log-scores of the chosen tokens under teacher forcing.
    target_in = np.concatenate([np.full([3, 1], BOS_ID), ids[:, :-1]], axis=1)
    logits = model({"source_ids": REAL_SOURCE, "target_in_ids": target_in}, training=False)
    log_scores = model.head.log_scores(logits).numpy()
    scores = [log_scores[b, np.arange(lengths[b]), ids[b, : lengths[b]]].sum() for b in range(3)]
    np.testing.assert_allclose(output.scores.numpy(), scores, rtol=1e-4, atol=1e-4)


def test_xla_and_graph_decoding_agree():
    model = tiny_model("entmax15")
    signature = [tf.TensorSpec([None, None], tf.int32)]
    results = []
    for jit_compile in (False, True):
        decode = tf.function(
            lambda source, xla=jit_compile: greedy_decode(model, source, jit_compile=xla),
            input_signature=signature,
            jit_compile=jit_compile,
        )
        results.append(decode(tf.constant(REAL_SOURCE)))
    graph, xla = results
    assert xla.ids.shape == (3, 10)
    np.testing.assert_array_equal(xla.ids.numpy(), graph.ids.numpy())
    np.testing.assert_array_equal(xla.lengths.numpy(), graph.lengths.numpy())
    np.testing.assert_allclose(xla.scores.numpy(), graph.scores.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("head", list(harness.EVERY_HEAD))
def test_stopped_rows_leave_the_batch_and_the_output_is_the_same(head):
    model = harness.tiny_model(REAL_VOCAB, head, max_sequence_length=10, eos_bias=2.0)
    source = np.concatenate([REAL_SOURCE, REAL_SOURCE[::-1], REAL_SOURCE[:1]])
    # Without `growing_cache` the decoder keeps every row to the end, as it did before.
    dropping = harness.RowCounting(model)
    keeping = harness.RowCounting(model, grows_cache=False)
    found, expected = greedy_decode(dropping, source), greedy_decode(keeping, source)
    # Rows stopped at different steps (an EOS or the length limit), and left the batch then.
    assert len(set(found.lengths.numpy())) > 1
    lengths = found.lengths.numpy()
    assert dropping.rows == [int(np.sum(lengths > t)) for t in range(lengths.max())]
    assert set(keeping.rows) == {len(source)}
    np.testing.assert_array_equal(found.ids.numpy(), expected.ids.numpy())
    np.testing.assert_array_equal(found.lengths.numpy(), expected.lengths.numpy())
    np.testing.assert_allclose(found.scores.numpy(), expected.scores.numpy(), rtol=1e-5)
    in_graph = tf.function(lambda s: greedy_decode(model, s))(tf.constant(source))
    np.testing.assert_array_equal(in_graph.ids.numpy(), expected.ids.numpy())
    np.testing.assert_array_equal(in_graph.lengths.numpy(), expected.lengths.numpy())
    np.testing.assert_allclose(in_graph.scores.numpy(), expected.scores.numpy(), rtol=1e-5)
