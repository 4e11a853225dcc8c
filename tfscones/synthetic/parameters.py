"""An estimated IBM Model 3 (Brown et al. 1993): vocabularies, n, t, d and p1, and their lookups.

Words are whitespace tokens (`str.split()`), case and punctuation kept as they are. IBM-3 has its
own source word vocabulary: id `NULL_WORD_ID` is the NULL word of source position 0, which
generates the "spurious" target words, and id `UNK_WORD_ID` is `<unk>`, the row shared by rare
source words and every word unseen at sampling time. These ids index IBM-3's tables only; they
are not the SentencePiece token ids of `tfscones.data.vocab_ids`, where id 1 is EOS and unk is 2.

Distortion d(j|i,l,m) interpolates the counts of the Viterbi alignments with a backoff, because
most (i, l, m) are seen a few times at most: d(j|i,l,m) = (c(j,i,l,m) + β b(j|i,l,m)) /
(c(i,l,m) + β), where b(j|i,l,m) ∝ q(bucket(j/m - i/l)) and q is the corpus-wide distribution of
the relative offset j/m - i/l over equal-width buckets of [-1, 1] (`offset_bucket`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tfscones.synthetic.options import EstimationOptions
from tfscones.synthetic.parameter_files import read_parameter_fields, write_parameter_files
from tfscones.synthetic.tempering import (
    TemperedTables,
    check_temperature,
    entropy_bits,
    temper_tables,
    tempered,
)

NULL_WORD = "<null>"
UNK_WORD = "<unk>"
NULL_WORD_ID = 0
UNK_WORD_ID = 1


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class IBM3Parameters:
    """The parameters of an IBM-3 model: vocabularies, n, t, d and p1.

    Attributes:
        source_vocabulary: Source words by id; id 0 (`NULL_WORD_ID`) is NULL, id 1
            (`UNK_WORD_ID`) `<unk>`.
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
            word: index
            for index, word in enumerate(self.source_vocabulary)
            if index != NULL_WORD_ID
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
        """Source ids of `words`; words outside the source vocabulary get `UNK_WORD_ID`."""
        return np.array([self._source_index.get(word, UNK_WORD_ID) for word in words], np.int64)

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
            offset_bucket(*position_grid(source_length, target_length), len(self.offset_buckets))
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

    def tempered_tables(self, temperature: float) -> TemperedTables:
        """n_γ and t_γ of eq. 10 (`tempering.temper_tables`), cached by temperature.

        Raises:
            ValueError: Unless the temperature is finite and > 0.
        """
        gamma = check_temperature(temperature)
        key = ("tempered", gamma)
        if key not in self._cache:
            self._cache[key] = temper_tables(
                self.fertility, self.t_offsets, self.t_probabilities, gamma
            )
        return self._cache[key]

    def summary(self, temperature: float = 1.0) -> dict[str, float | int]:
        """Sizes, p1 and mean entropies (bits) of the rows of n_γ, t_γ and d_γ (eq. 10).

        Means are unweighted over rows: t over all source words (NULL and `<unk>` included),
        n over all but NULL, d over the (i, l, m) seen in the Viterbi alignments.
        """
        tables = self.tempered_tables(temperature)
        return {
            "temperature": float(temperature),
            "source_vocabulary": len(self.source_vocabulary),
            "target_vocabulary": len(self.target_vocabulary),
            "t_entries": len(self.t_targets),
            "p1": self.p1,
            "t_entropy": float(np.mean([entropy_bits(row) for row in tables.t_rows])),
            "n_entropy": float(np.mean(entropy_bits(tables.fertility[1:]))),
            "d_entropy": self._mean_distortion_entropy(temperature),
        }

    def _mean_distortion_entropy(self, temperature: float) -> float:
        entropies = []
        for lengths, (i, _, _) in self._distortion_index.items():
            rows = self.distortion_matrix(*lengths)[np.unique(i) - 1]
            entropies.append(entropy_bits(tempered(rows, temperature)))
        return float(np.mean(np.concatenate(entropies)))

    def save(self, directory: str | os.PathLike) -> Path:
        """Writes `ibm3.json` and `ibm3.npz` to a folder (`parameter_files.write_parameter_files`).

        Returns:
            The folder.
        """
        return write_parameter_files(self, directory)

    @classmethod
    def load(cls, directory: str | os.PathLike) -> IBM3Parameters:
        """Reads the folder `save` wrote.

        Raises:
            ValueError: If `ibm3.json` is not an IBM-3 parameter file.
        """
        return cls(**read_parameter_fields(directory))


def position_grid(source_length: int, target_length: int) -> tuple[np.ndarray, np.ndarray]:
    """The relative positions i/l (column) and j/m (row) of 1-based i = 1..l, j = 1..m."""
    i = np.arange(1, source_length + 1)[:, None] / source_length
    j = np.arange(1, target_length + 1)[None, :] / target_length
    return i, j


def offset_bucket(source_relative, target_relative, buckets: int) -> np.ndarray:
    """Bucket of the relative offset j/m - i/l among `buckets` equal widths of [-1, 1]."""
    offset = np.asarray(target_relative) - np.asarray(source_relative)
    return np.clip(((offset + 1.0) * buckets / 2.0).astype(np.int64), 0, buckets - 1)
