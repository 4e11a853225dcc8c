"""Incremental decoding of the models: the `StepModel` contract and the models' steppers.

Decoders (`tfscones.decoding`) take a `Decodable` and step the `StepModel` its `stepper()`
returns; they read its `StepCapabilities` and never probe it. `TransformerStepper` steps a
`Seq2SeqTransformer` (`ExpertTransformerStepper` a `LatentExpertTransformer`) on the caches of
`tfscones.models.stepping.caches`; `keras_hub_parts` is the one reader of keras-hub's private
layer attributes.
"""

from tfscones.models.stepping.caches import GrowingCache, PrefixCache, SlotCache
from tfscones.models.stepping.contract import (
    Decodable,
    SourceGroups,
    StepCapabilities,
    StepModel,
    undeclared,
)
from tfscones.models.stepping.transformer import (
    EVERY_CAPABILITY,
    ExpertTransformerStepper,
    StepWeights,
    TransformerStepper,
)

__all__ = [
    "EVERY_CAPABILITY",
    "Decodable",
    "ExpertTransformerStepper",
    "GrowingCache",
    "PrefixCache",
    "SlotCache",
    "SourceGroups",
    "StepCapabilities",
    "StepModel",
    "StepWeights",
    "TransformerStepper",
    "undeclared",
]
