"""IBM Model 3 (Brown et al., 1993): estimation from a parallel corpus, and sampling from it.

SCONES §5 makes synthetic language pairs of controlled ambiguity: an IBM-3 model trained on
German-English samples English-like translations of the German sentences, with every categorical
draw from the fertility table n, the lexical table t and the distortion table d sharpened or
flattened by a temperature γ (Appendix B, eq. 10); `synthesize` does this for a corpus.

Words are whitespace tokens (`str.split()`), case and punctuation kept as they are. Source
position 0 is the NULL word, which generates the "spurious" target words.

Estimation (`estimate_ibm3`) is our own EM, with no external aligner (the paper used MGIZA):

1. IBM Model 1 EM for t(e|f), NULL included, from uniform t: every iteration is a few numpy
   passes over one flat array of all (target word, source position) links of the corpus.
2. Viterbi alignments: each target word aligns to the source position i maximising
   t(e_j|x_i) · exp(-λ|i/l - j/m|) for real words and t(e_j|NULL) for NULL (which has no
   position). The diagonal preference λ (`diagonal_preference`, default 0.1) is kept small: it
   changes a decision only where two t values are within a factor exp(λ), chiefly a word that
   occurs twice in the sentence, which would otherwise take every link to its first copy and get
   fertility 2 and 0 instead of 1 and 1.
3. Relative frequencies of the Viterbi alignments: fertility n(φ|f) for φ = 0..max_fertility
   (larger fertilities count as max_fertility), with additive smoothing; NULL insertion
   p1 = (target words aligned to NULL) / (target words aligned to real words), p0 = 1 - p1;
   distortion d(j|i,l,m), interpolated with a backoff because most (i, l, m) are seen a few
   times at most: d(j|i,l,m) = (c(j,i,l,m) + β b(j|i,l,m)) / (c(i,l,m) + β), where the backoff
   b(j|i,l,m) ∝ q(bucket(j/m - i/l)) and q is the corpus-wide distribution of the relative
   offset j/m - i/l over equal-width buckets of [-1, 1], with additive smoothing.
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

import collections
import dataclasses
import functools
import json
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

NULL = "<null>"
UNK = "<unk>"
NULL_ID = 0
UNK_ID = 1
MAX_EMPTY_RESAMPLES = 10
_FORMAT = "tfscones-ibm3"
_JSON = "ibm3.json"
_ARRAYS = "ibm3.npz"
_ARRAY_FIELDS = (
    "t_offsets",
    "t_targets",
    "t_probabilities",
    "fertility",
    "distortion_entries",
    "distortion_counts",
    "offset_buckets",
)


@dataclasses.dataclass(frozen=True)
class EstimationOptions:
    """How `estimate_ibm3` estimates the model (see the module docstring).

    Attributes:
        em_iterations: IBM Model 1 EM iterations for t.
        min_source_count: Source words seen fewer times share the `<unk>` row.
        max_fertility: Largest fertility φ of n(φ|f); larger ones count as it.
        fertility_smoothing: Additive smoothing of the fertility counts.
        diagonal_preference: λ of the Viterbi alignment's factor exp(-λ|i/l - j/m|).
        t_threshold: Pruning keeps t(e|f) ≥ this (and the best e of every f).
        t_max_targets: Pruning keeps at most this many target words per source word.
        distortion_buckets: Equal-width buckets of the relative offset j/m - i/l in [-1, 1].
        bucket_smoothing: Additive smoothing of the bucket counts.
        distortion_backoff_weight: β, the weight (in counts) of the offset backoff in d.
    """

    em_iterations: int = 5
    min_source_count: int = 2
    max_fertility: int = 5
    fertility_smoothing: float = 0.1
    diagonal_preference: float = 0.1
    t_threshold: float = 1e-3
    t_max_targets: int = 50
    distortion_buckets: int = 20
    bucket_smoothing: float = 1.0
    distortion_backoff_weight: float = 2.0

    def __post_init__(self):
        at_least_one = ("em_iterations", "min_source_count", "max_fertility", "t_max_targets")
        positive = ("fertility_smoothing", "bucket_smoothing", "distortion_backoff_weight")
        for name in at_least_one + ("distortion_buckets",):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)!r}")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if self.diagonal_preference < 0 or not 0 <= self.t_threshold < 1:
            raise ValueError("diagonal_preference must be ≥ 0 and t_threshold in [0, 1)")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class IBM3Parameters:
    """The parameters of an IBM-3 model: vocabularies, n, t, d and p1.

    Attributes:
        source_vocabulary: Source words by id; id 0 is NULL, id 1 `<unk>`.
        target_vocabulary: Target words by id.
        t_offsets: CSR row starts of t, shape (source vocabulary size + 1,).
        t_targets: Target ids of t's entries; row f is `t_offsets[f]:t_offsets[f + 1]`.
        t_probabilities: t(e|f) of those entries; every row sums to 1.
        fertility: n(φ|f), shape (source vocabulary size, max_fertility + 1). Row 0 (NULL) is
            unused and uniform: NULL's fertility φ0 is drawn with p1 (step 2).
        p1: Probability that a real target word brings a spurious (NULL) word along.
        distortion_entries: The (l, m, i, j) seen in the Viterbi alignments, shape (N, 4).
        distortion_counts: How often each was seen, shape (N,).
        offset_buckets: q, the distribution of buckets of the relative offset j/m - i/l.
        options: The options it was estimated with.
    """

    source_vocabulary: tuple[str, ...]
    target_vocabulary: tuple[str, ...]
    t_offsets: np.ndarray
    t_targets: np.ndarray
    t_probabilities: np.ndarray
    fertility: np.ndarray
    p1: float
    distortion_entries: np.ndarray
    distortion_counts: np.ndarray
    offset_buckets: np.ndarray
    options: EstimationOptions = EstimationOptions()

    def __repr__(self) -> str:
        return (
            f"IBM3Parameters(source_vocabulary={len(self.source_vocabulary)} words, "
            f"target_vocabulary={len(self.target_vocabulary)} words, "
            f"t_entries={len(self.t_targets)}, p1={self.p1:.4f})"
        )

    @property
    def p0(self) -> float:
        """1 - p1."""
        return 1.0 - self.p1

    @functools.cached_property
    def _source_index(self) -> dict[str, int]:
        return {
            word: index for index, word in enumerate(self.source_vocabulary) if index != NULL_ID
        }

    @functools.cached_property
    def _distortion_index(self) -> dict[tuple[int, int], tuple[np.ndarray, ...]]:
        """(l, m) -> (i, j, count) arrays of the distortion entries seen with l and m."""
        lengths = self.distortion_entries[:, :2]
        keys, starts = np.unique(lengths, axis=0, return_index=True)
        ends = np.append(starts[1:], len(lengths))
        return {
            (int(source_length), int(target_length)): (
                self.distortion_entries[start:end, 2],
                self.distortion_entries[start:end, 3],
                self.distortion_counts[start:end],
            )
            for (source_length, target_length), start, end in zip(keys, starts, ends, strict=True)
        }

    @functools.cached_property
    def _cache(self) -> dict:
        """Derived tables: log-distortion matrices by (l, m), tempered tables by temperature."""
        return {}

    def source_ids(self, words: Sequence[str]) -> np.ndarray:
        """Source ids of `words`; words outside the source vocabulary get `<unk>`'s id."""
        return np.array([self._source_index.get(word, UNK_ID) for word in words], np.int64)

    def t_row(self, source_id: int) -> tuple[np.ndarray, np.ndarray]:
        """The target ids and probabilities t(·|f) of source id `source_id`."""
        row = slice(self.t_offsets[source_id], self.t_offsets[source_id + 1])
        return self.t_targets[row], self.t_probabilities[row]

    def distortion_matrix(self, source_length: int, target_length: int) -> np.ndarray:
        """d(j|i, l, m) for all i, j of a source of length l and a target of length m.

        Args:
            source_length: l ≥ 1.
            target_length: m ≥ 1.

        Returns:
            Shape (l, m); row i - 1 is the distribution d(·|i, l, m) over j = 1..m.
        """
        backoff = self.offset_buckets[
            _offset_bucket(*_position_grid(source_length, target_length), len(self.offset_buckets))
        ]
        backoff /= backoff.sum(axis=1, keepdims=True)
        counts = np.zeros((source_length, target_length))
        unseen = (np.zeros(0, np.int64),) * 3
        i, j, seen = self._distortion_index.get((source_length, target_length), unseen)
        counts[i - 1, j - 1] = seen
        beta = self.options.distortion_backoff_weight
        return (counts + beta * backoff) / (counts.sum(axis=1, keepdims=True) + beta)

    def log_distortion(self, source_length: int, target_length: int) -> np.ndarray:
        """The logarithm of `distortion_matrix(source_length, target_length)`, cached."""
        key = ("log_d", source_length, target_length)
        if key not in self._cache:
            self._cache[key] = np.log(self.distortion_matrix(source_length, target_length))
        return self._cache[key]

    def summary(self, temperature: float = 1.0) -> dict[str, float | int]:
        """Sizes, p1 and mean entropies (bits) of the rows of n_γ, t_γ and d_γ (eq. 10).

        Means are unweighted over rows: t over all source words (NULL and `<unk>` included),
        n over all but NULL, d over the (i, l, m) seen in the Viterbi alignments.
        """
        tables = _tempered_tables(self, temperature)
        return {
            "temperature": float(temperature),
            "source_vocabulary": len(self.source_vocabulary),
            "target_vocabulary": len(self.target_vocabulary),
            "t_entries": len(self.t_targets),
            "p1": self.p1,
            "t_entropy": float(np.mean([_entropy_bits(row) for row in tables.t_rows])),
            "n_entropy": float(np.mean(_entropy_bits(tables.fertility[1:]))),
            "d_entropy": self._mean_distortion_entropy(temperature),
        }

    def _mean_distortion_entropy(self, temperature: float) -> float:
        entropies = []
        for lengths, (i, _, _) in self._distortion_index.items():
            rows = self.distortion_matrix(*lengths)[np.unique(i) - 1]
            entropies.append(_entropy_bits(tempered(rows, temperature)))
        return float(np.mean(np.concatenate(entropies)))

    def save(self, directory: str | os.PathLike) -> Path:
        """Writes `ibm3.json` (vocabularies, p1, options) and `ibm3.npz` (tables) to a folder.

        Returns:
            The folder.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        header = {
            "format": _FORMAT,
            "source_vocabulary": list(self.source_vocabulary),
            "target_vocabulary": list(self.target_vocabulary),
            "p1": self.p1,
            "options": dataclasses.asdict(self.options),
        }
        (directory / _JSON).write_text(json.dumps(header, ensure_ascii=False), encoding="utf-8")
        np.savez_compressed(
            directory / _ARRAYS, **{name: getattr(self, name) for name in _ARRAY_FIELDS}
        )
        return directory

    @classmethod
    def load(cls, directory: str | os.PathLike) -> IBM3Parameters:
        """Reads the folder `save` wrote.

        Raises:
            ValueError: If `ibm3.json` is not an IBM-3 parameter file.
        """
        directory = Path(directory)
        header = json.loads((directory / _JSON).read_text(encoding="utf-8"))
        if header.get("format") != _FORMAT:
            raise ValueError(f"{directory / _JSON} is not a {_FORMAT} file")
        with np.load(directory / _ARRAYS, allow_pickle=False) as arrays:
            tables = {name: arrays[name] for name in _ARRAY_FIELDS}
        return cls(
            source_vocabulary=tuple(header["source_vocabulary"]),
            target_vocabulary=tuple(header["target_vocabulary"]),
            p1=header["p1"],
            options=EstimationOptions(**header["options"]),
            **tables,
        )


@dataclasses.dataclass(frozen=True)
class SampledTranslation:
    """One draw of the generative story.

    Attributes:
        words: The target sentence (step 7), m = Σ_{i=0}^{|x|} φ_i words.
        fertilities: φ_0 (NULL), φ_1, ..., φ_|x|.
        alignment: For each output word, the source position that generated it (0 is NULL).
    """

    words: tuple[str, ...]
    fertilities: tuple[int, ...]
    alignment: tuple[int, ...]


def check_temperature(temperature: float) -> float:
    """Returns `temperature` as a float.

    Raises:
        ValueError: Unless it is finite and > 0, naming it and the range.
    """
    value = float(temperature)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"temperature must be in (0, inf) (finite, > 0), got {temperature!r}")
    return value


def tempered(probabilities: np.ndarray, temperature: float) -> np.ndarray:
    """Eq. 10: P_γ(c) = exp(log P(c)/γ) / Σ_c' exp(log P(c')/γ), along the last axis.

    Computed in log space (the largest log P(c)/γ is subtracted before exp); zero probabilities
    stay zero. γ = 1 returns P (renormalised); γ → 0 tends to argmax, γ → inf to uniform over
    the support.

    Args:
        probabilities: Non-negative, with a positive entry in every row (last axis).
        temperature: γ, finite and > 0.

    Returns:
        An array of the same shape whose rows sum to 1.

    Raises:
        ValueError: On a bad temperature, a negative probability or a row without mass.
    """
    gamma = check_temperature(temperature)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if np.any(probabilities < 0) or not np.all(np.any(probabilities > 0, axis=-1)):
        raise ValueError("probabilities must be ≥ 0 with a positive entry in every row")
    with np.errstate(divide="ignore"):
        return _softmax(np.log(probabilities) / gamma)


def _softmax(logits: np.ndarray) -> np.ndarray:
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


def _entropy_bits(probabilities: np.ndarray) -> np.ndarray:
    """Entropy in bits of each row (last axis)."""
    positive = np.where(probabilities > 0, probabilities, 1.0)
    return -np.sum(probabilities * np.log2(positive), axis=-1)


def _position_grid(source_length: int, target_length: int) -> tuple[np.ndarray, np.ndarray]:
    """The relative positions i/l (column) and j/m (row) of 1-based i = 1..l, j = 1..m."""
    i = np.arange(1, source_length + 1)[:, None] / source_length
    j = np.arange(1, target_length + 1)[None, :] / target_length
    return i, j


def _offset_bucket(source_relative, target_relative, buckets: int) -> np.ndarray:
    """Bucket of the relative offset j/m - i/l among `buckets` equal widths of [-1, 1]."""
    offset = np.asarray(target_relative) - np.asarray(source_relative)
    return np.clip(((offset + 1.0) * buckets / 2.0).astype(np.int64), 0, buckets - 1)


# Estimation.


@dataclasses.dataclass(frozen=True)
class _Corpus:
    """A tokenised corpus as flat id arrays."""

    source_ids: np.ndarray  # all source words, sentence after sentence
    source_starts: np.ndarray  # index in source_ids of each sentence's first word
    source_lengths: np.ndarray  # l of each sentence
    target_ids: np.ndarray  # all target words
    target_sentence: np.ndarray  # sentence of each target word
    target_position: np.ndarray  # j (1-based) of each target word
    target_lengths: np.ndarray  # m of each sentence


@dataclasses.dataclass(frozen=True)
class _Links:
    """Every (target word, source position 0..l) link, grouped by target word."""

    token: np.ndarray  # target word (index into _Corpus.target_ids)
    position: np.ndarray  # source position i: 1..l, then 0 = NULL
    source: np.ndarray  # source id at that position
    starts: np.ndarray  # first link of each target word


def estimate_ibm3(
    source_sentences: Sequence[str],
    target_sentences: Sequence[str],
    options: EstimationOptions = EstimationOptions(),
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
    if len(source_sentences) != len(target_sentences):
        raise ValueError(
            f"{len(source_sentences)} source sentences but {len(target_sentences)} targets"
        )
    sources = [sentence.split() for sentence in source_sentences]
    targets = [sentence.split() for sentence in target_sentences]
    for number, (source, target) in enumerate(zip(sources, targets, strict=True), start=1):
        if not (source and target):
            raise ValueError(f"sentence pair {number} has an empty source or target")
    words = [NULL, UNK] + [w for w in _vocabulary(sources) if w not in (NULL, UNK)]
    target_vocabulary = _vocabulary(targets)
    corpus = _corpus(sources, targets, words, target_vocabulary)
    links = _links(corpus)
    pair_source, pair_target, link_pair, t = _model1(corpus, links, len(target_vocabulary), options)
    alignment = _viterbi(corpus, links, t[link_pair], options.diagonal_preference)
    word_counts = np.bincount(corpus.source_ids, minlength=len(words))
    word_counts[NULL_ID] = len(sources)
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


def _vocabulary(sentences: list[list[str]]) -> list[str]:
    """All words, most frequent first (ties alphabetically)."""
    counts = collections.Counter(word for sentence in sentences for word in sentence)
    return sorted(counts, key=lambda word: (-counts[word], word))


def _rows(word_counts: np.ndarray, min_count: int) -> tuple[int, np.ndarray]:
    """The source vocabulary size, and each word's row: its own, or `<unk>`'s if it is rare.

    The words after NULL and `<unk>` are sorted by count, so the kept ones are a prefix.
    """
    size = 2 + int(np.count_nonzero(word_counts[2:] >= min_count))
    ids = np.arange(len(word_counts))
    return size, np.where(ids < size, ids, UNK_ID)


def _corpus(sources, targets, source_words, target_vocabulary) -> _Corpus:
    source_index = {word: index for index, word in enumerate(source_words) if index > NULL_ID}
    target_index = {word: index for index, word in enumerate(target_vocabulary)}
    source_lengths = np.array([len(s) for s in sources], np.int64)
    target_lengths = np.array([len(t) for t in targets], np.int64)
    target_sentence = np.repeat(np.arange(len(targets)), target_lengths)
    target_starts = np.cumsum(target_lengths) - target_lengths
    return _Corpus(
        source_ids=np.array(
            [source_index.get(word, UNK_ID) for s in sources for word in s], np.int64
        ),
        source_starts=np.cumsum(source_lengths) - source_lengths,
        source_lengths=source_lengths,
        target_ids=np.array([target_index[word] for t in targets for word in t], np.int64),
        target_sentence=target_sentence,
        target_position=np.arange(len(target_sentence)) - target_starts[target_sentence] + 1,
        target_lengths=target_lengths,
    )


def _links(corpus: _Corpus) -> _Links:
    """The links of each target word to source positions 1..l, then to NULL (position 0)."""
    group_sizes = corpus.source_lengths[corpus.target_sentence] + 1
    starts = np.cumsum(group_sizes) - group_sizes
    token = np.repeat(np.arange(len(group_sizes)), group_sizes)
    position = (np.arange(len(token)) - starts[token] + 1) % group_sizes[token]
    word = corpus.source_starts[corpus.target_sentence[token]] + np.maximum(position - 1, 0)
    source = np.where(position == 0, NULL_ID, corpus.source_ids[word])
    return _Links(token=token, position=position, source=source, starts=starts)


def _model1(corpus: _Corpus, links: _Links, target_vocabulary_size: int, options):
    """IBM Model 1 EM for t(e|f) over the distinct (f, e) pairs that co-occur.

    Returns:
        pair_source, pair_target (the pairs), link_pair (each link's pair), t (of each pair).
    """
    keys = links.source * target_vocabulary_size + corpus.target_ids[links.token]
    pairs, link_pair = np.unique(keys, return_inverse=True)
    pair_source, pair_target = np.divmod(pairs, target_vocabulary_size)
    t = np.full(len(pairs), 1.0 / target_vocabulary_size)
    num_tokens = len(corpus.target_ids)
    links_per_token = corpus.source_lengths[corpus.target_sentence] + 1
    for iteration in range(1, options.em_iterations + 1):
        link_t = t[link_pair]
        normaliser = np.bincount(links.token, weights=link_t, minlength=num_tokens)
        posterior = link_t / normaliser[links.token]
        counts = np.bincount(link_pair, weights=posterior, minlength=len(pairs))
        t = counts / np.bincount(pair_source, weights=counts)[pair_source]
        log_likelihood = np.mean(np.log(normaliser / links_per_token))
        logger.info(
            "Model 1 EM iteration %d: log-likelihood %.4f per target word",
            iteration,
            log_likelihood,
        )
    return pair_source, pair_target, link_pair, t


def _viterbi(corpus: _Corpus, links: _Links, link_t: np.ndarray, preference: float) -> np.ndarray:
    """The best source position (0 = NULL) of every target word (module docstring, step 2).

    Ties go to the first link: the leftmost real word, and NULL only if no real word ties.
    """
    sentence = corpus.target_sentence[links.token]
    relative_i = links.position / corpus.source_lengths[sentence]
    relative_j = corpus.target_position[links.token] / corpus.target_lengths[sentence]
    diagonal = np.exp(-preference * np.abs(relative_i - relative_j))
    score = link_t * np.where(links.position == 0, 1.0, diagonal)
    best = np.flatnonzero(score == np.maximum.reduceat(score, links.starts)[links.token])
    first = np.concatenate([[True], links.token[best[1:]] != links.token[best[:-1]]])
    return links.position[best[first]]


def _pooled_t(pair_source, pair_target, weights, row_of):
    """Sums the weights of (f, e) pairs whose words f share a row (the rare words: `<unk>`).

    Returns:
        (row, target, summed weight) of the distinct (row, e) pairs.
    """
    width = int(pair_target.max()) + 1
    pairs, inverse = np.unique(row_of[pair_source] * width + pair_target, return_inverse=True)
    row, target = np.divmod(pairs, width)
    return row, target, np.bincount(inverse, weights=weights, minlength=len(pairs))


def _pruned_t(pair_source, pair_target, t, corpus: _Corpus, source_vocabulary_size, options):
    """The t table pruned to the best targets of each row and renormalised, as CSR arrays."""
    t = t / np.bincount(pair_source, weights=t, minlength=source_vocabulary_size)[pair_source]
    if not np.any(pair_source == UNK_ID):
        unigram = np.bincount(corpus.target_ids)
        targets = np.flatnonzero(unigram)
        pair_source = np.concatenate([pair_source, np.full(len(targets), UNK_ID)])
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


def _fertility(corpus: _Corpus, alignment, row_of, source_vocabulary_size, options) -> np.ndarray:
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
    if counts[UNK_ID].sum() == 0:
        counts[UNK_ID] = counts.sum(axis=0)
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


def _distortion(corpus: _Corpus, alignment, options) -> dict[str, np.ndarray]:
    """The (l, m, i, j) counts of the real-word links and the offset bucket distribution q."""
    real = alignment > 0
    sentence = corpus.target_sentence[real]
    source_length = corpus.source_lengths[sentence]
    target_length = corpus.target_lengths[sentence]
    i, j = alignment[real], corpus.target_position[real]
    entries, counts = np.unique(
        np.stack([source_length, target_length, i, j], axis=1), axis=0, return_counts=True
    )
    buckets = _offset_bucket(i / source_length, j / target_length, options.distortion_buckets)
    smoothed = np.bincount(buckets, minlength=options.distortion_buckets)
    smoothed = smoothed + options.bucket_smoothing
    return {
        "distortion_entries": entries,
        "distortion_counts": counts,
        "offset_buckets": smoothed / smoothed.sum(),
    }


# Sampling.


@dataclasses.dataclass(frozen=True)
class _TemperedTables:
    """n_γ and t_γ (eq. 10) of one temperature, with cumulative sums for sampling."""

    temperature: float
    fertility: np.ndarray
    fertility_cdf: np.ndarray
    t_rows: list[np.ndarray]
    t_cdfs: list[np.ndarray]


def _tempered_tables(parameters: IBM3Parameters, temperature: float) -> _TemperedTables:
    """The tempered n and t of `parameters`, cached on it by temperature."""
    gamma = check_temperature(temperature)
    key = ("tempered", gamma)
    if key not in parameters._cache:
        fertility = tempered(parameters.fertility, gamma)
        offsets = parameters.t_offsets
        t_rows = [
            tempered(parameters.t_probabilities[start:end], gamma)
            for start, end in zip(offsets[:-1], offsets[1:], strict=True)
        ]
        parameters._cache[key] = _TemperedTables(
            gamma, fertility, np.cumsum(fertility, axis=1), t_rows, [np.cumsum(r) for r in t_rows]
        )
    return parameters._cache[key]


def _draw(cdf: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws: the categories of `uniforms` (in [0, 1)) under cumulative `cdf`."""
    indices = np.searchsorted(cdf, np.asarray(uniforms) * cdf[-1], side="right")
    return np.minimum(indices, len(cdf) - 1)


def sample_translation(
    parameters: IBM3Parameters,
    source_words: Sequence[str],
    temperature: float,
    rng: np.random.Generator,
) -> SampledTranslation:
    """Samples a translation by the IBM-3 generative story (Appendix B, steps 1-7) at γ.

    n, t and d are tempered by eq. 10; p1 is not (the paper tempers n, t and d only), and
    `temperature=1` samples the estimated model as it is.

    1. φ_i ~ n_γ(·|x_i) for i = 1..|x| (unknown words use `<unk>`). If all φ_i are 0 the output
       would be empty: step 1 is drawn again, up to `MAX_EMPTY_RESAMPLES` times, which samples
       the story conditioned on a non-empty output; after that, the word least likely to have
       fertility 0 gets φ = 1 and the others 0.
    2. φ_0 ~ Binomial(Σ_{i≥1} φ_i, p1).
    3. m = Σ_{i=0}^{|x|} φ_i.
    4. τ_ik ~ t_γ(·|x_i) for i = 0..|x| (NULL's row for i = 0), k = 1..φ_i.
    5. π_ik ~ d_γ(·|i, |x|, m) for i ≥ 1. IBM-3 is deficient (two words may draw the same
       position), so words are placed one at a time, in order of i and k, each from d_γ
       restricted to the positions still vacant and renormalised.
    6. The φ_0 NULL words fill the remaining vacant positions in a uniformly random order (each
       of the φ_0! orders with probability 1/φ_0!).
    7. The words τ_ik in positions π_ik are the output.

    Args:
        parameters: The model.
        source_words: The source sentence x as words.
        temperature: γ, finite and > 0.
        rng: The random generator.

    Returns:
        The sampled translation with its fertilities and alignment.

    Raises:
        ValueError: On a bad temperature or an empty source sentence.
    """
    tables = _tempered_tables(parameters, temperature)
    if not source_words:
        raise ValueError("the source sentence has no words")
    source_ids = parameters.source_ids(source_words)
    fertilities = _sample_fertilities(tables, source_ids, rng)
    null_fertility = int(rng.binomial(fertilities.sum(), parameters.p1))
    fertilities = np.concatenate([[null_fertility], fertilities])
    alignment = np.repeat(np.arange(len(fertilities)), fertilities)
    rows = np.concatenate([[NULL_ID], source_ids])
    targets = np.concatenate(
        [
            parameters.t_row(row)[0][_draw(tables.t_cdfs[row], rng.random(phi))]
            for row, phi in zip(rows, fertilities, strict=True)
        ]
    )
    positions = _sample_positions(parameters, len(source_ids), alignment, tables.temperature, rng)
    order = np.argsort(positions)
    return SampledTranslation(
        words=tuple(parameters.target_vocabulary[target] for target in targets[order]),
        fertilities=tuple(int(phi) for phi in fertilities),
        alignment=tuple(int(i) for i in alignment[order]),
    )


def _sample_fertilities(tables: _TemperedTables, source_ids: np.ndarray, rng) -> np.ndarray:
    """Step 1, with the resampling of an empty output (see `sample_translation`)."""
    cdf = tables.fertility_cdf[source_ids]
    for _ in range(MAX_EMPTY_RESAMPLES + 1):
        uniforms = rng.random(len(source_ids))[:, None] * cdf[:, -1:]
        fertilities = np.minimum((cdf <= uniforms).sum(axis=1), cdf.shape[1] - 1)
        if fertilities.sum() > 0:
            return fertilities
    fertilities[np.argmin(tables.fertility[source_ids, 0])] = 1
    return fertilities


def _sample_positions(parameters, source_length: int, alignment, temperature, rng) -> np.ndarray:
    """Steps 5 and 6: the target position (0-based) of each word, given its source position."""
    m = len(alignment)
    log_d = parameters.log_distortion(source_length, m)
    vacant = np.ones(m, bool)
    positions = np.empty(m, np.int64)
    for word in np.flatnonzero(alignment > 0):
        candidates = np.flatnonzero(vacant)
        probabilities = _softmax(log_d[alignment[word] - 1, candidates] / temperature)
        positions[word] = candidates[_draw(np.cumsum(probabilities), rng.random())]
        vacant[positions[word]] = False
    positions[alignment == 0] = rng.permutation(np.flatnonzero(vacant))
    return positions


def synthesize(
    parameters: IBM3Parameters,
    source_sentences: Sequence[str],
    temperature: float,
    seed: int | Sequence[int],
) -> list[str]:
    """Samples one translation of every sentence (`sample_translation`), words joined by spaces.

    Args:
        parameters: The model.
        source_sentences: Source sentences, whitespace-tokenised.
        temperature: γ of eq. 10, finite and > 0.
        seed: Seeds the corpus's own `np.random.Generator` (an int, or ints such as
            `(seed, split)`): the same seed gives the same corpus.

    Returns:
        The sampled target sentences.

    Raises:
        ValueError: On a bad temperature or a sentence without words (naming its number).
    """
    check_temperature(temperature)
    rng = np.random.default_rng(seed)
    outputs = []
    for number, sentence in enumerate(source_sentences, start=1):
        words = sentence.split()
        if not words:
            raise ValueError(f"source sentence {number} has no words")
        outputs.append(" ".join(sample_translation(parameters, words, temperature, rng).words))
    return outputs
