"""Head-aware decoders (greedy, beam, diverse beam, sampling, experts; exact search).

A decoder takes a `Decodable`, a model or a stepper, and steps the
`tfscones.models.stepping.StepModel` its `stepper()` returns (encode once, step with a cache,
score with the head; what else it can do, its `StepCapabilities` say). `encode_source` runs the
encoder and the cross-attention projections once and bounds each sentence's output length; the
decoders search with the stepper's `decode_step` (eagerly, in `tf.function` or under XLA) and
score with `model.head.log_scores`; each registers itself by name (`registry`), and `Search`
names a registered strategy, its settings and its `OutputLimits`; `translate` and
`translate_nbest` go from strings to strings; `decode_experts` decodes every expert of a
`LatentExpertTransformer` at once; an `Ensemble` of models decodes as one model, each token
scored by the log of the models' mean probability.
"""

from tfscones.decoding.beam import (
    BeamOutput,
    BeamSettings,
    DiverseBeamSettings,
    beam_search,
    diverse_beam_search,
    length_penalty_factor,
)
from tfscones.decoding.common import (
    DEFAULT_MAX_LENGTH_A,
    DEFAULT_MAX_LENGTH_B,
    EncodedSource,
    OutputLimits,
    decode_step,
    encode_source,
    max_output_length,
    output_length_limits,
)
from tfscones.decoding.compiled import per_model_function
from tfscones.decoding.confidence import (
    Confidence,
    ConfidentTranslation,
    score_with_confidence,
    translate_with_confidence,
)
from tfscones.decoding.ensemble import Ensemble, EnsembleStepper
from tfscones.decoding.exact import (
    DEFAULT_STATE_BUDGET,
    ExactSearchResult,
    exact_search,
    exact_translate,
)
from tfscones.decoding.experts import ExpertSettings, ExpertStates, ParallelExperts, decode_experts
from tfscones.decoding.greedy import GreedyOutput, GreedySettings, greedy_decode
from tfscones.decoding.registry import Decoder, NBest, decoder_names, register, setting
from tfscones.decoding.sampling import SamplingOutput, SamplingSettings, sample_decode
from tfscones.decoding.scoring import TeacherForced, score_texts, teacher_forced
from tfscones.decoding.search import Search
from tfscones.decoding.translate import (
    compiled_search,
    source_ids_for_model,
    translate,
    translate_nbest,
)

__all__ = [
    "DEFAULT_MAX_LENGTH_A",
    "DEFAULT_MAX_LENGTH_B",
    "DEFAULT_STATE_BUDGET",
    "BeamOutput",
    "BeamSettings",
    "Confidence",
    "ConfidentTranslation",
    "Decoder",
    "DiverseBeamSettings",
    "EncodedSource",
    "Ensemble",
    "EnsembleStepper",
    "ExactSearchResult",
    "ExpertSettings",
    "ExpertStates",
    "GreedyOutput",
    "GreedySettings",
    "NBest",
    "OutputLimits",
    "ParallelExperts",
    "SamplingOutput",
    "SamplingSettings",
    "Search",
    "TeacherForced",
    "beam_search",
    "compiled_search",
    "score_with_confidence",
    "translate_with_confidence",
    "decode_experts",
    "decode_step",
    "decoder_names",
    "diverse_beam_search",
    "encode_source",
    "exact_search",
    "exact_translate",
    "greedy_decode",
    "length_penalty_factor",
    "max_output_length",
    "output_length_limits",
    "per_model_function",
    "register",
    "sample_decode",
    "score_texts",
    "setting",
    "source_ids_for_model",
    "teacher_forced",
    "translate",
    "translate_nbest",
]
