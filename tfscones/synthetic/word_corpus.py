"""A whitespace-tokenised parallel corpus as flat id arrays, and its alignment links.

IBM-3 estimation (`tfscones.synthetic.estimation`) works on one flat array per quantity: every
target word of the corpus with its sentence and position, and every link of a target word to a
source position of its sentence (0 is NULL), so that an EM iteration is a few numpy passes.
"""

from __future__ import annotations

import collections
import dataclasses

import numpy as np

from tfscones.synthetic.parameters import NULL_WORD_ID, UNK_WORD_ID


@dataclasses.dataclass(frozen=True)
class WordCorpus:
    """A tokenised corpus as flat id arrays."""

    source_ids: np.ndarray  # all source words, sentence after sentence
    source_starts: np.ndarray  # index in source_ids of each sentence's first word
    source_lengths: np.ndarray  # l of each sentence
    target_ids: np.ndarray  # all target words
    target_sentence: np.ndarray  # sentence of each target word
    target_position: np.ndarray  # j (1-based) of each target word
    target_lengths: np.ndarray  # m of each sentence


@dataclasses.dataclass(frozen=True)
class Links:
    """Every (target word, source position 0..l) link, grouped by target word."""

    token: np.ndarray  # target word (index into WordCorpus.target_ids)
    position: np.ndarray  # source position i: 1..l, then 0 = NULL
    source: np.ndarray  # source id at that position
    starts: np.ndarray  # first link of each target word


def word_vocabulary(sentences: list[list[str]]) -> list[str]:
    """All words, most frequent first (ties alphabetically)."""
    counts = collections.Counter(word for sentence in sentences for word in sentence)
    return sorted(counts, key=lambda word: (-counts[word], word))


def word_corpus(
    sources: list[list[str]],
    targets: list[list[str]],
    source_words: list[str],
    target_vocabulary: list[str],
) -> WordCorpus:
    """The flat arrays of tokenised sentence pairs; source words not in `source_words` get `<unk>`.

    Args:
        sources: Source sentences as words.
        targets: Their translations as words.
        source_words: Source words by id, NULL first (`NULL_WORD_ID`).
        target_vocabulary: Target words by id; every target word must be in it.
    """
    source_index = {word: index for index, word in enumerate(source_words) if index > NULL_WORD_ID}
    target_index = {word: index for index, word in enumerate(target_vocabulary)}
    source_lengths = np.array([len(s) for s in sources], np.int64)
    target_lengths = np.array([len(t) for t in targets], np.int64)
    target_sentence = np.repeat(np.arange(len(targets)), target_lengths)
    target_starts = np.cumsum(target_lengths) - target_lengths
    return WordCorpus(
        source_ids=np.array(
            [source_index.get(word, UNK_WORD_ID) for s in sources for word in s], np.int64
        ),
        source_starts=np.cumsum(source_lengths) - source_lengths,
        source_lengths=source_lengths,
        target_ids=np.array([target_index[word] for t in targets for word in t], np.int64),
        target_sentence=target_sentence,
        target_position=np.arange(len(target_sentence)) - target_starts[target_sentence] + 1,
        target_lengths=target_lengths,
    )


def alignment_links(corpus: WordCorpus) -> Links:
    """The links of each target word to source positions 1..l, then to NULL (position 0)."""
    group_sizes = corpus.source_lengths[corpus.target_sentence] + 1
    starts = np.cumsum(group_sizes) - group_sizes
    token = np.repeat(np.arange(len(group_sizes)), group_sizes)
    position = (np.arange(len(token)) - starts[token] + 1) % group_sizes[token]
    word = corpus.source_starts[corpus.target_sentence[token]] + np.maximum(position - 1, 0)
    source = np.where(position == 0, NULL_WORD_ID, corpus.source_ids[word])
    return Links(token=token, position=position, source=source, starts=starts)
