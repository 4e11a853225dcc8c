"""Head-agnostic decoders: greedy search now; beam search, sampling and diverse beam share `common`.

`encode_source` runs the encoder and the cross-attention projections once and bounds each
sentence's output length; `greedy_decode` searches with `model.decode_step` inside
`tf.while_loop` (eager, `tf.function` or XLA); `translate` goes from strings to strings.
"""

from tfscones.decoding.common import (
    DEFAULT_MAX_LENGTH_A,
    DEFAULT_MAX_LENGTH_B,
    EncodedSource,
    decode_step,
    encode_source,
    max_output_length,
    output_length_limits,
)
from tfscones.decoding.greedy import GreedyOutput, greedy_decode
from tfscones.decoding.translate import compiled_greedy_decode, source_ids_for_model, translate

__all__ = [
    "DEFAULT_MAX_LENGTH_A",
    "DEFAULT_MAX_LENGTH_B",
    "EncodedSource",
    "GreedyOutput",
    "compiled_greedy_decode",
    "decode_step",
    "encode_source",
    "greedy_decode",
    "max_output_length",
    "output_length_limits",
    "source_ids_for_model",
    "translate",
]
