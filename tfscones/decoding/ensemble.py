"""Ensembles: N models of one head and one vocabulary decoded as one model, by every decoder.

An `Ensemble` is a `tfscones.models.stepping.Decodable` whose `EnsembleStepper` steps every
model and gives the decoders one row of logits per step, `head.ensemble_logits` of the models'
logits: logits whose probabilities are the mean of the models' probabilities, so that a token's
search score is the log of its mean probability, as in fairseq's `EnsembleModel` (Ott et al.
2019). Each head says how its logits combine (`tfscones.heads.OutputHead.ensemble_logits`), so
the decoders stay head-blind and need no change: greedy and beam search, diverse beam search,
sampling, `translate` and `score_texts` take an ensemble as they take one model (exact search,
whose pool holds caches of one tensor, an ensemble of one model only).

Example:
```python
ensemble = Ensemble([load_model("a/model.keras"), load_model("b/model.keras")])
translate(ensemble, tokenizer, ["Guten Morgen."], search=Search("beam", beam_size=4))
```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from tfscones.models.stepping import SourceGroups, StepCapabilities, StepModel, undeclared

if TYPE_CHECKING:
    from tfscones.heads import OutputHead


class Ensemble:
    """N models of one head and one vocabulary, decoded and scored as one model.

    Each step runs every model and scores a token by the log of the mean of the models'
    probabilities of it (`EnsembleStepper`). Its `max_sequence_length` is the smallest of the
    models' (`translate` cuts sources to it; a decoder may still ask any model for more
    positions). Models with latent experts decode as their `call` does, with expert 0 (BOS at
    index 0): the ensemble declares no latent experts, so the `experts` search refuses it.

    Calling it on `{"source_ids", "target_in_ids"}` gives the teacher-forced ensemble logits
    (the same combination of every model's call), which `tfscones.decoding.score_texts` and
    `teacher_forced` read.

    Example:
    ```python
    ensemble = Ensemble([model_a, model_b])
    output = greedy_decode(ensemble, source_ids)
    ```

    Args:
        models: One or more models (`Seq2SeqTransformer`s, or any `Decodable` with `head`,
            `vocabulary_size` and `max_sequence_length`), all of one head and one vocabulary
            size.

    Raises:
        ValueError: If there is no model, or two models differ in head or vocabulary size
            (naming both values).
    """

    def __init__(self, models: Sequence[Any]):
        self.models = tuple(models)
        check_compatible(self.models)
        self.head: OutputHead = self.models[0].head
        self.vocabulary_size = int(self.models[0].vocabulary_size)
        self.max_sequence_length = min(int(model.max_sequence_length) for model in self.models)

    def stepper(self, frozen_weights: bool = False) -> EnsembleStepper:
        """An `EnsembleStepper` of every model's stepper (each frozen if `frozen_weights`)."""
        steppers = tuple(model.stepper(frozen_weights=frozen_weights) for model in self.models)
        return EnsembleStepper(steppers, self.max_sequence_length)

    def __call__(self, inputs: dict[str, tf.Tensor], training: bool = False) -> tf.Tensor:
        """The ensemble's logits of teacher forcing: every model's call, combined by the head.

        Args:
            inputs: `{"source_ids": ..., "target_in_ids": ...}`, as a model's call takes.
            training: Whether dropout is active.

        Returns:
            float32 logits `[batch, target_length, vocabulary_size]`.
        """
        logits = [tf.cast(model(inputs, training=training), tf.float32) for model in self.models]
        return self.head.ensemble_logits(tf.stack(logits))


def check_compatible(models: Sequence[Any]) -> None:
    """Refuses models that cannot form an ensemble: none, or different heads or vocabularies.

    Raises:
        ValueError: Naming the first model that differs from model 0, and both values.
    """
    if not models:
        raise ValueError("an Ensemble needs at least one model.")
    first = models[0]
    for index, model in enumerate(models[1:], start=1):
        if model.head != first.head:
            raise ValueError(
                f"the models of an Ensemble must share one head: model 0 has {first.head!r}, "
                f"model {index} has {model.head!r}."
            )
        if int(model.vocabulary_size) != int(first.vocabulary_size):
            raise ValueError(
                f"the models of an Ensemble must share one vocabulary: model 0 has "
                f"{first.vocabulary_size} tokens, model {index} has {model.vocabulary_size}."
            )


def shared_capabilities(steppers: Sequence[StepModel]) -> StepCapabilities:
    """What every stepper can do: the intersection of their `StepCapabilities`.

    `caches_prefixes` is never declared: exact search pools cache entries of one tensor, and an
    ensemble's cache holds one per model, so exact search decodes an ensemble of one model
    only (and refuses more, naming the tensors). Nor is `latent_experts` (see `Ensemble`).
    """
    return StepCapabilities(
        shares_sources=all(s.capabilities.shares_sources for s in steppers),
        grows_cache=all(s.capabilities.grows_cache for s in steppers),
    )


class EnsembleStepper:
    """The `StepModel` of an `Ensemble`: every member steps, the head combines their logits.

    Encoder outputs, cross-attention caches, step weights and self-attention caches are tuples
    with one entry per member (each a nest with the rows first, so that searches repeat and
    reorder them with `tf.nest.map_structure` as they do one model's). `decode_step` steps
    every member and returns `head.ensemble_logits` of their stacked logits. Its capabilities
    are those every member declares (`shared_capabilities`).

    Args:
        steppers: The members' `StepModel`s, of one head (as `Ensemble` checks).
        max_sequence_length: The default number of output positions (the members' smallest).
    """

    def __init__(self, steppers: Sequence[StepModel], max_sequence_length: int):
        self.steppers = tuple(steppers)
        self.max_sequence_length = int(max_sequence_length)
        self.head: OutputHead = self.steppers[0].head
        self.capabilities = shared_capabilities(self.steppers)

    def stepper(self, frozen_weights: bool = False) -> EnsembleStepper:
        """Itself; or, for `frozen_weights` where its members' are not, a frozen copy."""
        frozen = tuple(s.stepper(frozen_weights=frozen_weights) for s in self.steppers)
        if all(new is old for new, old in zip(frozen, self.steppers, strict=True)):
            return self
        return EnsembleStepper(frozen, self.max_sequence_length)

    def encode(self, source_ids) -> tuple[tuple[Any, ...], tf.Tensor]:
        """Every member's `encode`; the padding mask is the first's (all read the same ids).

        Returns:
            `(encoder_outputs, source_padding_mask)`: a tuple of each member's encoder
            outputs, and bool `[rows, source_length]`.
        """
        encoded = [stepper.encode(source_ids) for stepper in self.steppers]
        return tuple(outputs for outputs, _ in encoded), encoded[0][1]

    def cross_attention_cache(self, encoder_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        """Each member's `cross_attention_cache` of its own encoder outputs."""
        return tuple(
            stepper.cross_attention_cache(outputs)
            for stepper, outputs in zip(self.steppers, encoder_outputs, strict=True)
        )

    def step_weights(self) -> tuple[Any, ...]:
        """Each member's `step_weights`."""
        return tuple(stepper.step_weights() for stepper in self.steppers)

    def initial_cache(self, batch_size, max_length: int | None = None) -> tuple[Any, ...]:
        """Each member's `initial_cache` of `max_length` positions (default: the ensemble's)."""
        width = self.max_sequence_length if max_length is None else max_length
        return tuple(stepper.initial_cache(batch_size, width) for stepper in self.steppers)

    def growing_cache(self, batch_size) -> tuple[Any, ...]:
        """Each member's `growing_cache` (when every member `grows_cache`)."""
        if not self.capabilities.grows_cache:
            raise undeclared(self, "grows_cache")
        return tuple(stepper.growing_cache(batch_size) for stepper in self.steppers)

    def prefix_cache(self, entries, slots):
        """Not declared (`shared_capabilities`)."""
        raise undeclared(self, "caches_prefixes")

    def prefix_entries(self, own_position) -> tf.Tensor:
        """Not declared (see `prefix_cache`)."""
        raise undeclared(self, "caches_prefixes")

    def decode_step(
        self,
        token_ids,
        encoder_outputs: tuple[Any, ...],
        source_padding_mask,
        cache: tuple[Any, ...],
        index,
        cross_attention_cache: tuple[Any, ...] | None = None,
        step_weights: tuple[Any, ...] | None = None,
        rows_per_source: int | SourceGroups = 1,
    ) -> tuple[tf.Tensor, tuple[Any, ...]]:
        """Every member's step, and `head.ensemble_logits` of their logits.

        Args:
            token_ids: int32 `[rows]`, the tokens at position `index`.
            encoder_outputs: The tuple from `encode`, reordered like the rows.
            source_padding_mask: bool `[rows, source_length]`.
            cache: The tuple of the members' caches.
            index: The position of `token_ids` (scalar, or `[rows]`).
            cross_attention_cache: The tuple from `cross_attention_cache`; None passes None to
                every member (which then computes its own).
            step_weights: The tuple from `step_weights`; None passes None to every member.
            rows_per_source: As `StepModel.decode_step`, the same for every member.

        Returns:
            `(logits, cache)`: float32 logits `[rows, vocabulary_size]` whose head
            probabilities are the mean of the members', and the tuple of their caches.
        """
        count = len(self.steppers)
        crosses = (None,) * count if cross_attention_cache is None else cross_attention_cache
        weights = (None,) * count if step_weights is None else step_weights
        logits, caches = [], []
        for stepper, outputs, own_cache, cross, own_weights in zip(
            self.steppers, encoder_outputs, cache, crosses, weights, strict=True
        ):
            step_logits, step_cache = stepper.decode_step(
                token_ids,
                outputs,
                source_padding_mask,
                own_cache,
                index,
                cross,
                own_weights,
                rows_per_source,
            )
            logits.append(tf.cast(step_logits, tf.float32))
            caches.append(step_cache)
        return self.head.ensemble_logits(tf.stack(logits)), tuple(caches)


__all__ = ["Ensemble", "EnsembleStepper", "check_compatible", "shared_capabilities"]
