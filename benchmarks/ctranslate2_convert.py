"""Converts a trained softmax `Seq2SeqTransformer` run into a CTranslate2 model directory.

    python -m benchmarks.ctranslate2_convert --run runs/demo-softmax --out ct2/demo-softmax

A benchmark tool (`pip install ".[ctranslate2]"`), never a dependency of tfscones: it exists so
that `benchmarks.ctranslate2_speed` can time CTranslate2, the engine a user who cares about CPU
translation speed picks, on our weights. The run folder holds `model.keras` and `spm.model`; the
output folder gets CTranslate2's `model.bin`, `config.json` and `shared_vocabulary.json`.

The model is described with CTranslate2's own specification (`TransformerEncoderSpec`,
`TransformerDecoderSpec`, `TransformerSpec`) and written by its `Converter.convert`:
- layers, heads, ReLU, pre-norm (with a final layer norm after each stack) or post-norm as the
  model has it, and its layer-norm epsilon;
- token embeddings scaled by sqrt(hidden_dim) and summed with sinusoids: CTranslate2 gets our
  own position table (keras-hub's `SinePositionEncoding` interleaves sine and cosine, which
  CTranslate2's built-in table does not), copied value for value, for positions up to the
  model's `max_sequence_length` (where the SavedModel cuts sources and outputs by default;
  CTranslate2 refuses a later position with an error);
- queries, keys and values fused as CTranslate2 expects (one `[3 * hidden, hidden]` matrix for
  self-attention, queries apart from fused keys and values for attention over the encoder);
- the output projection with its bias; tied embeddings give the same matrix to both embeddings
  and the projection, which CTranslate2 stores once;
- the vocabulary: the SentencePiece pieces in id order, so a CTranslate2 token is our id, and
  its unknown, start and end tokens are the pieces of `UNK_ID`, `BOS_ID` and `EOS_ID`.

Only the softmax head converts: CTranslate2 scores tokens with log-softmax.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tfscones.native_logs import import_tensorflow_quietly

import_tensorflow_quietly()

import ctranslate2  # noqa: E402
import numpy as np  # noqa: E402
import sentencepiece as spm  # noqa: E402
from ctranslate2.specs import common_spec, transformer_spec  # noqa: E402

from tfscones.data.vocab_ids import BOS_ID, EOS_ID, UNK_ID  # noqa: E402
from tfscones.heads import SoftmaxHead  # noqa: E402
from tfscones.models import LatentExpertTransformer, Seq2SeqTransformer, load_model  # noqa: E402


class Seq2SeqTransformerConverter(ctranslate2.converters.Converter):
    """CTranslate2's converter for a softmax `Seq2SeqTransformer` and its vocabulary.

    Example:
    ```python
    model = load_model("runs/demo-softmax/model.keras")
    pieces = sentencepiece_pieces("runs/demo-softmax/spm.model")
    Seq2SeqTransformerConverter(model, pieces).convert("ct2/demo-softmax")
    translator = ctranslate2.Translator("ct2/demo-softmax")
    ```

    Args:
        model: The model; its head must be softmax.
        pieces: The vocabulary, piece `i` being token id `i`.

    Raises:
        ValueError: If the head is not softmax or the vocabulary does not fit the model.
        TypeError: If the model is not a plain `Seq2SeqTransformer` (latent experts start the
            decoder with an expert embedding, which CTranslate2 has no place for).
    """

    def __init__(self, model: Seq2SeqTransformer, pieces: list[str]):
        if not isinstance(model, Seq2SeqTransformer) or isinstance(model, LatentExpertTransformer):
            raise TypeError(f"only a Seq2SeqTransformer converts, not {type(model).__name__}.")
        if not isinstance(model.head, SoftmaxHead):
            raise ValueError(
                f"only a softmax head converts (CTranslate2 scores with log-softmax), "
                f"not {model.head}."
            )
        if len(pieces) != model.vocabulary_size:
            raise ValueError(
                f"{len(pieces)} pieces for a vocabulary of {model.vocabulary_size} entries."
            )
        self.model = model
        self.pieces = list(pieces)

    def _load(self) -> transformer_spec.TransformerSpec:
        return transformer_model_spec(self.model, self.pieces)


def sentencepiece_pieces(model_file: str | os.PathLike) -> list[str]:
    """The pieces of a SentencePiece model, in id order."""
    processor = spm.SentencePieceProcessor(model_file=str(model_file))
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def transformer_model_spec(
    model: Seq2SeqTransformer, pieces: list[str]
) -> transformer_spec.TransformerSpec:
    """CTranslate2's `TransformerSpec` of the model, its weights and vocabulary set.

    Args:
        model: A softmax `Seq2SeqTransformer`.
        pieces: The vocabulary, piece `i` being token id `i`.

    Returns:
        The specification, ready for `validate`, `optimize` and `save`.
    """
    layer_arguments = {"pre_norm": model.normalize_first, "activation": common_spec.Activation.RELU}
    spec = transformer_spec.TransformerSpec(
        transformer_spec.TransformerEncoderSpec(
            model.num_encoder_layers, model.num_heads, **layer_arguments
        ),
        transformer_spec.TransformerDecoderSpec(
            model.num_decoder_layers, model.num_heads, **layer_arguments
        ),
    )
    spec.config.layer_norm_epsilon = model.layer_norm_epsilon
    spec.config.unk_token = pieces[UNK_ID]
    spec.config.bos_token = pieces[BOS_ID]
    spec.config.eos_token = pieces[EOS_ID]
    spec.config.decoder_start_token = pieces[BOS_ID]
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    weights = {variable.path: variable.numpy() for variable in model.weights}
    positions = position_table(model)
    _set_encoder(spec.encoder, weights, positions, model)
    _set_decoder(spec.decoder, weights, positions, model)
    return spec


def _set_encoder(spec, weights: dict, positions: np.ndarray, model: Seq2SeqTransformer) -> None:
    embedding = "token_embedding" if model.tie_embeddings else "source_embedding"
    spec.embeddings[0].weight = weights[f"{embedding}/embeddings"]
    spec.position_encodings.encodings = positions
    for i, layer in enumerate(spec.layer):
        scope = f"encoder_layer_{i}"
        _set_attention_block(layer.self_attention, weights, scope, "self_attention_layer")
        _set_feedforward(layer.ffn, weights, scope)
    if model.normalize_first:
        _set_layer_norm(spec.layer_norm, weights, "encoder_final_norm")


def _set_decoder(spec, weights: dict, positions: np.ndarray, model: Seq2SeqTransformer) -> None:
    embedding = "token_embedding" if model.tie_embeddings else "target_embedding"
    spec.embeddings.weight = weights[f"{embedding}/embeddings"]
    spec.position_encodings.encodings = positions
    for i, layer in enumerate(spec.layer):
        scope = f"decoder_layer_{i}"
        _set_attention_block(layer.self_attention, weights, scope, "self_attention")
        _set_attention_block(layer.attention, weights, scope, "cross_attention")
        _set_feedforward(layer.ffn, weights, scope)
    if model.normalize_first:
        _set_layer_norm(spec.layer_norm, weights, "decoder_final_norm")
    if model.tie_embeddings:
        spec.projection.weight = weights["token_embedding/embeddings"]
    else:
        spec.projection.weight = weights["output_projection/kernel"].T
    spec.projection.bias = weights["output_projection/bias"]


def position_table(model: Seq2SeqTransformer) -> np.ndarray:
    """The sinusoids the model adds at positions `0..max_sequence_length-1`, float32.

    Computed by the model's own `SinePositionEncoding`, so CTranslate2 adds the same values.
    """
    shape = (1, model.max_sequence_length, model.hidden_dim)
    return np.asarray(model.position_encoding(np.zeros(shape, np.float32)))[0]


def _set_attention_block(spec, weights: dict, layer_scope: str, attention: str) -> None:
    """An attention sub-layer and its layer norm (keras-hub's `{kind}_layer_norm`) into `spec`.

    Args:
        spec: CTranslate2's attention spec of the layer.
        weights: The model's weights by path.
        layer_scope: The keras-hub layer's scope, e.g. `decoder_layer_0`.
        attention: The attention's scope inside it: keras-hub names the encoder's
            `self_attention_layer` and the decoder's `self_attention` and `cross_attention`;
            each one's norm is `self_attention_layer_norm` or `cross_attention_layer_norm`.
    """
    _set_attention(spec, weights, f"{layer_scope}/{attention}")
    norm = attention.removesuffix("_layer") + "_layer_norm"
    _set_layer_norm(spec.layer_norm, weights, f"{layer_scope}/{norm}")


def _set_attention(spec, weights: dict, scope: str) -> None:
    """Keras `MultiHeadAttention` weights into CTranslate2's attention `spec`.

    CTranslate2's self-attention has queries, keys and values in one linear layer, then the
    output layer; its attention over the encoder has queries alone, then keys and values in one.
    """
    projections = [_dense(weights, f"{scope}/{name}") for name in ("query", "key", "value")]
    if len(spec.linear) == 2:
        groups = [projections]
    else:
        groups = [projections[:1], projections[1:]]
    for linear, group in zip(spec.linear[:-1], groups, strict=True):
        linear.weight = np.concatenate([kernel for kernel, _ in group])
        linear.bias = np.concatenate([bias for _, bias in group])
    output_kernel = weights[f"{scope}/attention_output/kernel"]
    spec.linear[-1].weight = output_kernel.reshape(-1, output_kernel.shape[-1]).T
    spec.linear[-1].bias = weights[f"{scope}/attention_output/bias"]


def _dense(weights: dict, scope: str) -> tuple[np.ndarray, np.ndarray]:
    """An `EinsumDense` `[hidden, heads, head_dim]` as CTranslate2's `[heads * head_dim, hidden]`.

    Returns:
        `(weight, bias)`, head by head along the output axis, as CTranslate2 splits heads.
    """
    kernel = weights[f"{scope}/kernel"]
    return kernel.reshape(kernel.shape[0], -1).T, weights[f"{scope}/bias"].reshape(-1)


def _set_feedforward(spec, weights: dict, scope: str) -> None:
    for linear, name in zip(
        (spec.linear_0, spec.linear_1),
        ("feedforward_intermediate_dense", "feedforward_output_dense"),
        strict=True,
    ):
        linear.weight = weights[f"{scope}/{name}/kernel"].T
        linear.bias = weights[f"{scope}/{name}/bias"]
    _set_layer_norm(spec.layer_norm, weights, f"{scope}/feedforward_layer_norm")


def _set_layer_norm(spec, weights: dict, scope: str) -> None:
    spec.gamma = weights[f"{scope}/gamma"]
    spec.beta = weights[f"{scope}/beta"]


def convert_run(run: str | os.PathLike, output_dir: str | os.PathLike, force: bool = False) -> Path:
    """Converts `run/model.keras` with the vocabulary of `run/spm.model` into `output_dir`.

    Args:
        run: The run folder.
        output_dir: The CTranslate2 model directory to write.
        force: Whether to replace an existing `output_dir`.

    Returns:
        `output_dir`.
    """
    run = Path(run)
    converter = Seq2SeqTransformerConverter(
        load_model(run / "model.keras"), sentencepiece_pieces(run / "spm.model")
    )
    return Path(converter.convert(str(output_dir), force=force))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="run with model.keras, spm.model")
    parser.add_argument("--out", type=Path, required=True, help="CTranslate2 model directory")
    parser.add_argument("--force", action="store_true", help="replace an existing --out")
    arguments = parser.parse_args(argv)
    for path in (arguments.run / "model.keras", arguments.run / "spm.model"):
        if not path.is_file():
            parser.error(f"{path} does not exist")
    print(convert_run(arguments.run, arguments.out, arguments.force))


if __name__ == "__main__":
    main()
