"""Keras callbacks for translation training: dev BLEU with best-model keeping, a time budget."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path

import keras

from tfscones import metrics
from tfscones.data.tokenizer import Tokenizer
from tfscones.decoding import translate

logger = logging.getLogger(__name__)


class BleuEvaluation(keras.callbacks.Callback):
    """Translates a dev set greedily after every epoch, logs BLEU, and keeps the best model.

    The score is added to the epoch's logs as `val_bleu` (so `TensorBoard`, `CSVLogger` and
    `History` record it); when it improves, the model is saved to `best_model_path`.

    Args:
        sources: Source sentences of the dev set.
        references: Their reference translations, one stream (or several, aligned).
        tokenizer: The model's tokenizer.
        best_model_path: Where the best model is saved (`.keras`); None saves nothing.
        batch_size: Sentences translated together.
    """

    def __init__(
        self,
        sources: Sequence[str],
        references: Sequence[str] | Sequence[Sequence[str]],
        tokenizer: Tokenizer,
        best_model_path: str | Path | None = None,
        batch_size: int = 64,
    ):
        super().__init__()
        self.sources = list(sources)
        self.references = references
        self.tokenizer = tokenizer
        self.best_model_path = None if best_model_path is None else Path(best_model_path)
        self.batch_size = batch_size
        self.best_bleu = -math.inf

    def on_epoch_end(self, epoch, logs=None):
        hypotheses = translate(self.model, self.tokenizer, self.sources, self.batch_size)
        bleu = metrics.corpus_bleu(hypotheses, self.references).score
        if logs is not None:
            logs["val_bleu"] = bleu
        improved = bleu > self.best_bleu
        logger.info("epoch %d: dev BLEU %.2f%s", epoch + 1, bleu, " (best)" if improved else "")
        if improved:
            self.best_bleu = bleu
            if self.best_model_path is not None:
                self.model.save(self.best_model_path)


class TimeLimit(keras.callbacks.Callback):
    """Stops training once a wall-clock budget is spent (checked after every batch).

    Args:
        max_minutes: The budget; None or a non-positive value means no limit.
    """

    def __init__(self, max_minutes: float | None):
        super().__init__()
        self.max_minutes = max_minutes
        self.started = None

    def on_train_begin(self, logs=None):
        self.started = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        if self.max_minutes and time.monotonic() - self.started > 60.0 * self.max_minutes:
            self.model.stop_training = True
