"""Load a trained model from a `.keras` file in any process, with every tfscones class known."""

from __future__ import annotations

import os
import zipfile

import keras

# Imported for their `register_keras_serializable` decorators: a saved model refers to its head
# by its registered name.
import tfscones.heads  # noqa: F401
from tfscones.data.symbol_vocab import SymbolTokenizer
from tfscones.data.tokenizer import Tokenizer, load_tokenizer
from tfscones.models.seq2seq_transformer import Seq2SeqTransformer
from tfscones.run_folder import RunFolder


def load_model(path: str | os.PathLike) -> Seq2SeqTransformer:
    """Loads a model saved by training (`model.keras`, `checkpoints/last.keras`), uncompiled.

    Decoding, analysis and export need the network and its weights, not the optimizer. To go
    on training, `tfscones train` resumes a run from its checkpoints; in Python,
    `keras.models.load_model(path)` restores the optimizer too once `tfscones.training` is
    imported (its learning-rate schedules are registered there).

    Args:
        path: The `.keras` file.

    Returns:
        The model.

    Raises:
        FileNotFoundError: If `path` does not exist.
        ValueError: If it is not a Keras model file.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no model file at {path}")
    try:
        return keras.models.load_model(path, compile=False)
    except (zipfile.BadZipFile, OSError, ValueError, KeyError) as error:
        raise ValueError(f"{path} is not a readable .keras model file ({error})") from None


def load_run(
    run_dir: str | os.PathLike,
) -> tuple[Seq2SeqTransformer, Tokenizer | SymbolTokenizer]:
    """The best model of a training run folder and its tokenizer.

    Raises:
        FileNotFoundError: If the folder or one of its files is missing.
        ValueError: If `model.keras` or the vocabulary (`spm.model` or `symbols.json`) cannot
            be read as such.
    """
    run = RunFolder(run_dir)
    run.check_decodable()
    model, tokenizer = load_model(run.model), load_tokenizer(run.tokenizer)
    check_vocabulary_fits(tokenizer, model.vocabulary_size, run.tokenizer)
    return model, tokenizer


def check_vocabulary_fits(
    tokenizer: Tokenizer | SymbolTokenizer,
    vocabulary_size: int,
    vocabulary: str | os.PathLike,
    owner: str = "the model's vocabulary",
) -> None:
    """Refuses a vocabulary of another size than the model's, the check every loader shares.

    A vocabulary of another run, or a damaged (cut short) `spm.model`, loads as a tokenizer of
    other ids: its translations would be nonsense, or an embedding lookup out of range.

    Args:
        tokenizer: The loaded vocabulary.
        vocabulary_size: The model's (or the run config's) vocabulary size.
        vocabulary: The vocabulary's file, for the message.
        owner: What `vocabulary_size` is the size of, for the message.

    Raises:
        ValueError: Naming the file and both sizes.
    """
    if tokenizer.vocab_size != vocabulary_size:
        raise ValueError(
            f"{vocabulary} has {tokenizer.vocab_size:,} entries but {owner} has "
            f"{vocabulary_size:,}: it is another run's, or damaged"
        )
