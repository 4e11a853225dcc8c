"""Sequence-to-sequence models whose output layer is an `OutputHead`.

`ExpertStates`, `ParallelExperts` and `decode_experts` moved to `tfscones.decoding.experts` (a
model does not depend on its decoders); they are still importable from here, resolved on first
use so that importing the models does not import decoding.
"""

from tfscones.models.latent_experts import ExpertShare, LatentExpertTransformer
from tfscones.models.loading import check_run_files, load_model, load_run
from tfscones.models.output_projection import OutputProjection
from tfscones.models.presets import PRESETS
from tfscones.models.seq2seq_transformer import Seq2SeqTransformer

_IN_DECODING = ("ExpertStates", "ParallelExperts", "decode_experts")


def __getattr__(name: str):
    """The names that moved to `tfscones.decoding.experts`, imported when first asked for."""
    if name in _IN_DECODING:
        from tfscones.decoding import experts

        return getattr(experts, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
