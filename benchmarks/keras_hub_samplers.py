"""keras-hub's `GreedySampler` and `BeamSampler` driving a `Seq2SeqTransformer`, for comparison.

keras-hub's samplers decode a prompt with a `next(prompt, cache, index)` callback. Here the
prompt is BOS followed by padding, the callback runs the stepper's `decode_step` on the token at
`index - 1`, and only the self-attention cache travels in the sampler's cache (which
`BeamSampler` reorders every step), exactly as in our beam search; the encoder outputs and the
cross-attention cache are computed once and tiled per beam, also as ours. `BeamSampler` scores
with log-softmax, so compare it on a softmax-head model.
"""

from __future__ import annotations

from typing import Any

import keras_hub
import tensorflow as tf

from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID


def keras_hub_decode(model: Any, source_ids: tf.Tensor, width: int, beam_size: int) -> tf.Tensor:
    """Decodes a batch with keras-hub's sampler (greedy for a beam of one).

    Args:
        model: A `Seq2SeqTransformer`.
        source_ids: int32 `[batch, source_length]`, each row ending with EOS, padded with 0.
        width: Output tokens after BOS (the prompt is `width + 1` long).
        beam_size: 1 for `GreedySampler`, more for `BeamSampler(num_beams=beam_size)`.

    Returns:
        int32 `[batch, width + 1]`: BOS, then the output tokens (stopping positions filled as
        keras-hub leaves them).
    """
    stepper = model.stepper()
    batch_size = tf.shape(source_ids)[0]
    encoder_outputs, padding_mask = stepper.encode(source_ids)
    cross_cache = stepper.cross_attention_cache(encoder_outputs)
    tiled = [tf.repeat(t, beam_size, axis=0) for t in (encoder_outputs, padding_mask, cross_cache)]

    def next_logits(prompt, cache, index):
        token = tf.gather(prompt, index - 1, axis=1)
        logits, cache = stepper.decode_step(
            token, tiled[0], tiled[1], cache, index - 1, cross_attention_cache=tiled[2]
        )
        return logits, None, cache

    prompt = tf.concat(
        [tf.fill([batch_size, 1], BOS_ID), tf.fill([batch_size, width], PAD_ID)], axis=1
    )
    mask = tf.concat(
        [tf.ones([batch_size, 1], tf.bool), tf.zeros([batch_size, width], tf.bool)], axis=1
    )
    if beam_size == 1:
        sampler = keras_hub.samplers.GreedySampler()
    else:
        sampler = keras_hub.samplers.BeamSampler(num_beams=beam_size)
    return sampler(
        next_logits,
        prompt,
        cache=stepper.initial_cache(batch_size, width + 1),
        index=1,
        mask=mask,
        stop_token_ids=[EOS_ID],
    )
