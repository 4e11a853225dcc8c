"""The one place that reads keras-hub's private layer attributes, for the decoding step.

`tfscones.models.stepping.layer_step` recomputes a keras-hub `TransformerDecoder` layer at one
position with plain TensorFlow ops, so it needs the layer's sublayers, which keras-hub keeps in
private attributes (`_self_attention_layer`, `_query_dense`, `_num_heads`, ...). They are read
here and nowhere else; a keras-hub release that renames one fails here, with an error naming the
attribute, the layer and the version (and `tests/models/test_keras_hub_parts.py` fails with it).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import keras_hub


class AttentionParts(NamedTuple):
    """A keras `MultiHeadAttention` layer's projections and shape.

    Attributes:
        query, key, value: `EinsumDense` layers, kernels `[hidden, heads, head_dim]`.
        output: `EinsumDense`, kernel `[heads, head_dim, hidden]`.
        num_heads: Number of heads.
        head_dim: Size of one head's keys (and values).
    """

    query: Any
    key: Any
    value: Any
    output: Any
    num_heads: int
    head_dim: int


class DecoderLayerParts(NamedTuple):
    """A keras-hub `TransformerDecoder` layer (with cross-attention), taken apart.

    Attributes:
        self_attention, cross_attention: `AttentionParts`.
        self_norm, cross_norm, feedforward_norm: The blocks' `LayerNormalization` layers.
        intermediate, output: The feed-forward block's `Dense` layers.
        normalize_first: Whether the layer normalises each block's input (pre-norm) rather
            than its output.
    """

    self_attention: AttentionParts
    cross_attention: AttentionParts
    self_norm: Any
    cross_norm: Any
    feedforward_norm: Any
    intermediate: Any
    output: Any
    normalize_first: bool


def _private(layer: Any, name: str) -> Any:
    """`layer.<name>`, or an error naming the attribute that keras-hub no longer has."""
    try:
        return getattr(layer, name)
    except AttributeError:
        raise AttributeError(
            f"keras-hub {keras_hub.__version__}'s {type(layer).__name__} has no attribute "
            f"{name!r}, which tfscones's decoding step reads: this keras-hub release renamed "
            "it. Install a keras-hub within the range in pyproject.toml (constraints.txt pins "
            "the tested one), or update tfscones/models/stepping/keras_hub_parts.py."
        ) from None


def attention_parts(attention: Any) -> AttentionParts:
    """The `AttentionParts` of a keras `MultiHeadAttention` layer."""
    return AttentionParts(
        query=_private(attention, "_query_dense"),
        key=_private(attention, "_key_dense"),
        value=_private(attention, "_value_dense"),
        output=_private(attention, "_output_dense"),
        num_heads=_private(attention, "_num_heads"),
        head_dim=_private(attention, "_key_dim"),
    )


def decoder_layer_parts(layer: keras_hub.layers.TransformerDecoder) -> DecoderLayerParts:
    """The `DecoderLayerParts` of a built keras-hub `TransformerDecoder` with cross-attention.

    Raises:
        AttributeError: If keras-hub renamed an attribute read here (the message names it).
    """
    return DecoderLayerParts(
        self_attention=attention_parts(_private(layer, "_self_attention_layer")),
        cross_attention=attention_parts(_private(layer, "_cross_attention_layer")),
        self_norm=_private(layer, "_self_attention_layer_norm"),
        cross_norm=_private(layer, "_cross_attention_layer_norm"),
        feedforward_norm=_private(layer, "_feedforward_layer_norm"),
        intermediate=_private(layer, "_feedforward_intermediate_dense"),
        output=_private(layer, "_feedforward_output_dense"),
        normalize_first=layer.normalize_first,
    )


__all__ = ["AttentionParts", "DecoderLayerParts", "attention_parts", "decoder_layer_parts"]
