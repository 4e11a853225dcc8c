"""Hard mixture of experts: one multinomial latent variable for diverse translation.

Shen et al. (2019), "Mixture Models for Diverse Machine Translation: Tricks of the Trade", model
p(y|x) = Σ_z p(z|x) p(y|z, x) with a latent z ∈ {1, ..., K} (§3, eq. 1). Their Hard-MoE (§3.1)
makes two simplifications: the prior p(z|x) = 1/K is uniform, and each translation is explained
by one expert, so the loss is min_z -log p(y|z, x) (eq. 3), trained by hard-EM (Algorithm 1):

1. E-step: with dropout off and no gradients, compute -log p(y|z, x) for every z, and take
   z* = argmin_z for every sentence pair;
2. M-step: with dropout on, one forward-backward pass on (x, z*, y) only.

The experts share every parameter except one embedding each, which replaces the decoder's
start-of-sentence token (§3.2 and its footnote 2): expert z's target starts with its own
embedding instead of BOS's. At test time each expert decodes greedily, all K in parallel (§3.2,
last paragraph).

`LatentExpertTransformer` is a `Seq2SeqTransformer` with those K embeddings and the hard-EM
`train_step`. Decoding every expert is decoding's business: `tfscones.decoding.experts` wraps the
model for the unchanged decoders (`ParallelExperts(model)`: each source tiled K times, row
`b * K + k` decoded by expert k), and its `decode_experts` runs any `Search` that way and returns
the K experts' hypotheses of every sentence.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from tfscones.data.preprocessing import padding_mask
from tfscones.data.vocab_ids import BOS_ID, PAD_ID
from tfscones.models.seq2seq_transformer import Seq2SeqTransformer
from tfscones.models.stepping.transformer import ExpertTransformerStepper


@keras.saving.register_keras_serializable(package="tfscones")
class ExpertShare(keras.metrics.Metric):
    """How often each expert wins the E-step: one log entry per expert, plus their perplexity.

    `result()` is a dict `{"expert_0_share": ..., ..., "expert_perplexity": ...}`; Keras merges it
    into the logs of `fit` and `evaluate`. The shares are the fractions of sentence pairs (since
    the metric's last reset, the start of the epoch in `fit`) whose best expert was k. Their
    perplexity exp(-Σ_k s_k log s_k) is K when every expert wins equally often and 1 when one
    expert wins every pair: the collapse of §5.4 of Shen et al. 2019 (Table 2, "Collapse to
    single expert") shows as perplexity near 1.

    Args:
        num_experts: K, the number of experts.
        **kwargs: `keras.metrics.Metric` arguments (`name`, `dtype`).
    """

    def __init__(self, num_experts: int, **kwargs):
        kwargs.setdefault("name", "expert_share")
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.num_experts = int(num_experts)
        self.wins = self.add_variable(
            shape=(self.num_experts,), initializer="zeros", dtype="float32", name="wins"
        )

    def update_state(self, experts, sample_weight=None):
        """Counts the winning expert of every sentence pair.

        Args:
            experts: int `[batch]`, each pair's chosen expert.
            sample_weight: Unused; each pair counts once.
        """
        del sample_weight
        one_hot = ops.one_hot(ops.reshape(experts, [-1]), self.num_experts, dtype="float32")
        self.wins.assign_add(ops.sum(one_hot, axis=0))

    def result(self):
        wins = ops.convert_to_tensor(self.wins)
        shares = wins / ops.maximum(ops.sum(wins), 1.0)
        entropy = -ops.sum(ops.where(shares > 0, shares * ops.log(shares), 0.0))
        results = {f"expert_{k}_share": shares[k] for k in range(self.num_experts)}
        results["expert_perplexity"] = ops.exp(entropy)
        return results

    def get_config(self):
        return {**super().get_config(), "num_experts": self.num_experts}


class _TargetEmbeddingWithExperts:
    """Target embedding lookup in which ids `V + z` (V the vocabulary size) are expert z.

    As in fairseq's `translation_moe`, which adds K `<expert_k>` tokens to the target dictionary,
    an expert is a decoder input id; here the K ids lie past the vocabulary, so they have no
    output logit (no head ever predicts an expert).
    """

    def __init__(self, tokens, experts, vocabulary_size: int, num_experts: int):
        self.tokens = tokens
        self.experts = experts
        self.vocabulary_size = vocabulary_size
        self.num_experts = num_experts

    @property
    def compute_dtype(self) -> str:
        return self.tokens.compute_dtype

    def __call__(self, token_ids):
        token_ids = ops.convert_to_tensor(token_ids, "int32")
        is_expert = ops.greater_equal(token_ids, self.vocabulary_size)
        token_vectors = self.tokens(ops.where(is_expert, 0, token_ids))
        expert_ids = ops.clip(token_ids - self.vocabulary_size, 0, self.num_experts - 1)
        expert_vectors = self.experts(expert_ids)
        return ops.where(is_expert[..., None], expert_vectors, token_vectors)


@keras.saving.register_keras_serializable(package="tfscones")
class LatentExpertTransformer(Seq2SeqTransformer):
    """A `Seq2SeqTransformer` with K latent experts trained by hard-EM (Shen et al. 2019, §3.1).

    Expert z is a learned embedding (`hidden_dim` values, initialised like a token embedding)
    that takes the place of the start token at target position 0: the decoder's input there is
    sqrt(hidden_dim) times expert z's embedding plus position 0's sinusoid, as for any token.
    Everything else is shared (§3.2), so the model has `K * hidden_dim` parameters more than a
    `Seq2SeqTransformer`. The prior is uniform, p(z|x) = 1/K.

    Experts are addressed in three equivalent ways: the `expert` input of `call` (int32
    `[batch]`), the decoder input id `expert_token_id(z)` = `vocabulary_size + z` at position 0
    (what `decode_step` takes), and BOS at position 0, which stands for expert 0. So a
    `LatentExpertTransformer` is a drop-in `Seq2SeqTransformer` whose plain decoding (BOS first)
    is expert 0's, and `tfscones.decoding.ParallelExperts(model)` decodes every expert at once.

    Training (`fit`) follows Algorithm 1: `train_step` chooses each pair's expert with
    `choose_experts` (dropout off, no gradient: the E-step), then runs Keras's own training step
    on the chosen experts only (dropout on: the M-step), so the compiled loss, metrics, optimizer,
    loss scaling and distribution strategy all work as for the base model. `test_step` uses the
    same choice, so the validation loss is the hard-EM loss min_z -log p(y|z, x) (eq. 3, up to
    the constant log K). Both log `ExpertShare`: `expert_k_share` per expert and
    `expert_perplexity`.

    Args:
        vocabulary_size: Size of the (joint) vocabulary.
        num_encoder_layers: Number of `TransformerEncoder` layers.
        num_decoder_layers: Number of `TransformerDecoder` layers.
        hidden_dim: Size of embeddings and hidden states.
        num_heads: Number of attention heads; must divide `hidden_dim`.
        intermediate_dim: Size of the MLP's hidden layer.
        num_experts: K ≥ 1, the number of values of the latent variable (the paper's default
            is 10; K = 1 is a plain model with a learned start embedding).
        expert_choice_dropout: Whether the E-step runs with dropout on. Off by default, as
            Algorithm 1 prescribes: §5.4 and Appendix B of Shen et al. 2019 show that dropout noise
            during the choice makes it random and the model ends up ignoring the latent
            variable. On only to reproduce that ablation.
        **kwargs: The other arguments of `Seq2SeqTransformer` (`dropout`, `head`,
            `max_sequence_length`, `tie_embeddings`, ...) and of `keras.Model`.

    Example:
    >>> model = LatentExpertTransformer.from_preset(
    ...     "tiny", vocabulary_size=100, num_experts=3, head="sigmoid")
    >>> model.compile(optimizer="adam", loss=model.head.loss())
    >>> source = tf.constant([[5, 6, 1, 0]])
    >>> logits = model({"source_ids": source, "target_in_ids": tf.constant([[3, 7, 8]]),
    ...                 "expert": tf.constant([2])})
    >>> from tfscones.decoding import OutputLimits, decode_experts
    >>> limits = OutputLimits(max_length=4)
    >>> decode_experts(model, source, limits=limits).ids.shape  # one greedy output per expert
    TensorShape([1, 3, 4])
    """

    def __init__(
        self,
        vocabulary_size: int,
        num_encoder_layers: int,
        num_decoder_layers: int,
        hidden_dim: int,
        num_heads: int,
        intermediate_dim: int,
        num_experts: int = 1,
        expert_choice_dropout: bool = False,
        **kwargs,
    ):
        super().__init__(
            vocabulary_size=vocabulary_size,
            num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers,
            hidden_dim=hidden_dim,
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            **kwargs,
        )
        if int(num_experts) != num_experts or num_experts < 1:
            raise ValueError(f"num_experts must be a positive integer (got {num_experts!r}).")
        self.num_experts = int(num_experts)
        self.expert_choice_dropout = bool(expert_choice_dropout)
        self.expert_embedding = keras.layers.Embedding(
            self.num_experts,
            self.hidden_dim,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=self.hidden_dim**-0.5),
            dtype=self.dtype_policy,
            name="expert_embedding",
        )
        self.expert_embedding.build((None,))
        self.expert_share = ExpertShare(self.num_experts)

    @property
    def target_token_embedding(self) -> _TargetEmbeddingWithExperts:
        """The target embedding, with the experts' embeddings at ids `vocabulary_size + z`."""
        return _TargetEmbeddingWithExperts(
            super().target_token_embedding,
            self.expert_embedding,
            self.vocabulary_size,
            self.num_experts,
        )

    def expert_token_id(self, experts):
        """The decoder input id of expert z at position 0: `vocabulary_size + z`.

        Args:
            experts: int expert indices in `[0, num_experts)`, any shape.

        Returns:
            int32 ids of the same shape.
        """
        return ops.convert_to_tensor(experts, "int32") + self.vocabulary_size

    def _start_with_experts(self, target_ids, experts=None):
        """Replaces position 0 by `experts` (int `[batch]`), or BOS there by expert 0."""
        target_ids = ops.convert_to_tensor(target_ids, "int32")
        first = target_ids[:, :1]
        if experts is None:
            first = ops.where(ops.equal(first, BOS_ID), self.vocabulary_size, first)
        else:
            first = ops.reshape(self.expert_token_id(experts), [-1, 1])
        return ops.concatenate([first, target_ids[:, 1:]], axis=1)

    def call(self, inputs, training=None):
        """Teacher-forced logits of every target position, each sentence with one expert.

        Args:
            inputs: dict with int `source_ids` `[batch, source_length]` and `target_in_ids`
                `[batch, target_length]` (BOS first), both padded with 0, and optionally int
                `expert` `[batch]`, each sentence's expert in `[0, num_experts)`, which replaces
                its token at position 0. Without `expert`, BOS at position 0 is expert 0 and an
                id `expert_token_id(z)` there is expert z.
            training: Whether dropout is active.

        Returns:
            float32 logits `[batch, target_length, vocabulary_size]`.
        """
        encoder_outputs, source_padding_mask = self.encode(inputs["source_ids"], training=training)
        target_ids = self._start_with_experts(inputs["target_in_ids"], inputs.get("expert"))
        return self.decode(target_ids, encoder_outputs, source_padding_mask, training)

    def stepper(self, frozen_weights: bool = False) -> ExpertTransformerStepper:
        """The model's `StepModel`, which starts from expert 0 where a decoder feeds BOS.

        `tfscones.decoding.ParallelExperts` decodes each row with its own expert instead.

        Args:
            frozen_weights: As `Seq2SeqTransformer.stepper`.
        """
        return ExpertTransformerStepper(self, frozen_weights=frozen_weights)

    def _expert_loss_object(self) -> keras.losses.Loss:
        """The compiled loss if it is a `keras.losses.Loss`, else the head's default loss."""
        if isinstance(self.loss, keras.losses.Loss):
            return self.loss
        return self.head.loss()

    def expert_losses(self, inputs, targets, training: bool = False) -> tf.Tensor:
        """The E-step's -log p(y|z, x) of every sentence pair and expert (Algorithm 1).

        The encoder runs once; the decoder runs once on the batch tiled K times (row `b * K + k`
        is pair b with expert k). A pair's loss under expert z is the sum over its non-pad
        target tokens of the per-token loss of the compiled loss object (its `call`, before any
        reduction), so the E-step minimises what the M-step trains: label smoothing, SCONES's
        α, entmax's α included. Without a compiled `keras.losses.Loss` (an uncompiled model, or
        a loss given by name), it is `model.head.loss()`'s. Losses are float32 whatever the
        dtype policy, and carry no gradient.

        Args:
            inputs: dict with `source_ids` and `target_in_ids`, as for `call` (any `expert`
                entry is ignored).
            targets: int `[batch, target_length]`, the gold next tokens, padded with 0.
            training: Whether dropout is active (the E-step of Algorithm 1 has it off).

        Returns:
            float32 `[batch, num_experts]`.
        """
        k = self.num_experts
        encoder_outputs, source_padding_mask = self.encode(inputs["source_ids"], training=training)
        target_in_ids = ops.convert_to_tensor(inputs["target_in_ids"], "int32")
        batch_size = ops.shape(target_in_ids)[0]
        experts = ops.tile(ops.arange(k, dtype="int32"), [batch_size])

        def tile(tensor):
            return tf.repeat(tensor, k, axis=0)

        logits = self.decode(
            self._start_with_experts(tile(target_in_ids), experts),
            tile(encoder_outputs),
            tile(source_padding_mask),
            training=training,
        )
        loss = self._expert_loss_object()
        targets = tile(ops.convert_to_tensor(targets))
        token_losses = ops.cast(loss.call(targets, logits), "float32")
        pad_id = getattr(loss, "pad_id", PAD_ID)
        if pad_id is not None:
            token_losses = ops.where(padding_mask(targets, pad_id), token_losses, 0.0)
        sequence_losses = ops.sum(token_losses, axis=-1)
        return tf.stop_gradient(ops.reshape(sequence_losses, [batch_size, k]))

    def choose_experts(self, inputs, targets, training: bool = False) -> tf.Tensor:
        """The E-step: each pair's best expert, argmin_z -log p(y|z, x) (Algorithm 1).

        Args:
            inputs: dict with `source_ids` and `target_in_ids`, as for `call`.
            targets: int `[batch, target_length]`, the gold next tokens, padded with 0.
            training: Whether dropout is active; `train_step` passes `expert_choice_dropout`.

        Returns:
            int32 `[batch]`, ties going to the lower index.
        """
        if self.num_experts == 1:
            batch_size = ops.shape(inputs["target_in_ids"])[0]
            return ops.zeros([batch_size], "int32")
        losses = self.expert_losses(inputs, targets, training=training)
        return ops.cast(ops.argmin(losses, axis=1), "int32")

    def _with_chosen_experts(self, data, training: bool):
        """The E-step on a Keras batch; returns the batch with `expert` added to its inputs."""
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        if y is None:
            raise ValueError(
                "hard-EM training needs targets: fit and evaluate take (inputs, target_out_ids)."
            )
        experts = self.choose_experts(x, y, training=training)
        self.expert_share.update_state(experts)
        return {**x, "expert": experts}, y, sample_weight

    def train_step(self, data):
        """One hard-EM step (Algorithm 1): the E-step, then Keras's step on the chosen experts.

        The E-step (`choose_experts`) runs outside Keras's gradient tape, with dropout off unless
        `expert_choice_dropout`; the M-step is `Seq2SeqTransformer.train_step` on the inputs
        plus `expert`, so only the chosen expert of each pair gets gradient, through the compiled
        loss, with the optimizer, loss scaling and strategy Keras would use. Under a
        `tf.distribute` strategy each replica chooses for its own examples.
        """
        return super().train_step(self._with_chosen_experts(data, self.expert_choice_dropout))

    def test_step(self, data):
        """Keras's evaluation step with each pair's best expert: the hard-EM loss (eq. 3)."""
        return super().test_step(self._with_chosen_experts(data, training=False))

    def get_config(self):
        config = super().get_config()
        config.update(
            num_experts=self.num_experts,
            expert_choice_dropout=self.expert_choice_dropout,
        )
        return config


__all__ = ["ExpertShare", "LatentExpertTransformer"]
