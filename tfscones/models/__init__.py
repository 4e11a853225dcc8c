"""Sequence-to-sequence models whose output layer is an `OutputHead`."""

from tfscones.models.latent_experts import (
    ExpertShare,
    ExpertStates,
    LatentExpertTransformer,
    ParallelExperts,
    decode_experts,
)
from tfscones.models.loading import check_run_files, load_model, load_run
from tfscones.models.output_projection import OutputProjection
from tfscones.models.presets import PRESETS
from tfscones.models.seq2seq_transformer import Seq2SeqTransformer

__all__ = [
    "PRESETS",
    "ExpertShare",
    "ExpertStates",
    "LatentExpertTransformer",
    "OutputProjection",
    "ParallelExperts",
    "Seq2SeqTransformer",
    "check_run_files",
    "decode_experts",
    "load_model",
    "load_run",
]
