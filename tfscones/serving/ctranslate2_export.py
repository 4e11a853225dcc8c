"""Export a trained model for CTranslate2, the fast CPU engine: exact greedy search for every head.

    tfscones export --run runs/demo-scones-a0.5 --format ctranslate2 --out ct2/demo-scones
    export_ctranslate2("ct2/demo-scones", run="runs/demo-scones-a0.5", quantization="int8")

CTranslate2 (the optional extra `pip install "tfscones[ctranslate2]"`, which this module
imports) scores tokens with
log-softmax, whatever the model was trained with. Greedy search takes the argmax of the logits,
and every head's scores are monotone in the logit (softmax, σ, (1 + tanh)/2, entmax), so a
CTranslate2 greedy translation of any head's model is that model's greedy translation
(`tfscones.decoding.greedy`). Beam search and sampling rank hypotheses by their scores, which on
CTranslate2 are softmax's: they are exact for softmax models only, and
`tfscones.serving.ctranslate2_translator.CTranslate2Translator` refuses them for other heads.
Hard-MoE models (`LatentExpertTransformer`) are refused: their decoder starts from one of K
learned expert embeddings in place of the start token's, and a CTranslate2 decoder can only start
from a token of its vocabulary.

The model is described with CTranslate2's own specification (`TransformerSpec`) and written by
its `Converter`:
- layers, heads, ReLU, pre-norm (with a final layer norm after each stack) or post-norm as the
  model has it, and its layer-norm epsilon;
- token embeddings scaled by sqrt(hidden_dim) and summed with our own position table (keras-hub's
  `SinePositionEncoding` interleaves sine and cosine, which CTranslate2's built-in table does
  not), copied value for value for the model's `max_sequence_length` positions;
- queries, keys and values fused as CTranslate2 expects (one `[3 * hidden, hidden]` matrix for
  self-attention, queries apart from fused keys and values for attention over the encoder);
- the output projection with its bias; tied embeddings give the same matrix to both embeddings
  and the projection, which CTranslate2 stores once (a model's `output_kernel_scale` other than
  1 gives the projection its own copy, scaled as the model scales it);
- the vocabulary: the SentencePiece pieces in id order, so a CTranslate2 token is our id; EOS is
  added to every source (`add_source_eos`), as our tokeniser does.

The output folder holds CTranslate2's `model.bin`, `config.json` and `shared_vocabulary.json`, the
run's SentencePiece model (`sentencepiece.model`), `tfscones_ctranslate2.json` (the head, the
searches that are exact, the positions) and a README with the lines of Python that translate with
it. It is written under a hidden name and renamed into place when complete.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import ctranslate2
import numpy as np
import sentencepiece
from ctranslate2.specs import common_spec
from ctranslate2.specs import transformer_spec as specs

from tfscones import heads
from tfscones.data.symbol_vocab import SPECIAL_SYMBOLS, SymbolTokenizer
from tfscones.data.vocab_ids import BOS_ID, EOS_ID, UNK_ID
from tfscones.models import LatentExpertTransformer, Seq2SeqTransformer, load_model
from tfscones.ranges import AT_LEAST_ONE
from tfscones.serving.export import (
    ExportError,
    check_parents,
    holds_something,
    input_files,
    staged_folder,
)

QUANTIZATIONS = ("float32", "int8_float32", "int8")
"""Weight types of an export: int8 weights are quantised once, when converted."""
EXPORT_INFO = "tfscones_ctranslate2.json"
SENTENCEPIECE_MODEL = "sentencepiece.model"
SYMBOL_VOCABULARY = "symbols.json"
"""The vocabulary file of an export of a symbol vocabulary (G2P), in place of SentencePiece's."""
GREEDY = "greedy"
BEAM = "beam"
SAMPLING = "sampling"
SEARCHES = (GREEDY, BEAM, SAMPLING)


@dataclasses.dataclass(frozen=True)
class CTranslate2Info:
    """What a CTranslate2 export holds (its `tfscones_ctranslate2.json`).

    Attributes:
        head: The output head (`SigmoidHead()`).
        exact_searches: The CTranslate2 searches that decode as the model's own: `greedy` for
            every head, `beam` and `sampling` for softmax.
        positions: The model's `max_sequence_length`: the longest source and output, EOS
            included, CTranslate2 may be asked for.
        quantization: The weights' type (`QUANTIZATIONS`).
        head_config: The head as `tfscones.heads.serialize` writes it, from which the
            translator scores greedy translations (exports of older versions have none).
    """

    head: str
    exact_searches: tuple[str, ...]
    positions: int
    quantization: str
    head_config: dict | None = None

    @classmethod
    def read(cls, folder: str | os.PathLike) -> CTranslate2Info:
        """The info of the export in `folder`.

        Raises:
            FileNotFoundError: If `folder` is not a tfscones CTranslate2 export.
            ValueError: If its info file is not JSON, lacks a field, holds one this version does
                not know, or a field of the wrong kind, naming the file and the field.
        """
        path = Path(folder) / EXPORT_INFO
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} does not exist: {folder} is not a CTranslate2 export of tfscones "
                "(tfscones export --format ctranslate2)."
            )
        info = read_json(path)
        try:
            return cls(**_info_fields(info))
        except ValueError as error:
            problem = str(error).rstrip(".")
            raise ValueError(
                f"{path}: {problem} (export the model again: tfscones export --format ctranslate2)"
            ) from None


def read_json(path: Path):
    """The JSON value a file of an export holds.

    Raises:
        ValueError: If it is not JSON (or not UTF-8), naming the file.
    """
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ValueError(f"{path}: not JSON ({error})") from None


def _info_fields(info) -> dict:
    """`CTranslate2Info`'s fields from an info file's JSON value, each checked.

    Raises:
        ValueError: Naming the field that is missing, unknown or of the wrong kind.
    """
    if not isinstance(info, dict):
        raise ValueError(f"must hold a JSON object, not {type(info).__name__}")
    names = [field.name for field in dataclasses.fields(CTranslate2Info)]
    unknown = sorted(set(info) - set(names))
    if unknown:
        raise ValueError(f"unknown field {', '.join(unknown)}")
    missing = [name for name in names if name not in info and name != "head_config"]
    if missing:
        raise ValueError(f"{', '.join(missing)} is missing")
    if not isinstance(info["head"], str):
        raise ValueError(f"head must be a string (got {info['head']!r})")
    searches = info["exact_searches"]
    if not isinstance(searches, list) or not all(search in SEARCHES for search in searches):
        raise ValueError(
            f"exact_searches must be a list of {', '.join(SEARCHES)} (got {searches!r})"
        )
    if not isinstance(info.get("head_config", {}), (dict, type(None))):
        raise ValueError(f"head_config must be an object (got {info['head_config']!r})")
    AT_LEAST_ONE.check("positions", info["positions"])
    if info["quantization"] not in QUANTIZATIONS:
        raise ValueError(
            f"quantization must be one of {', '.join(QUANTIZATIONS)} (got {info['quantization']!r})"
        )
    return {**info, "exact_searches": tuple(searches)}


def check_convertible(model) -> None:
    """Refuses a model CTranslate2's Transformer cannot express exactly.

    Raises:
        ExportError: For a hard mixture of experts, or a model that is not a `Seq2SeqTransformer`.
    """
    if isinstance(model, LatentExpertTransformer):
        raise ExportError(
            "a hard mixture of experts does not convert to CTranslate2: its decoder starts from "
            "one of K learned expert embeddings in place of the start token's, and a "
            "CTranslate2 decoder starts only from a token of its vocabulary. Export it as a "
            "SavedModel (tfscones export --run RUN --out DIR), whose translate_experts "
            "signature decodes every expert."
        )
    if not isinstance(model, Seq2SeqTransformer):
        raise ExportError(f"only a Seq2SeqTransformer converts, not {type(model).__name__}.")


def exact_searches(model: Seq2SeqTransformer) -> tuple[str, ...]:
    """The CTranslate2 searches that decode `model` as its own decoders do."""
    if model.head.score_kind.function == "log_softmax":
        return (GREEDY, BEAM, SAMPLING)
    return (GREEDY,)


def transformer_spec(model: Seq2SeqTransformer, pieces: list[str]):
    """CTranslate2's `TransformerSpec` of the model, its weights and vocabulary set.

    Args:
        model: A `Seq2SeqTransformer` of any head (`check_convertible`).
        pieces: The vocabulary, piece `i` being token id `i`.

    Returns:
        The specification, ready for `validate`, `optimize` and `save`.

    Raises:
        ExportError: If the vocabulary does not fit the model.
    """
    if len(pieces) != model.vocabulary_size:
        raise ExportError(
            f"the vocabulary has {len(pieces)} entries, the model a vocabulary of "
            f"{model.vocabulary_size}: they are not from the same run."
        )
    layer_arguments = {"pre_norm": model.normalize_first, "activation": common_spec.Activation.RELU}
    spec = specs.TransformerSpec(
        specs.TransformerEncoderSpec(model.num_encoder_layers, model.num_heads, **layer_arguments),
        specs.TransformerDecoderSpec(model.num_decoder_layers, model.num_heads, **layer_arguments),
    )
    spec.config.layer_norm_epsilon = model.layer_norm_epsilon
    spec.config.unk_token = pieces[UNK_ID]
    spec.config.bos_token = pieces[BOS_ID]
    spec.config.eos_token = pieces[EOS_ID]
    spec.config.decoder_start_token = pieces[BOS_ID]
    spec.config.add_source_eos = True
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    weights = {variable.path: variable.numpy() for variable in model.weights}
    positions = position_table(model)
    _set_encoder(spec.encoder, weights, positions, model)
    _set_decoder(spec.decoder, weights, positions, model)
    return spec


def position_table(model: Seq2SeqTransformer) -> np.ndarray:
    """The sinusoids the model adds at positions `0..max_sequence_length-1`, float32.

    Computed by the model's own `SinePositionEncoding`, so CTranslate2 adds the same values.
    """
    shape = (1, model.max_sequence_length, model.hidden_dim)
    return np.asarray(model.position_encoding(np.zeros(shape, np.float32)))[0]


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
    projection = model.output_projection
    embeddings = model.token_embedding.embeddings if projection.tied else None
    spec.projection.weight = np.array(projection.scaled_kernel(embeddings)).T
    spec.projection.bias = projection.bias.numpy()


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
    groups = [projections] if len(spec.linear) == 2 else [projections[:1], projections[1:]]
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


def sentencepiece_pieces(model_file: str | os.PathLike) -> list[str]:
    """The pieces of a SentencePiece model, in id order."""
    processor = sentencepiece.SentencePieceProcessor(model_file=str(model_file))
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def vocabulary_tokens(vocabulary: Path) -> tuple[list[str], str]:
    """The tokens of a run's vocabulary in id order, and the export's name for the file.

    A symbol vocabulary (`symbols.json`: its special symbols, tags, characters and labels) or a
    SentencePiece model (its pieces).
    """
    if vocabulary.suffix == ".json":
        symbols = SymbolTokenizer.from_file(vocabulary)
        return [*SPECIAL_SYMBOLS, *symbols.symbols], SYMBOL_VOCABULARY
    return sentencepiece_pieces(vocabulary), SENTENCEPIECE_MODEL


def write_ctranslate2(
    model: Seq2SeqTransformer, spm: Path, out: Path, quantization: str = "float32"
) -> CTranslate2Info:
    """Writes the model, its vocabulary file, info and README as a CTranslate2 folder.

    Args:
        model: The model (`check_convertible`).
        spm: Its run's vocabulary: a SentencePiece model, or a symbol vocabulary.
        out: The folder to write; it must not exist, or be empty.
        quantization: One of `QUANTIZATIONS`.

    Returns:
        What the export holds.

    Raises:
        ExportError: If the model or its vocabulary cannot be converted (before anything is
            written), another export is writing `out`, or another process wrote it meanwhile.
    """
    with staged_folder(out) as staging:
        return _write_folder(model, Path(spm), staging, quantization)


def _write_folder(
    model: Seq2SeqTransformer, spm: Path, folder: Path, quantization: str
) -> CTranslate2Info:
    """`write_ctranslate2` into `folder`, a new folder (CTranslate2's converter makes it)."""
    check_convertible(model)
    tokens, vocabulary_name = vocabulary_tokens(spm)
    spec = transformer_spec(model, tokens)
    info = CTranslate2Info(
        head=repr(model.head),
        exact_searches=exact_searches(model),
        positions=model.max_sequence_length,
        quantization=quantization,
        head_config=heads.serialize(model.head),
    )
    _SpecWriter(spec).convert(str(folder), quantization=quantization)
    shutil.copyfile(spm, folder / vocabulary_name)
    (folder / EXPORT_INFO).write_text(
        json.dumps(dataclasses.asdict(info), indent=2) + "\n", encoding="utf-8"
    )
    readme = usage_readme(info, symbols=vocabulary_name == SYMBOL_VOCABULARY)
    (folder / "README.md").write_text(readme, encoding="utf-8")
    return info


class _SpecWriter(ctranslate2.converters.Converter):
    """CTranslate2's converter of a ready `TransformerSpec`: validates, quantises and saves it."""

    def __init__(self, spec):
        self.spec = spec

    def _load(self):
        return self.spec


def usage_readme(info: CTranslate2Info, symbols: bool = False) -> str:
    """The README of an export: what it is, and the Python that translates with it.

    Args:
        info: What the export holds.
        symbols: Whether its vocabulary is a symbol vocabulary (`symbols.json`) rather than a
            SentencePiece model.
    """
    beam = (
        "Beam search (`beam_size=4`) and sampling are exact too: the model is a softmax model."
        if BEAM in info.exact_searches
        else (
            f"Only greedy search (`beam_size=1`) is this model's own: CTranslate2 scores "
            f"hypotheses with log-softmax, and this model's head is {info.head}, so beam search "
            "and sampling would rank by scores the model was not trained to give, and the "
            "scores CTranslate2 returns are not the model's."
        )
    )
    return f"""# A tfscones model for CTranslate2

Written by `tfscones export --format ctranslate2` ({info.quantization} weights, {info.head} head).

```python
from concurrent import futures

import ctranslate2
{_tokenizer_lines(symbols)}
with futures.ThreadPoolExecutor(max_workers=1) as loader:  # loads on a thread that then ends
    translator = loader.submit(ctranslate2.Translator, ".").result()
results = translator.translate_batch(
    sources,
    beam_size=1,
    max_input_length={info.positions - 1},
    max_decoding_length={info.positions},
    min_decoding_length=0,
)
print({_output_expression(symbols)})
```

Run it in this folder, or give the folder's path to both. {beam}

The model loads on a thread that then ends: loading int8 weights leaves an OpenMP team on the
loading thread, and at more than one `intra_threads` that team can slow decoding several times
(on a 2-core AMD EPYC at 2 threads, 29 instead of 168 sentences/s one at a time).

Sources longer than {info.positions - 1} pieces are cut (the model has {info.positions}
positions, EOS included); `min_decoding_length=0` lets the model end at once, as it may under
tfscones. `tfscones.serving.ctranslate2_translator.CTranslate2Translator` decodes this folder
exactly as the tfscones SavedModel does (its output-length limits, empty lines, refused searches).
"""


def _tokenizer_lines(symbols: bool) -> str:
    """The README's Python that makes `sources`: pieces, or a language tag and characters."""
    if not symbols:
        return f"""import sentencepiece

tokenizer = sentencepiece.SentencePieceProcessor(model_file="{SENTENCEPIECE_MODEL}")
sources = [tokenizer.encode(line, out_type=str) for line in ["Guten Morgen."]]"""
    return f"""import json
import unicodedata

vocabulary = json.load(open("{SYMBOL_VOCABULARY}", encoding="utf-8"))
normalization = vocabulary["normalization"]  # the word's characters after it, one token each
words = [("fre", "abject")]  # (language, word); a language's tag is the token <language>
sources = [
    [f"<{{language}}>", *(word if normalization == "none" else
                         unicodedata.normalize(normalization, word))]
    for language, word in words
]"""


def _output_expression(symbols: bool) -> str:
    if symbols:
        return '[" ".join(result.hypotheses[0]) for result in results]'
    return "[tokenizer.decode(result.hypotheses[0]) for result in results]"


def export_ctranslate2(
    out: str | Path,
    run: str | Path | None = None,
    checkpoint: str | Path | None = None,
    spm: str | Path | None = None,
    quantization: str = "float32",
) -> dict:
    """Exports a trained model (a run folder's, or a checkpoint and a SentencePiece model).

    Args:
        out: The folder to write; it must not exist, or be empty.
        run: A training run folder (its `model.keras` and `spm.model`).
        checkpoint: A `.keras` model, in place of the run's.
        spm: A SentencePiece model, in place of the run's.
        quantization: One of `QUANTIZATIONS`.

    Returns:
        The export's `CTranslate2Info` as a dict, with its `path`.

    Raises:
        ExportError: If an input is missing or cannot be loaded, the output folder is not new
            or another export is writing it, the quantization unknown or the model not
            convertible; all before anything is written.
    """
    out = Path(out)
    if quantization not in QUANTIZATIONS:
        raise ExportError(f"--quantization must be one of {', '.join(QUANTIZATIONS)}")
    checkpoint, spm = input_files(run, checkpoint, spm)
    check_parents(out)
    if holds_something(out):
        raise ExportError(f"{out} exists and is not empty; give a new folder")
    with staged_folder(out) as staging:
        try:
            model = load_model(checkpoint)
        except (OSError, ValueError, TypeError) as error:
            raise ExportError(f"cannot load the model {checkpoint}: {error}") from None
        info = _write_folder(model, spm, staging, quantization)
    return {"path": str(out), **dataclasses.asdict(info)}
