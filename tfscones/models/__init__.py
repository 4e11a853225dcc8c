"""Sequence-to-sequence models whose output layer is an `OutputHead`.

A model does not depend on its decoders: decoding every expert of a `LatentExpertTransformer` is
`tfscones.decoding.experts`'s business (`ParallelExperts`, `decode_experts`).
"""

from tfscones.models.latent_experts import ExpertShare, LatentExpertTransformer
from tfscones.models.loading import load_model, load_run
from tfscones.models.output_projection import OutputProjection
from tfscones.models.presets import PRESETS
from tfscones.models.seq2seq_transformer import Seq2SeqTransformer

__all__ = [
    "PRESETS",
    "ExpertShare",
    "LatentExpertTransformer",
    "OutputProjection",
    "Seq2SeqTransformer",
    "load_model",
    "load_run",
]
