"""A fake model whose logits depend on the whole prefix, small enough to search by brute force.

Shared by the beam-search and exact-search tests: the sentences' every hypothesis can be
enumerated (`all_hypotheses`), so a decoder's answer is checked against the true optimum.
"""

import itertools

import numpy as np
import tensorflow as tf

from tests import harness
from tfscones import heads
from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID

VOCAB = 6  # pad 0, eos 1, unk 2, bos 3 and two words, 4 and 5.
WIDTH = 4  # At most 4 output tokens: every sequence can be enumerated.
HEADS = list(harness.EVERY_HEAD)
# The fake model tells sentences apart by their first two tokens (`sentence_index`).
SOURCE = tf.constant([[4, 5, 1], [5, 1, 0], [4, 4, 1], [5, 4, 1]], tf.int32)
# max_length_a = 0 and max_length_b = WIDTH: every sentence may use the whole width.
UNLIMITED = {"max_length_a": 0.0, "max_length_b": float(WIDTH)}


class PrefixTableModel(harness.FakeStepModel):
    """A fake model whose logits are a function of the whole prefix: a table, one row per prefix.

    Sentence `b`'s logits after the output tokens `t_1..t_i` are `table[b, code]`, where
    `code` numbers the prefix (`sum t_j * VOCAB**(j-1)` plus an offset for its length). The
    self-attention cache holds the fed tokens, so the model only sees a consistent prefix if the
    decoder reorders the cache with its beams. Every sequence's score can then be computed
    without the model, and the search's answer checked against brute force.
    """

    def __init__(self, table, head):
        super().__init__(table, head, WIDTH)

    def initial_cache(self, batch_size, max_length):
        return tf.zeros([batch_size, max_length], tf.int32)

    def step_logits(self, token_ids, index, encoder_outputs, cross_attention_cache, cache):
        """`index` is one position for all rows, or one per row (`[rows]`, as in exact search)."""
        index = tf.reshape(index, [-1, 1])
        cache = tf.where(tf.range(tf.shape(cache)[1]) == index, token_ids[:, None], cache)
        code = prefix_code(cache[:, 1:], index)
        rows = tf.stack([sentence_of(encoder_outputs), code], axis=1)
        return tf.gather_nd(self.table, rows), cache


def sentence_of(encoder_outputs):
    """Sentence number, recovered from the (tiled) encoder outputs' first two source tokens."""
    first, second = encoder_outputs[:, 0, 0], encoder_outputs[:, 1, 0]
    return tf.cast(first, tf.int32) - 4 + 2 * tf.cast(second == 4.0, tf.int32)


def prefix_code(tokens, length):
    """Numbers the prefixes of every length: `offset(length) + sum tokens[j] * VOCAB**j`.

    Args:
        tokens: int `[rows, positions]`, each row's prefix first.
        length: int `[rows, 1]` (or `[1, 1]`, all rows alike), the prefixes' lengths.

    Returns:
        int `[rows]`.
    """
    powers = VOCAB ** tf.range(WIDTH - 1)
    used = tf.cast(tf.range(WIDTH - 1) < length, tf.int32)
    offset = (VOCAB ** length[:, 0] - 1) // (VOCAB - 1)
    return offset + tf.reduce_sum(tokens[:, : WIDTH - 1] * powers * used, axis=1)


NUM_PREFIXES = sum(VOCAB**i for i in range(WIDTH))


def sentence_index(source_row):
    """The sentence number the fake model reads from a source row (matches `SOURCE` order)."""
    return source_row[0] - 4 + 2 * int(source_row[1] == 4)


def make_table(seed, scale=2.0):
    """Random prefix logits for the 4 sentences; pad, unk and bos are never likely."""
    rng = np.random.default_rng(seed)
    table = scale * rng.normal(size=[4, NUM_PREFIXES, VOCAB]).astype(np.float32)
    table[..., [PAD_ID, 2, BOS_ID]] = -8.0
    return table


def code_of(prefix):
    offset = (VOCAB ** len(prefix) - 1) // (VOCAB - 1)
    return offset + sum(token * VOCAB**j for j, token in enumerate(prefix))


def all_hypotheses(log_scores, sentence, limit):
    """Every finished hypothesis of a sentence with its summed log-score, by brute force."""
    found = []
    for length in range(1, limit + 1):
        for tokens in itertools.product(range(VOCAB), repeat=length):
            if EOS_ID in tokens[:-1] or (length < limit and tokens[-1] != EOS_ID):
                continue
            score = sum(log_scores[sentence, code_of(tokens[:i]), t] for i, t in enumerate(tokens))
            if np.isfinite(score):
                found.append((tokens, score))
    return found


def brute_force_best(table, head, n, length_penalty=0.0, limit=WIDTH):
    log_scores = heads.get(head).log_scores(table).numpy()
    best = []
    for row in SOURCE.numpy():
        found = all_hypotheses(log_scores, sentence_index(row), limit)
        penalty = lambda tokens: ((5 + len(tokens)) / 6) ** length_penalty  # noqa: E731
        found.sort(key=lambda item: -item[1] / penalty(item[0]))
        best.append(found[:n])
    return best


def hypotheses(output, b):
    return [
        tuple(output.ids[b, i, : output.lengths[b, i]].numpy())
        for i in range(output.ids.shape[1])
        if output.lengths[b, i] > 0
    ]
