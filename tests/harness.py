"""The one test harness: tiny models per head, cached decoding, save-and-load round trips.

Every test that needs a real model builds it here, so a change to the model's constructor or
presets is made once:

- `tiny_model`: the `tiny` preset (what the programs train), dropout off, optionally with EOS
  made likely so that random weights end sentences early.
- `small_model`: a hand-sized Transformer (16 wide, 2+2 layers) for model-level tests, of any
  class (`Seq2SeqTransformer`, `LatentExpertTransformer`).
- `model_inputs`, `stepwise_logits`: the full forward pass's inputs, and the same logits from the
  incremental decoder one step at a time (keras-hub's test idea: cached decoding must equal the
  full forward pass).
- `saved_and_loaded`: a model written with `model.save` and read back with `load_model`.
- `EVERY_HEAD`, `EVERY_HEAD_AND_BISECTION`: the registered heads (`tfscones.heads.HEAD_NAMES`),
  over which the head, loss, decoder and export tests run, so a new head gets them all without
  a list to edit.
- `FakeStepModel`: the base of the decoder tests' fake models (a
  `tfscones.models.stepping.StepModel` without a network), whose logits come from tables, so
  that a search's optimum is known; the tables themselves live beside those tests in
  `tests/decoding/`.
- `CopyModel`: a fake model that copies its source (the decoders' and `translate`'s tests).
- `restricted`, `RowCounting`: a real model's stepper that declares fewer capabilities (so a
  decoder takes its general path), or that records the rows of each step.
"""

import dataclasses
from pathlib import Path

import numpy as np
import tensorflow as tf

from tfscones import heads
from tfscones.data.preprocessing import padding_mask
from tfscones.data.vocab_ids import EOS_ID, PAD_ID
from tfscones.models import Seq2SeqTransformer, load_model
from tfscones.models.stepping import (
    EVERY_CAPABILITY,
    StepCapabilities,
    TransformerStepper,
    undeclared,
)

EVERY_HEAD = {name: heads.get(name) for name in heads.HEAD_NAMES}
# Entmax at an α of neither closed form (1.5, 2) goes through bisection.
EVERY_HEAD_AND_BISECTION = {**EVERY_HEAD, "entmax-1.3": heads.EntmaxHead(1.3, n_iter=40)}


def tiny_model(
    vocabulary_size: int,
    head="softmax",
    max_sequence_length: int = 8,
    eos_bias: float = 0.0,
    model_class=Seq2SeqTransformer,
    **overrides,
):
    """The `tiny` preset with dropout off; `eos_bias` is added to EOS's output bias."""
    model = model_class.from_preset(
        "tiny",
        vocabulary_size=vocabulary_size,
        head=head,
        dropout=0.0,
        max_sequence_length=max_sequence_length,
        **overrides,
    )
    if eos_bias:
        bias = model.output_projection.bias
        bias.assign(bias.numpy() + eos_bias * np.eye(vocabulary_size)[EOS_ID])
    return model


def small_model(vocabulary_size: int, head="softmax", model_class=Seq2SeqTransformer, **overrides):
    """A 16-wide Transformer, 2 encoder and 2 decoder layers, dropout off (overridable)."""
    arguments = dict(
        vocabulary_size=vocabulary_size,
        num_encoder_layers=2,
        num_decoder_layers=2,
        hidden_dim=16,
        num_heads=2,
        intermediate_dim=32,
        dropout=0.0,
        max_sequence_length=8,
        head=head,
    )
    arguments.update(overrides)
    return model_class(**arguments)


def model_inputs(source, target_in) -> dict[str, tf.Tensor]:
    """The `(source_ids, target_in_ids)` dict a model's `call` takes."""
    return {
        "source_ids": tf.constant(source, tf.int32),
        "target_in_ids": tf.constant(target_in, tf.int32),
    }


def stepwise_logits(
    model, source, target_in, use_cross_cache=False, max_length=None, growing=False
) -> tf.Tensor:
    """Logits `[batch, T, V]` of teacher forcing `target_in`, one cached decoder step at a time.

    The model's stepper steps on its `initial_cache` (one slot per position, `max_length` of
    them), or on its `growing_cache` if `growing`.
    """
    stepper = model.stepper()
    source = tf.constant(source, tf.int32)
    target_in = tf.constant(target_in, tf.int32)
    encoder_outputs, padding_mask = stepper.encode(source)
    if growing:
        cache = stepper.growing_cache(tf.shape(source)[0])
    else:
        cache = stepper.initial_cache(tf.shape(source)[0], max_length or target_in.shape[1])
    cross_cache = stepper.cross_attention_cache(encoder_outputs) if use_cross_cache else None
    steps = []
    for t in range(target_in.shape[1]):
        logits, cache = stepper.decode_step(
            target_in[:, t],
            encoder_outputs,
            padding_mask,
            cache,
            t,
            cross_attention_cache=cross_cache,
        )
        steps.append(logits)
    return tf.stack(steps, axis=1)


def saved_and_loaded(model, folder: Path):
    """`model` saved as `folder/model.keras` and loaded back (in this process)."""
    path = Path(folder) / "model.keras"
    model.save(path)
    return load_model(path)


class FakeStepModel:
    """A `StepModel` without a network: subclasses give each step's logits from a table.

    The encoder outputs are the source ids as floats (`[batch, length, 1]`), the cross-attention
    cache is twice them (so a decoder that forgets to pass it on is caught), and `steps` counts
    the decoder calls. It declares no capability: its cache is `initial_cache` alone. Subclasses
    define `step_logits`.

    Args:
        table: The logits table, any shape the subclass reads.
        head: A head or its name.
        max_sequence_length: The longest output the decoders may produce.
    """

    capabilities = StepCapabilities()

    def __init__(self, table, head, max_sequence_length: int):
        self.table = tf.constant(table, tf.float32)
        self.head = heads.get(head)
        self.max_sequence_length = max_sequence_length
        self.steps = 0

    def stepper(self, frozen_weights=False):
        del frozen_weights
        return self

    def encode(self, source_ids):
        source_ids = tf.convert_to_tensor(source_ids, tf.int32)
        return tf.cast(source_ids, tf.float32)[..., None], padding_mask(source_ids)

    def cross_attention_cache(self, encoder_outputs):
        return encoder_outputs * 2.0

    def step_weights(self):
        return None

    def initial_cache(self, batch_size, max_length):
        return tf.zeros([batch_size, max_length], tf.float32)

    def growing_cache(self, batch_size):
        raise undeclared(self, "grows_cache")

    def prefix_cache(self, entries, slots):
        raise undeclared(self, "caches_prefixes")

    def prefix_entries(self, own_position):
        raise undeclared(self, "caches_prefixes")

    def decode_step(
        self,
        token_ids,
        encoder_outputs,
        padding_mask,
        cache,
        index,
        cross_attention_cache,
        step_weights,
        rows_per_source,
    ):
        del padding_mask, step_weights
        assert rows_per_source == 1, "a stepper that does not share sources got shared ones"
        self.steps += 1
        return self.step_logits(token_ids, index, encoder_outputs, cross_attention_cache, cache)

    def step_logits(self, token_ids, index, encoder_outputs, cross_attention_cache, cache):
        """Logits `[batch, V]` of step `index` after `token_ids`, and the updated cache."""
        raise NotImplementedError


def sort_based_entmax_threshold(logits, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Sparsemax's or entmax-1.5's threshold by the sort-based algorithms, in float64.

    Peters et al. 2019, Alg. 2; -inf logits add 0 to the running sums and never enter the support.

    Returns:
        `(scaled, tau)`: the logits times α - 1, and τ `[..., 1]` on that scale.
    """
    scaled = (alpha - 1.0) * np.asarray(logits, np.float64)
    ordered = np.sort(scaled, axis=-1)[..., ::-1]
    ranks = np.arange(1, ordered.shape[-1] + 1)
    finite = np.where(np.isinf(ordered), 0.0, ordered)
    if alpha == 2.0:
        candidates = (np.cumsum(finite, -1) - 1.0) / ranks
    else:
        mean = np.cumsum(finite, -1) / ranks
        variance = np.cumsum(finite**2, -1) / ranks - mean**2
        candidates = mean - np.sqrt(np.maximum((1.0 - ranks * variance) / ranks, 0.0))
    support = (candidates <= ordered).sum(-1)[..., None]
    return scaled, np.take_along_axis(candidates, support - 1, -1)


def restricted(model, **capabilities) -> TransformerStepper:
    """`model`'s stepper declaring the given capabilities False, so decoders take their fallbacks.

    Args:
        model: A `Seq2SeqTransformer` (or `LatentExpertTransformer`).
        **capabilities: `StepCapabilities` fields to set (`grows_cache=False`: the fixed
            cache; `caches_prefixes=False`: exact search's pool of whole caches;
            `shares_sources=False`: sources repeated to every row).
    """
    stepper = model.stepper()
    declared = dataclasses.replace(stepper.capabilities, **capabilities)
    return type(stepper)(model, capabilities=declared)


class RowCounting(TransformerStepper):
    """A real model's stepper that records how many rows each of its (eager) steps decodes.

    Args:
        model: A `Seq2SeqTransformer`.
        **capabilities: `StepCapabilities` fields to set, as `restricted`.
    """

    def __init__(self, model, **capabilities):
        super().__init__(model, capabilities=dataclasses.replace(EVERY_CAPABILITY, **capabilities))
        self.rows = []

    def decode_step(self, token_ids, *args, **kwargs):
        self.rows.append(int(tf.size(token_ids)))
        return super().decode_step(token_ids, *args, **kwargs)


class CopyModel(FakeStepModel):
    """A fake model that copies its source, EOS included: position t's logits peak at source[t].

    It reads the source from the cross-attention cache, so the copy only works if the decoder
    passes the cache on to every step. `peak` is the copied token's logit (0: no preference).
    """

    def __init__(self, vocabulary_size, max_sequence_length, peak=10.0):
        super().__init__(tf.zeros([0]), heads.SoftmaxHead(), max_sequence_length)
        self.vocabulary_size = vocabulary_size
        self.peak = peak

    def encode(self, source_ids):
        return tf.one_hot(source_ids, self.vocabulary_size), tf.not_equal(source_ids, PAD_ID)

    def cross_attention_cache(self, encoder_outputs):
        return encoder_outputs

    def step_logits(self, token_ids, index, encoder_outputs, cross_attention_cache, cache):
        last = tf.shape(cross_attention_cache)[1] - 1
        return self.peak * cross_attention_cache[:, tf.minimum(index, last)], cache
