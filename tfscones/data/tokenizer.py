"""In-graph SentencePiece tokenisation with tensorflow-text, savable inside a SavedModel.

Every tokenizer of the project (this one; `tfscones.data.symbol_vocab.SymbolTokenizer` for
grapheme-to-phoneme) is a `tf.Module` with `vocab_size`, `tokenize(strings, add_eos)` for
sources, `tokenize_target(strings, add_eos)` for targets and `detokenize(ids)` for outputs;
`load_tokenizer` reads either from its file.
"""

import hashlib
import os
from pathlib import Path

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.python.ops.sentencepiece_tokenizer import gen_sentencepiece_tokenizer

from tfscones.data.preprocessing import append_eos, padding_mask
from tfscones.data.symbol_vocab import SymbolTokenizer
from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID


class Tokenizer(tf.Module):
    """Turns strings into int32 SentencePiece ids and back, inside or outside a `tf.function`.

    The SentencePiece model lives in a TensorFlow resource owned by this module, so tracking the
    tokenizer (`tf.saved_model.save`, or `keras.export.ExportArchive().track(tokenizer)`) saves
    the model with the functions that use it.

    Example:
    ```python
    tokenizer = Tokenizer.from_file("spm.model")
    ids = tokenizer.tokenize(tf.constant(["Guten Morgen."]), add_eos=True)  # RaggedTensor
    tokenizer.detokenize(ids)  # [b"Guten Morgen."]
    ```

    Args:
        model_proto: The serialized SentencePiece `ModelProto` (the bytes of a `.model` file).
            Its special ids must be pad 0, eos 1, unk 2, bos 3 (see `train_sentencepiece`).
        name: Name of the `tf.Module`.

    Raises:
        ValueError: If the model's special-token ids differ from `tfscones.data.vocab_ids`.
    """

    languages: tuple[str, ...] = ()
    """The languages a source may name (a symbol vocabulary's tags); none for SentencePiece."""

    def __init__(self, model_proto: bytes, name: str = "tokenizer"):
        super().__init__(name=name)
        processor = spm.SentencePieceProcessor(model_proto=model_proto)
        expected = {"pad": PAD_ID, "eos": EOS_ID, "unk": UNK_ID, "bos": BOS_ID}
        found = {
            "pad": processor.pad_id(),
            "eos": processor.eos_id(),
            "unk": processor.unk_id(),
            "bos": processor.bos_id(),
        }
        if found != expected:
            raise ValueError(
                f"SentencePiece model has special ids {found}, expected {expected}; "
                "train it with tfscones.data.train_sentencepiece"
            )
        self._vocab_size = processor.get_piece_size()
        self.sentencepiece = tf_text.SentencepieceTokenizer(model=model_proto, out_type=tf.int32)
        # tensorflow/text#570: tf-text's model resource belongs to its eager kernel and is deleted
        # when the kernel cache is cleared, which `tf.random.set_seed` does; a shared one stays.
        self.sentencepiece._model_resource = _SharedSentencepieceModel(model_proto)

    @classmethod
    def from_file(cls, model_file: str | os.PathLike) -> "Tokenizer":
        """Builds a tokenizer from a `.model` file.

        Args:
            model_file: Path of a SentencePiece `.model` file; any path `tf.io.gfile` reads,
                such as `gs://...`.

        Returns:
            The tokenizer.

        Raises:
            tf.errors.NotFoundError: If `model_file` does not exist.
            ValueError: If it is no SentencePiece model, or its special-token ids differ from
                the project's.
        """
        with tf.io.gfile.GFile(os.fspath(model_file), "rb") as f:
            model_proto = f.read()
        try:
            return cls(model_proto)
        except RuntimeError as error:
            problem = str(error).strip().splitlines()[0]
            raise ValueError(f"{model_file} is not a SentencePiece model ({problem})") from None

    @property
    def vocab_size(self) -> int:
        """Number of pieces, special tokens included."""
        return self._vocab_size

    def tokenize(self, strings: tf.Tensor, add_eos: bool = False) -> tf.Tensor | tf.RaggedTensor:
        """Splits strings into SentencePiece ids.

        Args:
            strings: A string tensor of any rank.
            add_eos: Append EOS (id 1) to every sequence, as targets need.

        Returns:
            int32 ids with one more (ragged) axis than `strings`: a 1-D `tf.Tensor` for a
            scalar string, otherwise a `tf.RaggedTensor`.
        """
        ids = self.sentencepiece.tokenize(strings)
        return append_eos(ids) if add_eos else ids

    def tokenize_target(
        self, strings: tf.Tensor, add_eos: bool = False
    ) -> tf.Tensor | tf.RaggedTensor:
        """Target ids: a joint SentencePiece vocabulary splits targets as it splits sources."""
        return self.tokenize(strings, add_eos)

    def id_to_piece(self, ids: tf.Tensor) -> tf.Tensor:
        """Each id's piece as SentencePiece spells it (`▁the`, `</s>`): what a model outputs."""
        return self.sentencepiece.id_to_string(tf.cast(ids, tf.int32))

    def detokenize(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
        """Turns ids back into strings, as decoders and evaluation need.

        Each sequence is cut at its first EOS (the EOS and everything after it are dropped), and
        PAD and BOS are removed wherever they occur.

        Args:
            ids: Integer ids, dense or ragged, of shape `[..., length]` (rank 1 or more).

        Returns:
            A string tensor of shape `ids.shape[:-1]` (a scalar for 1-D `ids`).
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=PAD_ID)
        ids = tf.cast(ids, tf.int32)
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=-1), 0)
        keep = before_eos & padding_mask(ids) & tf.not_equal(ids, BOS_ID)
        return self.sentencepiece.detokenize(tf.ragged.boolean_mask(ids, keep))


class _SharedSentencepieceModel(tf.saved_model.experimental.TrackableResource):
    """The SentencePiece model resource, named after its content so that it outlives kernels."""

    def __init__(self, model_proto: bytes):
        super().__init__()
        self._model_proto = model_proto
        self._shared_name = f"tfscones_sentencepiece_{hashlib.sha256(model_proto).hexdigest()}"
        _ = self.resource_handle  # Creates the resource now, in eager mode.

    def _create_resource(self) -> tf.Tensor:
        return gen_sentencepiece_tokenizer.sentencepiece_op(
            model=self._model_proto, shared_name=self._shared_name
        )


def load_tokenizer(path: str | os.PathLike):
    """The tokenizer of a vocabulary file: a symbol vocabulary (`.json`) or SentencePiece.

    Raises:
        FileNotFoundError or tf.errors.NotFoundError: If `path` does not exist.
        ValueError: If the file is not a vocabulary of its kind (naming the file).
    """
    if Path(path).suffix == ".json":
        return SymbolTokenizer.from_file(path)
    return Tokenizer.from_file(path)
