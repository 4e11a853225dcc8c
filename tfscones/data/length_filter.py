"""Length-based filtering of tokenised sentence pairs (the SCONES paper's length heuristics).

Lengths count SentencePiece pieces of each sentence, not the EOS/BOS that the training pipeline
adds afterwards.
"""

import tensorflow as tf

from tfscones.ranges import Range

RATIO = Range(1)
"""`max_length_ratio`: the longer side's length over the shorter's, at least 1."""


def _check_limits(min_length: int, max_length: int, max_length_ratio: float | None) -> None:
    """Validates length-filter settings.

    Args:
        min_length: Fewest pieces a side may have; at least 1, so empty sentences go.
        max_length: Most pieces a side may have.
        max_length_ratio: Largest allowed ratio of the longer side's length to the shorter's,
            at least 1; None disables the ratio filter.

    Raises:
        ValueError: If the settings are inconsistent.
    """
    if not 1 <= min_length <= max_length:
        raise ValueError(
            f"Need 1 <= min_length <= max_length, got min_length={min_length}, "
            f"max_length={max_length}"
        )
    if max_length_ratio is not None:
        RATIO.check("max_length_ratio", max_length_ratio, hint="None disables the filter.")


def keep_by_length(
    source_ids: tf.Tensor,
    target_ids: tf.Tensor,
    *,
    min_length: int = 1,
    max_length: int = 128,
    max_length_ratio: float | None = 3.0,
) -> tf.Tensor:
    """Says whether a tokenised pair passes the length filters.

    Args:
        source_ids: 1-D source piece ids.
        target_ids: 1-D target piece ids.
        min_length: Fewest pieces a side may have.
        max_length: Most pieces a side may have.
        max_length_ratio: Largest allowed `max(len) / min(len)` of the two sides; None for no
            limit.

    Returns:
        A scalar bool tensor, True to keep the pair.

    Raises:
        ValueError: If the settings are inconsistent.
    """
    _check_limits(min_length, max_length, max_length_ratio)
    lengths = tf.stack([tf.size(source_ids), tf.size(target_ids)])
    keep = tf.reduce_all((lengths >= min_length) & (lengths <= max_length))
    if max_length_ratio is None:
        return keep
    lengths = tf.cast(lengths, tf.float32)
    return keep & (tf.reduce_max(lengths) <= max_length_ratio * tf.reduce_min(lengths))


def filter_by_length(
    dataset: tf.data.Dataset,
    *,
    min_length: int = 1,
    max_length: int = 128,
    max_length_ratio: float | None = 3.0,
) -> tf.data.Dataset:
    """Drops the pairs of a dataset of `(source_ids, target_ids)` that fail `keep_by_length`.

    Args:
        dataset: Elements `(source_ids, target_ids)`, 1-D integer tensors of pieces.
        min_length: Fewest pieces a side may have.
        max_length: Most pieces a side may have.
        max_length_ratio: Largest allowed ratio of the two sides' lengths; None for no limit.

    Returns:
        The filtered dataset.

    Raises:
        ValueError: If the settings are inconsistent.
    """
    _check_limits(min_length, max_length, max_length_ratio)
    return dataset.filter(
        lambda source_ids, target_ids: keep_by_length(
            source_ids,
            target_ids,
            min_length=min_length,
            max_length=max_length,
            max_length_ratio=max_length_ratio,
        )
    )
