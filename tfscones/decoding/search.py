"""A decoding strategy and its settings as one value: greedy, beam, diverse beam or sampling.

`Search` is what a command line, a config or a serving signature chooses; `Search.decode` runs
the chosen decoder and returns every strategy's output in one shape, `NBest`, so that callers
(translation, export, evaluation) need not know which decoder ran.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import tensorflow as tf

from tfscones.data.vocab_ids import EOS_ID, PAD_ID
from tfscones.decoding import common
from tfscones.decoding.beam import beam_search, diverse_beam_search
from tfscones.decoding.greedy import greedy_decode
from tfscones.decoding.sampling import sample_decode, validate_sampling_arguments
from tfscones.models.stepping import Decodable
from tfscones.ranges import AT_LEAST_ONE, NON_NEGATIVE

METHODS = ("greedy", "beam", "diverse_beam", "sample")


class NBest(NamedTuple):
    """Hypotheses per sentence, best (or, for sampling, first drawn) first.

    Attributes:
        ids: int32 `[batch, num_hypotheses, max_output_length]`, EOS included, then PAD (0).
        lengths: int32 `[batch, num_hypotheses]`, tokens per hypothesis, EOS included (0 for an
            empty slot, which only a sparse entmax head can leave).
        scores: float32 `[batch, num_hypotheses]`: the search's ranking score (the sum of the
            head's log-scores, divided by the length penalty if there is one).
    """

    ids: tf.Tensor
    lengths: tf.Tensor
    scores: tf.Tensor


@dataclasses.dataclass(frozen=True)
class Search:
    """A decoding strategy with its settings; hashable, so compiled decoders can be cached by it.

    Example:
    ```python
    search = Search("beam", beam_size=4, num_hypotheses=2)
    output = search.decode(model, source_ids)  # NBest, ids [batch, 2, max_length]
    ```

    Attributes:
        method: `greedy`, `beam`, `diverse_beam` or `sample`.
        beam_size: Beams per sentence (`beam`, `diverse_beam`).
        num_hypotheses: Hypotheses returned per sentence: the n-best of `beam` (at most
            `beam_size`), the best across groups of `diverse_beam`, the samples of `sample`;
            `greedy` returns 1.
        length_penalty: GNMT length-penalty exponent (`beam`, `diverse_beam`; 0 is off).
        num_groups: Groups of `diverse_beam`; must divide `beam_size`.
        diversity_strength: Hamming diversity penalty of `diverse_beam`.
        temperature: Sampling temperature (`sample`).
        top_k: Sample among the k best tokens only (`sample`; 0 is off).
        top_p: Sample within the nucleus of this mass (`sample`; 1 is off).
        seed: Seed of `sample`: the same seed draws the same samples.
        max_length: Most output tokens, EOS included; defaults to the model's
            `max_sequence_length`.
        max_length_a: Output tokens allowed per source token.
        max_length_b: Output tokens allowed in addition.
    """

    method: str = "greedy"
    beam_size: int = 4
    num_hypotheses: int = 1
    length_penalty: float = 0.0
    num_groups: int = 2
    diversity_strength: float = 0.5
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    max_length: int | None = None
    max_length_a: float = common.DEFAULT_MAX_LENGTH_A
    max_length_b: float = common.DEFAULT_MAX_LENGTH_B

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"unknown search method {self.method!r}; methods: {METHODS}.")
        AT_LEAST_ONE.check("num_hypotheses", self.num_hypotheses)
        if self.method == "beam" and self.num_hypotheses > self.beam_size:
            raise ValueError(
                f"num_hypotheses ({self.num_hypotheses}) must be at most beam_size "
                f"({self.beam_size}) for beam search."
            )
        self._check_settings()

    def _check_settings(self) -> None:
        """Refuses every out-of-range setting here, before a model or decoder is touched."""
        AT_LEAST_ONE.check("beam_size", self.beam_size)
        for name in ("length_penalty", "diversity_strength", "max_length_a", "max_length_b"):
            NON_NEGATIVE.check(name, getattr(self, name))
        if self.max_length is not None:
            AT_LEAST_ONE.check("max_length", self.max_length)
        if self.method == "diverse_beam":
            AT_LEAST_ONE.check("num_groups", self.num_groups)
            if self.beam_size % self.num_groups:
                raise ValueError(
                    f"beam_size ({self.beam_size}) must be a multiple of num_groups "
                    f"({self.num_groups})."
                )
        validate_sampling_arguments(self.num_hypotheses, self.temperature, self.top_k, self.top_p)

    @property
    def output_count(self) -> int:
        """Hypotheses per sentence that `decode` returns."""
        return 1 if self.method == "greedy" else self.num_hypotheses

    def decode(self, model: Decodable, source_ids: tf.Tensor, jit_compile: bool = False) -> NBest:
        """Runs the strategy on a batch of source ids.

        Args:
            model: A `Decodable` (`tfscones.models.stepping`): a model such as a
            `Seq2SeqTransformer`, or a `StepModel`.
            source_ids: int `[batch, source_length]`, each row ending with EOS, padded with 0.
            jit_compile: True when the caller compiles this with XLA (see `greedy_decode`).

        Returns:
            `NBest` with `output_count` hypotheses per sentence.
        """
        return blank_empty_sources(self._run(model, source_ids, jit_compile), source_ids)

    def _run(self, model: Decodable, source_ids: tf.Tensor, jit_compile: bool) -> NBest:
        lengths = {
            "max_length": self.max_length,
            "max_length_a": self.max_length_a,
            "max_length_b": self.max_length_b,
            "jit_compile": jit_compile,
        }
        if self.method == "greedy":
            output = greedy_decode(model, source_ids, **lengths)
            return NBest(
                ids=output.ids[:, tf.newaxis],
                lengths=output.lengths[:, tf.newaxis],
                scores=output.scores[:, tf.newaxis],
            )
        if self.method == "sample":
            output = sample_decode(
                model,
                source_ids,
                num_samples=self.num_hypotheses,
                temperature=self.temperature,
                top_k=self.top_k,
                top_p=self.top_p,
                seed=(self.seed, 0),
                **lengths,
            )
            return NBest(ids=output.ids, lengths=output.lengths, scores=output.scores)
        if self.method == "beam":
            output = beam_search(
                model,
                source_ids,
                beam_size=self.beam_size,
                num_hypotheses=self.num_hypotheses,
                length_penalty=self.length_penalty,
                **lengths,
            )
        else:
            output = diverse_beam_search(
                model,
                source_ids,
                beam_size=self.beam_size,
                num_groups=self.num_groups,
                diversity_strength=self.diversity_strength,
                hypotheses_per_group=math.ceil(self.num_hypotheses / self.num_groups),
                length_penalty=self.length_penalty,
                **lengths,
            )
        count = self.num_hypotheses
        return NBest(
            ids=output.ids[:, :count],
            lengths=output.lengths[:, :count],
            scores=output.scores[:, :count],
        )


def blank_empty_sources(output: NBest, source_ids: tf.Tensor) -> NBest:
    """`output` with the empty translation (EOS alone, score 0) for every empty source.

    An empty source (`common.has_text` is False) gets one hypothesis, the empty one; its other
    slots are left empty (length 0, score -inf), as a sparse head's unfilled slots are.
    """
    text = common.has_text(source_ids)
    slots, width = tf.shape(output.ids)[1], tf.shape(output.ids)[2]
    first = tf.equal(tf.range(slots), 0)[tf.newaxis, :]
    empty_ids = tf.where(first[..., tf.newaxis] & tf.equal(tf.range(width), 0), EOS_ID, PAD_ID)
    keep = text[:, tf.newaxis]
    return NBest(
        ids=tf.where(keep[..., tf.newaxis], output.ids, empty_ids),
        lengths=tf.where(keep, output.lengths, tf.cast(first, output.lengths.dtype)),
        scores=tf.where(keep, output.scores, tf.where(first, 0.0, -math.inf)),
    )
