import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tfscones import heads
from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID
from tfscones.decoding import greedy_decode, output_length_limits
from tfscones.decoding.sampling import SamplingOutput, sample_decode
from tfscones.ops import entmax

VOCAB = 9
LENGTH = 8
ALL_HEADS = list(harness.EVERY_HEAD)
# The first step's logits of sentence 0: spread enough that entmax-1.5 and sparsemax keep some
# tokens and prune others, and the three heads give clearly different distributions.
FIRST_LOGITS = [-1.0, 2.5, 0.5, -2.0, 3.0, 2.8, 1.0, -0.5, 2.0]
# Sentence b's first source token is 4 + b. Source lengths 4, 5 and 2 (non-pad tokens): with
# a = 1, b = 1 the length limits are 5, 6 and 3.
SOURCE = tf.constant([[4, 7, 8, 1, 0], [5, 7, 8, 7, 1], [6, 1, 0, 0, 0]], tf.int32)
LIMITS = [5, 6, 3]


class MarkovModel(harness.FakeStepModel):
    """A fake model whose logits depend on the sentence, the position and the previous token.

    Step `t` of sentence `b` after token `w` has the logits `table[b, t, w]`, so every sampled
    prefix has defined logits and a test can recompute them from the output. The sentence is read
    from the cross-attention cache (its first source token, 4 + b), so a sample sees its own
    sentence's logits only if the decoder tiles the encoded source correctly.
    """

    def __init__(self, table, head, max_sequence_length=LENGTH):
        super().__init__(table, head, max_sequence_length)

    def step_logits(self, token_ids, index, encoder_outputs, cross_attention_cache, cache):
        sentence = tf.cast(cross_attention_cache[:, 0, 0] / 2.0, tf.int32) - 4
        position = tf.fill(tf.shape(token_ids), tf.cast(index, tf.int32))
        indices = tf.stack([sentence, position, tf.cast(token_ids, tf.int32)], axis=-1)
        return tf.gather_nd(self.table, indices), cache


def make_table(seed=0):
    """Random logits `[3 sentences, LENGTH, VOCAB previous tokens, VOCAB]`.

    Sentence 0 is likely to end with EOS from step 2; sentence 2 seldom ends with EOS, so that it
    runs to its length limit.
    """
    rng = np.random.default_rng(seed)
    table = 1.5 * rng.normal(size=[3, LENGTH, VOCAB, VOCAB]).astype(np.float32)
    table[0, 2:, :, EOS_ID] += 4.0
    table[2, :, :, EOS_ID] = -6.0
    table[0, 0, BOS_ID] = FIRST_LOGITS
    return table


def step_logits(table, ids):
    """The logits each sample saw at each step: `[batch, num_samples, width, VOCAB]`."""
    previous = np.concatenate([np.full(ids.shape[:2] + (1,), BOS_ID), ids[..., :-1]], axis=-1)
    batch, _, width = ids.shape
    sentence = np.arange(batch)[:, None, None]
    position = np.arange(width)[None, None, :]
    return table[sentence, position, previous]


def produced_steps(output):
    """Index arrays `(b, s, t)` of every produced token, and those tokens."""
    ids, lengths = output.ids.numpy(), output.lengths.numpy()
    b, s, t = np.nonzero(np.arange(ids.shape[-1]) < lengths[..., None])
    return (b, s, t), ids[b, s, t]


def tempered_distribution(log_scores, temperature, top_k=0, top_p=1.0):
    """By hand: p ∝ exp(log_scores / T), then top-k, then the nucleus of what top-k kept."""
    order = np.argsort(-log_scores, kind="stable")
    scores = log_scores[order] / temperature
    if top_k:
        scores[top_k:] = -np.inf
    probabilities = np.exp(scores - scores.max())
    probabilities /= probabilities.sum()
    if top_p < 1.0:
        cut = np.searchsorted(np.cumsum(probabilities), top_p) + 1  # Smallest prefix with mass ≥ p.
        probabilities[cut:] = 0.0
        probabilities /= probabilities.sum()
    result = np.zeros_like(probabilities)
    result[order] = probabilities
    return result


def decode(model, **kwargs):
    arguments = {"max_length_a": 1.0, "max_length_b": 1.0, **kwargs}
    return sample_decode(model, SOURCE, **arguments)


@pytest.mark.parametrize(
    "head, temperature, top_k, top_p",
    [
        ("softmax", 0.7, 0, 1.0),
        ("sigmoid", 1.0, 0, 1.0),
        ("sigmoid", 2.0, 0, 1.0),
        ("entmax15", 1.5, 0, 1.0),
        ("sparsemax", 1.0, 0, 1.0),
        ("softmax", 1.0, 3, 1.0),
        ("sigmoid", 1.3, 0, 0.6),
        ("entmax15", 0.8, 4, 0.8),
    ],
)
def test_first_token_frequencies_match_the_tempered_head_distribution(
    head, temperature, top_k, top_p
):
    num_samples = 20_000
    model = MarkovModel(make_table(), head)
    output = sample_decode(
        model,
        SOURCE[:1],
        num_samples=num_samples,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=(17, 4),
        max_length=1,
    )
    assert output.ids.shape == (1, num_samples, 1)
    frequencies = np.bincount(output.ids.numpy().ravel(), minlength=VOCAB) / num_samples
    log_scores = model.head.log_scores(tf.constant(FIRST_LOGITS)).numpy()
    expected = tempered_distribution(log_scores, temperature, top_k, top_p)
    tolerance = 5.0 * np.sqrt(expected * (1.0 - expected) / num_samples) + 1e-4
    np.testing.assert_array_less(np.abs(frequencies - expected), tolerance)
    np.testing.assert_array_equal(frequencies[expected == 0.0], 0.0)
    # The test tells the heads apart: tempered softmax of the raw logits is another distribution.
    if model.head != heads.SoftmaxHead():
        plain = tempered_distribution(np.array(FIRST_LOGITS), temperature, top_k, top_p)
        assert np.max(np.abs(plain - expected)) > 0.05


@pytest.mark.parametrize("head", ["softmax", "sigmoid", "entmax15"])
@pytest.mark.parametrize("top_k", [1, 3])
def test_top_k_never_samples_outside_the_k_best(head, top_k):
    table = make_table()
    output = decode(MarkovModel(table, head), num_samples=300, temperature=3.0, top_k=top_k)
    (b, s, t), tokens = produced_steps(output)
    log_scores = heads.get(head).log_scores(step_logits(table, output.ids.numpy())).numpy()
    step_scores = log_scores[b, s, t]
    ranks = np.sum(step_scores > step_scores[np.arange(len(tokens)), tokens][:, None], axis=-1)
    assert ranks.max() < top_k
    # The filter keeps k tokens where the head gives k positive probabilities.
    assert len(np.unique(ranks)) == top_k


def test_without_top_k_the_tail_is_sampled():
    table = make_table()
    output = decode(MarkovModel(table, "softmax"), num_samples=300, temperature=3.0)
    (b, s, t), tokens = produced_steps(output)
    step_scores = step_logits(table, output.ids.numpy())[b, s, t]
    ranks = np.sum(step_scores > step_scores[np.arange(len(tokens)), tokens][:, None], axis=-1)
    assert ranks.max() >= 3


@pytest.mark.parametrize("head", ["softmax", "sigmoid", "entmax15"])
@pytest.mark.parametrize("top_p", [0.5, 0.9])
def test_top_p_never_samples_outside_the_nucleus(head, top_p):
    table = make_table()
    temperature = 1.3
    output = decode(MarkovModel(table, head), num_samples=300, temperature=temperature, top_p=top_p)
    (b, s, t), tokens = produced_steps(output)
    log_scores = heads.get(head).log_scores(step_logits(table, output.ids.numpy())).numpy()
    outside = 0
    for row, token in zip(log_scores[b, s, t], tokens, strict=True):
        nucleus = tempered_distribution(row, temperature, top_p=top_p) > 0.0
        assert nucleus[token]
        outside += np.sum(~nucleus & (tempered_distribution(row, temperature) > 0.0))
    assert outside > 0  # The nucleus did cut off tokens of positive probability.


@pytest.mark.parametrize("head", ["entmax15", "sparsemax"])
def test_entmax_never_samples_a_zero_probability_token(head):
    table = make_table()
    output = decode(MarkovModel(table, head), num_samples=300, temperature=4.0)
    (b, s, t), tokens = produced_steps(output)
    alpha = heads.get(head).alpha
    probabilities = entmax.entmax(step_logits(table, output.ids.numpy()), alpha).numpy()
    chosen = probabilities[b, s, t][np.arange(len(tokens)), tokens]
    assert np.all(chosen > 0.0)
    assert np.sum(probabilities[b, s, t] == 0.0) > len(tokens)  # There were zeros to avoid.
    # A softmax head on the same logits does sample tokens that entmax gives zero probability.
    softmax = decode(MarkovModel(table, "softmax"), num_samples=300, temperature=4.0)
    (b, s, t), tokens = produced_steps(softmax)
    probabilities = entmax.entmax(step_logits(table, softmax.ids.numpy()), alpha).numpy()
    assert np.any(probabilities[b, s, t][np.arange(len(tokens)), tokens] == 0.0)


@pytest.mark.parametrize("head", ALL_HEADS)
def test_scores_are_the_untempered_head_scores_of_the_sampled_tokens(head):
    table = make_table()
    output = decode(MarkovModel(table, head), num_samples=20, temperature=1.7, top_k=5, top_p=0.9)
    assert isinstance(output, SamplingOutput)
    assert output.scores.dtype == tf.float32
    ids, lengths = output.ids.numpy(), output.lengths.numpy()
    log_scores = heads.get(head).log_scores(step_logits(table, ids)).numpy()
    chosen = np.take_along_axis(log_scores, ids[..., None], axis=-1)[..., 0]
    expected = np.where(np.arange(ids.shape[-1]) < lengths[..., None], chosen, 0.0).sum(-1)
    assert np.all(np.isfinite(expected))
    np.testing.assert_allclose(output.scores.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("head", ALL_HEADS)
def test_very_low_temperature_is_greedy_search(head):
    table = make_table()
    sampled = decode(MarkovModel(table, head), num_samples=4, temperature=1e-8, seed=(3, 9))
    greedy = greedy_decode(MarkovModel(table, head), SOURCE, max_length_a=1.0, max_length_b=1.0)
    for s in range(4):
        np.testing.assert_array_equal(sampled.ids.numpy()[:, s], greedy.ids.numpy())
        np.testing.assert_array_equal(sampled.lengths.numpy()[:, s], greedy.lengths.numpy())
        np.testing.assert_allclose(sampled.scores.numpy()[:, s], greedy.scores.numpy(), rtol=1e-5)
    # Greedy search stops both ways here (EOS, length limit), so the comparison covers both.
    ends = greedy.ids.numpy()[np.arange(3), greedy.lengths.numpy() - 1]
    assert EOS_ID in ends and np.any(ends != EOS_ID)
    # At temperature 1 the samples differ from the greedy translations.
    warm = decode(MarkovModel(table, head), num_samples=4, temperature=1.0, seed=(3, 9))
    assert np.any(warm.ids.numpy() != greedy.ids.numpy()[:, None])


def test_length_limits_and_eos_are_handled_as_in_greedy_search():
    model = MarkovModel(make_table(), "softmax")
    output = decode(model, num_samples=50, seed=(5, 5))
    ids, lengths = output.ids.numpy(), output.lengths.numpy()
    assert ids.shape == (3, 50, LENGTH) and output.ids.dtype == tf.int32
    assert lengths.shape == (3, 50) and output.lengths.dtype == tf.int32
    np.testing.assert_array_equal(output_length_limits(SOURCE, 1.0, 1.0, LENGTH).numpy(), LIMITS)
    ended_with_eos = cut_at_limit = 0
    for b, s in np.ndindex(lengths.shape):
        length, limit = lengths[b, s], LIMITS[b]
        assert 1 <= length <= limit
        assert np.all(ids[b, s, length:] == PAD_ID)
        assert EOS_ID not in ids[b, s, : length - 1]
        if ids[b, s, length - 1] == EOS_ID:
            ended_with_eos += 1
        else:
            assert length == limit
            cut_at_limit += 1
    assert ended_with_eos > 0 and cut_at_limit > 0
    # The loop stopped when the last sample did, not at the cache's length.
    assert model.steps == lengths.max() < LENGTH


def test_max_length_caps_every_sample_and_defaults_to_the_models():
    table = make_table()
    capped = decode(MarkovModel(table, "sigmoid"), num_samples=5, max_length=2)
    assert capped.ids.shape == (3, 5, 2)
    assert capped.lengths.numpy().max() <= 2
    model = MarkovModel(table, "sigmoid", max_sequence_length=6)
    output = sample_decode(model, SOURCE, num_samples=5, max_length_a=10.0, max_length_b=10.0)
    assert output.ids.shape == (3, 5, 6)
    # Sentence 2 never ends with EOS here, so its samples run to the model's length.
    np.testing.assert_array_equal(output.lengths.numpy()[2], 6)


def test_same_seed_same_samples_different_seed_different_samples():
    table = make_table()
    model = MarkovModel(table, "sigmoid")
    first = decode(model, num_samples=8, seed=(1, 2), top_p=0.95)
    again = decode(model, num_samples=8, seed=tf.constant([1, 2]), top_p=0.95)
    other = decode(model, num_samples=8, seed=(2, 1), top_p=0.95)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert np.any(first.ids.numpy() != other.ids.numpy())
    # The samples of one sentence are independent draws, not copies of one another.
    assert all(len({tuple(sample) for sample in sentence}) > 1 for sentence in first.ids.numpy())


def test_tf_function_samples_what_eager_samples():
    model = MarkovModel(make_table(), "entmax15")
    arguments = {"num_samples": 6, "temperature": 1.5, "top_k": 4, "top_p": 0.9, "seed": (4, 2)}
    graph = tf.function(lambda source: decode(model, **arguments))(SOURCE)
    eager = decode(model, **arguments)
    np.testing.assert_array_equal(graph.ids.numpy(), eager.ids.numpy())
    np.testing.assert_array_equal(graph.lengths.numpy(), eager.lengths.numpy())
    np.testing.assert_allclose(graph.scores.numpy(), eager.scores.numpy(), rtol=1e-5)


def test_xla_samples_what_eager_samples_on_a_real_model():
    model = harness.tiny_model(24, "entmax15", max_sequence_length=10)
    source = tf.constant([[5, 6, 7, 8, 9, 1, 0], [10, 1, 0, 0, 0, 0, 0]], tf.int32)
    arguments = {"num_samples": 3, "temperature": 1.5, "top_k": 6, "top_p": 0.9, "seed": (3, 4)}
    xla = tf.function(
        lambda source: sample_decode(model, source, **arguments, jit_compile=True),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
        jit_compile=True,
    )(source)
    eager = sample_decode(model, source, **arguments)
    assert xla.ids.shape == (2, 3, 10)
    np.testing.assert_array_equal(xla.ids.numpy(), eager.ids.numpy())
    np.testing.assert_array_equal(xla.lengths.numpy(), eager.lengths.numpy())
    np.testing.assert_allclose(xla.scores.numpy(), eager.scores.numpy(), rtol=1e-4, atol=1e-4)
    assert len(np.unique(eager.ids.numpy())) > 3  # Real samples, not one repeated token.


TEMPERATURE_REFUSAL = r"temperature must be a finite number in \[1e-30, 1e\+30\]"


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"num_samples": 0}, r"num_samples must be a whole number in \[1, 2147483647\]"),
        ({"num_samples": 2.0}, r"num_samples must be a whole number in \[1, 2147483647\]"),
        ({"temperature": 0.0}, TEMPERATURE_REFUSAL),
        ({"temperature": -1.0}, TEMPERATURE_REFUSAL),
        ({"temperature": float("inf")}, TEMPERATURE_REFUSAL),
        ({"temperature": float("nan")}, TEMPERATURE_REFUSAL),
        ({"top_k": -1}, r"top_k must be a whole number in \[0, 2147483647\]"),
        ({"top_k": 2.5}, r"top_k must be a whole number in \[0, 2147483647\]"),
        ({"top_p": 0.0}, r"top_p must be a finite number in \(0, 1\]"),
        ({"top_p": 1.5}, r"top_p must be a finite number in \(0, 1\]"),
        ({"top_p": float("nan")}, r"top_p must be a finite number in \(0, 1\]"),
        ({"seed": (1, 2, 3)}, r"seed must be two whole numbers in \[0, 9223372036854775807\]"),
        ({"seed": (1.0, 2.0)}, r"seed must be two whole numbers in \[0, 9223372036854775807\]"),
        ({"max_length": 0}, r"max_length must be a whole number in \[1, inf\)"),
        ({"max_length_a": -1.0}, "max_length_a"),
    ],
)
def test_invalid_arguments_are_rejected(arguments, message):
    model = MarkovModel(make_table(), "softmax")
    with pytest.raises(ValueError, match=message):
        sample_decode(model, SOURCE, **arguments)
