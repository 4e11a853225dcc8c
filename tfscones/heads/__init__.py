"""Output heads: what a model's logits mean, how decoders score them, and how they are trained.

The head is the one object that models, losses and decoders share; `OutputHead` (in `base`)
states the contract decoders rely on. Each head has its module, with its loss and its metrics:

| head (module)          | probabilities   | search score    | zeros        | loss           |
|------------------------|-----------------|-----------------|--------------|----------------|
| SoftmaxHead (softmax)  | softmax(z)      | log_softmax(z)  | never        | cross-entropy  |
| SigmoidHead (scones)   | σ(z), not norm. | log σ(z)        | never        | SconesLoss     |
| TanhHead (tanh)        | (1 + tanh z)/2  | -softplus(-2z)  | never        | TanhSconesLoss |
| EntmaxHead(α) (entmax) | entmax_α(z)     | log entmax_α(z) | -inf, pruned | EntmaxLoss     |

A decoder never asks which head it has: it calls `log_scores`. Greedy search may take the argmax of
raw logits, which is the same for every head (Stahlberg & Kumar 2022, footnote 7). What the scores
are (normalised or each token's own, sparse or not, what a translation's confidence means) each
head declares as its `score_kind` (`ScoreKind`); no code outside this package asks a head's class.

Heads hold no weights. `get` turns a name or a config into a head, so a model stores its head in
its config as a plain dict. A new head is one module plus its name in `get`'s table.
"""

from __future__ import annotations

import keras

from tfscones.heads.base import OutputHead, ScoreKind
from tfscones.heads.entmax import EntmaxHead, EntmaxLoss, EntmaxSupportSize, SparsemaxLoss
from tfscones.heads.scones import SconesLoss, SconesNegativeTerm, SconesPositiveTerm, SigmoidHead
from tfscones.heads.softmax import SequenceCrossEntropy, SoftmaxHead
from tfscones.heads.tanh import TanhHead, TanhNegativeTerm, TanhPositiveTerm, TanhSconesLoss

__all__ = [
    "EntmaxHead",
    "EntmaxLoss",
    "EntmaxSupportSize",
    "HEAD_NAMES",
    "OutputHead",
    "ScoreKind",
    "SconesLoss",
    "SconesNegativeTerm",
    "SconesPositiveTerm",
    "SequenceCrossEntropy",
    "SigmoidHead",
    "SoftmaxHead",
    "SparsemaxLoss",
    "TanhHead",
    "TanhNegativeTerm",
    "TanhPositiveTerm",
    "TanhSconesLoss",
    "get",
    "serialize",
]

_HEADS = {
    "softmax": SoftmaxHead,
    "sigmoid": SigmoidHead,
    "tanh": TanhHead,
    "entmax15": lambda: EntmaxHead(alpha=1.5),
    "sparsemax": lambda: EntmaxHead(alpha=2.0),
}
_ALIASES = {"scones": SigmoidHead, "entmax": EntmaxHead}
_NAMED_HEADS = {**_HEADS, **_ALIASES}

HEAD_NAMES = tuple(_HEADS)
"""One name per head `get` makes, aliases left out: what must cover every head iterates these."""


def get(identifier: str | dict | OutputHead) -> OutputHead:
    """Returns the head an identifier names.

    Args:
        identifier: A head; a name (`softmax`, `sigmoid` or `scones`, `tanh`, `entmax`,
            `entmax15`, `sparsemax`); or a dict `{"class_name": ..., "config": {...}}` from
            `serialize`, or `{"name": ..., **config}` as written in a YAML config.

    Returns:
        The `OutputHead`.

    Raises:
        ValueError: If the identifier names no head.
    """
    if isinstance(identifier, OutputHead):
        return identifier
    if isinstance(identifier, str):
        key = identifier.lower().replace("-", "").replace("_", "").replace("1.5", "15")
        if key not in _NAMED_HEADS:
            raise ValueError(f"unknown head {identifier!r}; known heads: {sorted(_NAMED_HEADS)}.")
        return _NAMED_HEADS[key]()
    if isinstance(identifier, dict) and "class_name" in identifier:
        return keras.saving.deserialize_keras_object(identifier)
    if isinstance(identifier, dict) and "name" in identifier:
        config = dict(identifier)
        named = get(config.pop("name"))
        return type(named)(**{**named.get_config(), **config})
    raise ValueError(f"cannot make an output head from {identifier!r}.")


def serialize(head: OutputHead) -> dict:
    """The Keras serialization of a head, for a model's `get_config`."""
    return keras.saving.serialize_keras_object(head)
