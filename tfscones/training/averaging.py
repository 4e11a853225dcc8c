"""Weight averaging: the mean of the last checkpoints, and the optimizer's moving average.

Two ways to evaluate and keep a smoother model than the last step's:

- `average_checkpoints(model, paths)` sets a model's weights to the element-wise mean of saved
  weight files, as fairseq's `scripts/average_checkpoints.py` and OpenNMT-tf's
  `average_checkpoints` do (the training program keeps the last `training.average_checkpoints`
  epoch checkpoints and evaluates their mean at the end of the run);
- `moving_average_weights(model)` swaps in the exponential moving average that a Keras optimizer
  built with `use_ema=True` keeps (`training.ema_momentum`), for the duration of a `with` block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import keras
import numpy as np


def average_weights(weight_sets: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
    """The element-wise mean of several lists of weights of the same model.

    Floating-point weights are averaged in float64 and cast back; other weights (integer
    counters) are taken from the last list.

    Args:
        weight_sets: One list of arrays per checkpoint, all of the same shapes.

    Returns:
        The averaged list.

    Raises:
        ValueError: If there is nothing to average or the lists do not match.
    """
    if not weight_sets:
        raise ValueError("average_weights needs at least one set of weights.")
    shapes = [[np.shape(w) for w in weights] for weights in weight_sets]
    if any(shape != shapes[0] for shape in shapes):
        raise ValueError("the checkpoints to average hold weights of different shapes.")
    averaged = []
    for values in zip(*weight_sets, strict=True):
        last = np.asarray(values[-1])
        if np.issubdtype(last.dtype, np.floating):
            mean = np.mean([np.asarray(v, dtype=np.float64) for v in values], axis=0)
            averaged.append(mean.astype(last.dtype))
        else:
            averaged.append(last)
    return averaged


def average_checkpoints(model: keras.Model, paths: Sequence[str | Path]) -> keras.Model:
    """Sets `model`'s weights to the mean of the weight files `paths` (`model.save_weights`).

    Args:
        model: A built model of the architecture the files were saved from.
        paths: `.weights.h5` files; optimizer state in them is ignored.

    Returns:
        The same model, holding the averaged weights.

    Raises:
        ValueError: If `paths` is empty.
        FileNotFoundError: If a file does not exist.
    """
    if not paths:
        raise ValueError("average_checkpoints needs at least one checkpoint.")
    weight_sets = []
    for path in paths:
        if not Path(path).is_file():
            raise FileNotFoundError(f"checkpoint {path} does not exist.")
        model.load_weights(path, skip_mismatch=False)
        weight_sets.append(model.get_weights())
    model.set_weights(average_weights(weight_sets))
    return model


@contextlib.contextmanager
def moving_average_weights(model: keras.Model) -> Iterator[bool]:
    """Within the block, the model holds its optimizer's moving average of its weights.

    Outside the block the training weights are back, unchanged. A model whose optimizer keeps
    no moving average (no `use_ema`, or not built yet) is left as it is.

    Args:
        model: A compiled model.

    Yields:
        Whether the moving average was swapped in.
    """
    optimizer = getattr(model, "optimizer", None)
    averages = getattr(optimizer, "_model_variables_moving_average", None)
    if not (optimizer is not None and optimizer.use_ema and averages):
        yield False
        return
    variables = model.trainable_variables
    training_values = [variable.numpy() for variable in variables]
    for variable, average in zip(variables, averages, strict=True):
        variable.assign(average)
    try:
        yield True
    finally:
        for variable, value in zip(variables, training_values, strict=True):
            variable.assign(value)
