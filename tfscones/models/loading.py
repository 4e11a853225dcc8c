"""Load a trained model from a `.keras` file in any process, with every tfscones class known."""

from __future__ import annotations

import os
import zipfile

import keras

# Imported for their `register_keras_serializable` decorators: a saved, compiled model refers
# to its loss, metrics and learning-rate schedule by their registered names.
import tfscones.heads  # noqa: F401
import tfscones.training.schedules  # noqa: F401
from tfscones.data.tokenizer import Tokenizer
from tfscones.models.seq2seq_transformer import Seq2SeqTransformer
from tfscones.run_folder import RunFolder


def load_model(path: str | os.PathLike, compile: bool = False) -> Seq2SeqTransformer:
    """Loads a model saved by training (`model.keras`, `checkpoints/last.keras`).

    Args:
        path: The `.keras` file.
        compile: Whether to restore the optimizer, loss and metrics too (only to go on
            training); decoding and export need only the weights.

    Returns:
        The model.

    Raises:
        FileNotFoundError: If `path` does not exist.
        ValueError: If it is not a Keras model file.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no model file at {path}")
    try:
        return keras.models.load_model(path, compile=compile)
    except (zipfile.BadZipFile, OSError, ValueError, KeyError) as error:
        raise ValueError(f"{path} is not a readable .keras model file ({error})") from None


def load_run(run_dir: str | os.PathLike) -> tuple[Seq2SeqTransformer, Tokenizer]:
    """The best model of a training run folder and its tokenizer.

    Raises:
        FileNotFoundError: If the folder or one of its files is missing.
        ValueError: If `model.keras` or `spm.model` cannot be read as such.
    """
    run = RunFolder(run_dir)
    run.check_decodable()
    return load_model(run.model), Tokenizer.from_file(run.tokenizer)
