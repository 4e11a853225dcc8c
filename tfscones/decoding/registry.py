"""The decoders by name: what `Search`, `tfscones translate` and the SavedModel choose from.

A decoder is one module that ends with one `register(Decoder(...))`: its name, its settings (a
frozen dataclass whose fields are declared with `setting`, each with its allowed range, and
checked by `check_settings` in its `__post_init__`), the function that runs it and returns an
`NBest`, and how many hypotheses and decoder rows it gives each sentence. Everything else reads
the registry: `Search("beam", beam_size=8)` builds and checks the settings of the decoder named,
`tfscones translate` makes a flag of every setting (`--search beam --beam 8`, checked against
the setting's range), and a `tfscones.serving.TranslationModule` makes a signature of any
`Search`, sizing its memory check by the rows a sentence takes.

Example, a decoder that returns the empty translation `num_hypotheses` times:
```python
@dataclasses.dataclass(frozen=True)
class EmptySettings:
    num_hypotheses: int = setting(1, None, "empty translations a sentence", SEARCH_COUNT)

    def __post_init__(self):
        check_settings(self)

def decode_empty(stepper, source_ids, settings, limits, jit_compile):
    shape = [tf.shape(source_ids)[0], settings.num_hypotheses]
    zeros = tf.zeros(shape)
    return NBest(
        tf.fill([*shape, 1], EOS_ID), tf.ones(shape, tf.int32), zeros, zeros, zeros[..., None]
    )

register(
    Decoder("empty", "the empty translation", EmptySettings, decode_empty, settings_count)
)
```
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf

from tfscones.decoding.common import OutputLimits
from tfscones.ranges import Range


class NBest(NamedTuple):
    """Hypotheses per sentence, best (or, for sampling, first drawn) first.

    Attributes:
        ids: int32 `[batch, num_hypotheses, max_output_length]`, EOS included, then PAD (0).
        lengths: int32 `[batch, num_hypotheses]`, tokens per hypothesis, EOS included (0 for an
            empty slot, which only a sparse entmax head can leave).
        scores: float32 `[batch, num_hypotheses]`: the search's ranking score (the sum of the
            head's log-scores, divided by the length penalty if there is one).
        log_scores: float32 `[batch, num_hypotheses]`: the sum of the head's log-scores of each
            hypothesis' tokens, EOS included (`scores` without the length penalty).
        token_log_scores: float32 `[batch, num_hypotheses, max_output_length]`: each token's
            head log-score as the search chose it (the terms of `log_scores`), then 0. Their
            exp is the per-token confidence (`tfscones.decoding.confidence`), with no second
            pass over the model.
    """

    ids: tf.Tensor
    lengths: tf.Tensor
    scores: tf.Tensor
    log_scores: tf.Tensor
    token_log_scores: tf.Tensor


def setting(
    default: Any,
    flag: str | None,
    help: str,  # noqa: A002 (argparse's name)
    allowed: Range | None = None,
    hint: str = "",
) -> Any:
    """A field of a decoder's settings: its default, its flag, its help and its allowed range.

    Args:
        default: The value when none is given.
        flag: The `tfscones translate` flag that sets it; None for one the command sets itself
            (`HYPOTHESES_SETTING`, from `--nbest`).
        help: One line for `--help`.
        allowed: The numbers it may take (`tfscones.ranges`): `check_settings` refuses others,
            and the flag parses and checks its value with it. None leaves it unchecked and the
            flag of the default's type.
        hint: A sentence the refusal adds (`0 keeps all tokens.`).
    """
    metadata = {"flag": flag, "help": help, "allowed": allowed, "hint": hint}
    return dataclasses.field(default=default, metadata=metadata)


def check_settings(settings: Any) -> None:
    """Checks every field of a settings dataclass against its `allowed` range, in field order.

    Called first in each settings' `__post_init__`, so that cross-field checks (no more
    hypotheses than beams) see only values of their ranges. Each checked value is kept as a
    plain `int` or `float` (`Range.check`), so settings compare, hash and write to JSON alike
    whether given as Python or numpy numbers.

    Raises:
        ValueError: Naming the first field outside its range, its value and the range.
    """
    for field in dataclasses.fields(settings):
        allowed = field.metadata.get("allowed")
        if allowed is not None:
            value = allowed.check(field.name, getattr(settings, field.name), field.metadata["hint"])
            object.__setattr__(settings, field.name, value)


def one_per_sentence(settings: Any, stepper: Any) -> int:
    """One hypothesis (or one decoder row) per sentence, whatever the settings."""
    return 1


HYPOTHESES_SETTING = "num_hypotheses"
"""The setting, in a decoder of several hypotheses, of how many it returns (`--nbest`)."""


def settings_count(settings: Any, stepper: Any) -> int:
    """The settings' `num_hypotheses` (`HYPOTHESES_SETTING`)."""
    return getattr(settings, HYPOTHESES_SETTING)


def decoder_arguments(settings: Any, limits: OutputLimits) -> dict[str, Any]:
    """The settings' fields and the limits, as keyword arguments of a decoding function."""
    return {**dataclasses.asdict(settings), **limits.arguments()}


Decode = Callable[[Any, tf.Tensor, Any, OutputLimits, bool], NBest]
PerSentence = Callable[[Any, Any], int]


@dataclasses.dataclass(frozen=True)
class Decoder:
    """A registered decoder.

    Attributes:
        name: What `Search(name)` and `--search name` call it.
        summary: One line for `--help`.
        settings: A frozen dataclass of its settings (fields made with `setting`); its
            `__post_init__` calls `check_settings`, then refuses combinations that do not go
            together, with a `ValueError` naming them.
        decode: `decode(stepper, source_ids, settings, limits, jit_compile) -> NBest`, on a
            `tfscones.models.stepping.StepModel` and int32 source ids `[batch, length]`.
        hypotheses: `hypotheses(settings, stepper)`, the hypotheses it returns per sentence;
            raises a `ValueError` for a model it cannot decode.
        rows_per_sentence: `rows_per_sentence(settings, stepper)`, the decoder rows (beams,
            samples, experts) a sentence takes at once: what its memory grows with.
    """

    name: str
    summary: str
    settings: type
    decode: Decode
    hypotheses: PerSentence = one_per_sentence
    rows_per_sentence: PerSentence = one_per_sentence

    def make_settings(self, values: dict[str, Any]) -> Any:
        """Its settings from `values`, the defaults for the rest.

        Raises:
            ValueError: Naming a setting it does not have, or one out of range.
        """
        known = {field.name for field in dataclasses.fields(self.settings)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"{self.name} search has no setting {', '.join(unknown)}; its settings: "
                f"{', '.join(sorted(known)) or 'none'}."
            )
        return self.settings(**values)


_DECODERS: dict[str, Decoder] = {}


def register(decoder: Decoder) -> Decoder:
    """Adds a decoder under its name and returns it.

    Raises:
        ValueError: If another decoder has the name.
    """
    if decoder.name in _DECODERS and _DECODERS[decoder.name] != decoder:
        raise ValueError(f"a decoder named {decoder.name!r} is registered already.")
    _DECODERS[decoder.name] = decoder
    return decoder


def decoder_named(name: str) -> Decoder:
    """The registered decoder called `name`.

    Raises:
        ValueError: Listing the registered names, if none is called `name`.
    """
    if name not in _DECODERS:
        raise ValueError(f"unknown search method {name!r}; methods: {', '.join(decoder_names())}.")
    return _DECODERS[name]


def decoder_names() -> tuple[str, ...]:
    """The registered decoders' names, in alphabetical order."""
    return tuple(sorted(_DECODERS))


def decoders() -> tuple[Decoder, ...]:
    """The registered decoders, in alphabetical order of their names."""
    return tuple(_DECODERS[name] for name in decoder_names())
