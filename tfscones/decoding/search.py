"""A decoding strategy and its settings as one value: any registered decoder, its settings, limits.

`Search` is what a command line, a config or a serving signature chooses; `Search.decode` runs
the chosen decoder (`tfscones.decoding.registry`) and returns every strategy's output in one
shape, `NBest`, so that callers (translation, export, evaluation) need not know which decoder ran.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import tensorflow as tf

from tfscones.data.vocab_ids import EOS_ID, PAD_ID
from tfscones.decoding import common, registry
from tfscones.decoding.common import OutputLimits
from tfscones.decoding.registry import NBest
from tfscones.models.stepping import Decodable


@dataclasses.dataclass(frozen=True, init=False)
class Search:
    """A registered decoder, its settings and output limits; hashable (compiled decoders' key).

    Example:
    ```python
    search = Search("beam", beam_size=4, num_hypotheses=2)
    output = search.decode(model, source_ids)  # NBest, ids [batch, 2, max_length]
    Search("sample", top_p=0.9, seed=7, limits=OutputLimits(max_length=64))
    ```

    Args:
        method: A registered decoder's name (`tfscones.decoding.registry.decoder_names()`:
            `greedy`, `beam`, `diverse_beam`, `sample`, `experts`).
        limits: The output length limits (default: `OutputLimits()`).
        **settings: The decoder's settings (for `beam`: `beam_size`, `num_hypotheses`,
            `length_penalty`); the rest keep their defaults.

    Raises:
        ValueError: For an unknown method, a setting the decoder does not have, or a value out
            of range: before any model is touched.
    """

    method: str
    settings: Any
    limits: OutputLimits

    def __init__(self, method: str = "greedy", limits: OutputLimits | None = None, **settings):
        decoder = registry.decoder_named(method)
        object.__setattr__(self, "method", method)
        object.__setattr__(self, "settings", decoder.make_settings(settings))
        object.__setattr__(self, "limits", OutputLimits() if limits is None else limits)

    def with_limits(self, limits: OutputLimits) -> Search:
        """The same search with other output limits."""
        return Search(self.method, limits, **dataclasses.asdict(self.settings))

    @property
    def decoder(self) -> registry.Decoder:
        """The registered decoder it runs."""
        return registry.decoder_named(self.method)

    def hypotheses(self, model: Decodable) -> int:
        """Hypotheses per sentence that `decode` returns for `model`.

        Raises:
            ValueError: If the decoder cannot decode the model (`experts` on a model without
                latent experts).
        """
        return self.decoder.hypotheses(self.settings, model.stepper())

    def rows_per_sentence(self, model: Decodable) -> int:
        """Decoder rows (beams, samples, experts) a sentence takes at once."""
        return self.decoder.rows_per_sentence(self.settings, model.stepper())

    def decode(self, model: Decodable, source_ids: tf.Tensor, jit_compile: bool = False) -> NBest:
        """Runs the strategy on a batch of source ids.

        Args:
            model: A `Decodable` (`tfscones.models.stepping`): a model such as a
                `Seq2SeqTransformer`, or a `StepModel`.
            source_ids: int `[batch, source_length]`, each row ending with EOS, padded with 0.
            jit_compile: True when the caller compiles this with XLA (see `greedy_decode`).

        Returns:
            `NBest` with `hypotheses(model)` hypotheses per sentence.

        Raises:
            ValueError: If the decoder cannot decode the model (see `hypotheses`).
        """
        stepper = model.stepper()
        self.decoder.hypotheses(self.settings, stepper)
        source_ids = tf.convert_to_tensor(source_ids, tf.int32)
        output = self.decoder.decode(stepper, source_ids, self.settings, self.limits, jit_compile)
        return blank_empty_sources(output, source_ids)


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
        log_scores=tf.where(keep, output.log_scores, tf.where(first, 0.0, -math.inf)),
        token_log_scores=tf.where(keep[..., tf.newaxis], output.token_log_scores, 0.0),
    )
