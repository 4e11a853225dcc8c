"""How often each expert of a hard mixture wins the E-step on held-out pairs.

Shen et al. (2019, Algorithm 1) train each sentence pair with the expert under which its
target is most likely. Counted on pairs the model never trained on, these wins say whether
every expert is in use: a collapsed mixture (§5.4, "Collapse to single expert") has one expert
winning nearly every pair.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfscones.data import translation_dataset

TOKENS_PER_BATCH = 4096


def expert_wins(model, tokenizer, sources: list[str], targets: list[str]) -> dict:
    """Each expert's share of the pairs it scores best (`LatentExpertTransformer.choose_experts`).

    Args:
        model: A `LatentExpertTransformer`.
        tokenizer: Its `tfscones.data.Tokenizer`.
        sources: Source sentences.
        targets: One target per source (a pair per reference of a multi-reference set).

    Returns:
        `shares` (one per expert, summing to 1), `pairs` (pairs counted) and `left_out` (pairs
        longer than the model's positions, which the E-step cannot score whole).

    Raises:
        ValueError: If sources and targets differ in number, or no pair fits the model.
    """
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
    batches = translation_dataset(
        tf.data.Dataset.from_tensor_slices((sources, targets)),
        tokenizer,
        tokens_per_batch=TOKENS_PER_BATCH,
        max_length=model.max_sequence_length - 1,
        max_length_ratio=None,
    )
    wins = np.zeros(model.num_experts, np.int64)
    for inputs, target_ids in batches:
        chosen = model.choose_experts(inputs, target_ids).numpy()
        wins += np.bincount(chosen, minlength=model.num_experts)
    counted = int(wins.sum())
    if not counted:
        raise ValueError("no pair fits the model's positions")
    return {
        "shares": [float(count) / counted for count in wins],
        "pairs": counted,
        "left_out": len(sources) - counted,
    }
