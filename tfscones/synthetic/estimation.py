"""IBM Model 3 (Brown et al. 1993) estimated from a parallel corpus with our own EM.

Stahlberg & Kumar (2022, §5 and Appendix B) estimated IBM-3 with MGIZA; `estimate_ibm3` needs
no external aligner:

1. IBM Model 1 EM for t(e|f), NULL included (`alignment.model1_em`).
2. Viterbi alignments with a small diagonal preference (`alignment.viterbi_alignment`).
3. Relative frequencies of the Viterbi alignments: fertility n(φ|f) for φ = 0..max_fertility
   (larger fertilities count as max_fertility), with additive smoothing; NULL insertion
   p1 = (target words aligned to NULL) / (target words aligned to real words), p0 = 1 - p1;
   distortion counts c(j,i,l,m) and the offset distribution q of the backoff, with additive
   smoothing (d itself: `parameters`).
4. t is pruned to its most likely target words per source word (t ≥ `t_threshold`, at most
   `t_max_targets`, always the best one) and renormalised.

Rare words: EM and the alignments treat every source word on its own; afterwards the words
seen fewer than `min_source_count` times share the `<unk>` row, which also serves every word
unseen at sampling time: its t is their t rows averaged with their counts as weights (before
pruning) and its n counts their fertilities together. (Mapping them to `<unk>` before EM would
leave the rare target words that translate them without a likely source word, and they would
inflate the fertilities of the words around them.) If no word is rare, `<unk>` takes the
fertility counts of all source words and the target unigram distribution as its t row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tfscones.synthetic.alignment import model1_em, viterbi_alignment
from tfscones.synthetic.options import EstimationOptions
from tfscones.synthetic.parameters import (
    NULL_WORD,
    NULL_WORD_ID,
    UNK_WORD,
    UNK_WORD_ID,
    IBM3Parameters,
    offset_bucket,
)
from tfscones.synthetic.word_corpus import (
    WordCorpus,
    alignment_links,
    word_corpus,
    word_vocabulary,
)

DEFAULT_OPTIONS = EstimationOptions()


def estimate_ibm3(
    source_sentences: Sequence[str],
    target_sentences: Sequence[str],
    options: EstimationOptions = DEFAULT_OPTIONS,
) -> IBM3Parameters:
    """Estimates IBM-3 from aligned sentences (module docstring: Model 1 EM, Viterbi, counts).

    Example:
    ```python
    german = ["das Haus", "das Buch", "ein Buch", "ein Haus"]
    english = ["the house", "the book", "a book", "a house"]
    options = EstimationOptions(min_source_count=1, em_iterations=10)
    parameters = estimate_ibm3(german, english, options)
    parameters.save("runs/ibm3")
    print(synthesize(parameters, ["das Haus"], temperature=0.2, seed=0))  # ['the house']
    ```

    Args:
        source_sentences: Source sentences (whitespace-tokenised here).
        target_sentences: Their translations, one per source sentence.
        options: Estimation options.

    Returns:
        The parameters.

    Raises:
        ValueError: If the lists differ in length, a sentence has no words, or as many target
            words align to NULL as to real source words (p1 ≥ 1).
    """
    sources, targets = _tokenized_pairs(source_sentences, target_sentences)
    words = [NULL_WORD, UNK_WORD] + [
        w for w in word_vocabulary(sources) if w not in (NULL_WORD, UNK_WORD)
    ]
    target_vocabulary = word_vocabulary(targets)
    corpus = word_corpus(sources, targets, words, target_vocabulary)
    links = alignment_links(corpus)
    pair_source, pair_target, link_pair, t = model1_em(
        corpus, links, len(target_vocabulary), options.em_iterations
    )
    alignment = viterbi_alignment(corpus, links, t[link_pair], options.diagonal_preference)
    word_counts = np.bincount(corpus.source_ids, minlength=len(words))
    word_counts[NULL_WORD_ID] = len(sources)
    vocabulary_size, row_of = _rows(word_counts, options.min_source_count)
    pooled = _pooled_t(pair_source, pair_target, t * word_counts[pair_source], row_of)
    t_offsets, t_targets, t_probabilities = _pruned_t(*pooled, corpus, vocabulary_size, options)
    return IBM3Parameters(
        source_vocabulary=tuple(words[:vocabulary_size]),
        target_vocabulary=tuple(target_vocabulary),
        t_offsets=t_offsets,
        t_targets=t_targets,
        t_probabilities=t_probabilities,
        fertility=_fertility(corpus, alignment, row_of, vocabulary_size, options),
        p1=_p1(alignment),
        **_distortion(corpus, alignment, options),
        options=options,
    )


def _tokenized_pairs(
    source_sentences: Sequence[str], target_sentences: Sequence[str]
) -> tuple[list[list[str]], list[list[str]]]:
    """The sentences split into words, checked to pair up and to have words."""
    if len(source_sentences) != len(target_sentences):
        raise ValueError(
            f"{len(source_sentences)} source sentences but {len(target_sentences)} targets"
        )
    sources = [sentence.split() for sentence in source_sentences]
    targets = [sentence.split() for sentence in target_sentences]
    for number, (source, target) in enumerate(zip(sources, targets, strict=True), start=1):
        if not (source and target):
            raise ValueError(f"sentence pair {number} has an empty source or target")
    return sources, targets


def _rows(word_counts: np.ndarray, min_count: int) -> tuple[int, np.ndarray]:
    """The source vocabulary size, and each word's row: its own, or `<unk>`'s if it is rare.

    The words after NULL and `<unk>` are sorted by count, so the kept ones are a prefix.
    """
    size = 2 + int(np.count_nonzero(word_counts[2:] >= min_count))
    ids = np.arange(len(word_counts))
    return size, np.where(ids < size, ids, UNK_WORD_ID)


def _pooled_t(pair_source, pair_target, weights, row_of):
    """Sums the weights of (f, e) pairs whose words f share a row (the rare words: `<unk>`).

    Returns:
        (row, target, summed weight) of the distinct (row, e) pairs.
    """
    width = int(pair_target.max()) + 1
    pairs, inverse = np.unique(row_of[pair_source] * width + pair_target, return_inverse=True)
    row, target = np.divmod(pairs, width)
    return row, target, np.bincount(inverse, weights=weights, minlength=len(pairs))


def _pruned_t(pair_source, pair_target, t, corpus: WordCorpus, source_vocabulary_size, options):
    """The t table pruned to the best targets of each row and renormalised, as CSR arrays."""
    t = t / np.bincount(pair_source, weights=t, minlength=source_vocabulary_size)[pair_source]
    if not np.any(pair_source == UNK_WORD_ID):
        unigram = np.bincount(corpus.target_ids)
        targets = np.flatnonzero(unigram)
        pair_source = np.concatenate([pair_source, np.full(len(targets), UNK_WORD_ID)])
        pair_target = np.concatenate([pair_target, targets])
        t = np.concatenate([t, unigram[targets] / unigram.sum()])
    order = np.lexsort((pair_target, -t, pair_source))
    source, target, t = pair_source[order], pair_target[order], t[order]
    row_starts = np.searchsorted(source, source)
    rank = np.arange(len(source)) - row_starts
    keep = (rank < options.t_max_targets) & ((t >= options.t_threshold) | (rank == 0))
    source, target, t = source[keep], target[keep], t[keep]
    row_sizes = np.bincount(source, minlength=source_vocabulary_size)
    t = t / np.bincount(source, weights=t, minlength=source_vocabulary_size)[source]
    return np.concatenate([[0], np.cumsum(row_sizes)]), target, t


def _fertility(
    corpus: WordCorpus, alignment, row_of, source_vocabulary_size, options
) -> np.ndarray:
    """n(φ|f), additively smoothed; `<unk>` pools all words if no word was rare."""
    real = alignment > 0
    aligned_word = corpus.source_starts[corpus.target_sentence[real]] + alignment[real] - 1
    phi = np.minimum(
        np.bincount(aligned_word, minlength=len(corpus.source_ids)), options.max_fertility
    )
    width = options.max_fertility + 1
    counts = np.bincount(
        row_of[corpus.source_ids] * width + phi, minlength=source_vocabulary_size * width
    ).reshape(source_vocabulary_size, width)
    if counts[UNK_WORD_ID].sum() == 0:
        counts[UNK_WORD_ID] = counts.sum(axis=0)
    smoothed = counts + options.fertility_smoothing
    return smoothed / smoothed.sum(axis=1, keepdims=True)


def _p1(alignment: np.ndarray) -> float:
    """p1 = (target words aligned to NULL) / (target words aligned to real words)."""
    to_real = int(np.count_nonzero(alignment))
    to_null = len(alignment) - to_real
    if to_null >= to_real:
        raise ValueError(
            f"{to_null} target words align to NULL and only {to_real} to real source words, "
            "so p1 ≥ 1: is the corpus parallel, and large enough?"
        )
    return to_null / to_real


def _distortion(corpus: WordCorpus, alignment, options) -> dict[str, np.ndarray]:
    """The (l, m, i, j) counts of the real-word links and the offset bucket distribution q."""
    real = alignment > 0
    sentence = corpus.target_sentence[real]
    source_length = corpus.source_lengths[sentence]
    target_length = corpus.target_lengths[sentence]
    i, j = alignment[real], corpus.target_position[real]
    entries, counts = np.unique(
        np.stack([source_length, target_length, i, j], axis=1), axis=0, return_counts=True
    )
    buckets = offset_bucket(i / source_length, j / target_length, options.distortion_buckets)
    smoothed = np.bincount(buckets, minlength=options.distortion_buckets)
    smoothed = smoothed + options.bucket_smoothing
    return {
        "distortion_entries": entries,
        "distortion_counts": counts,
        "offset_buckets": smoothed / smoothed.sum(),
    }
