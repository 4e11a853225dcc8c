"""Keras callbacks for translation training: step backups, dev BLEU, a time budget."""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path

import keras

from tfscones import metrics
from tfscones.data.tokenizer import Tokenizer
from tfscones.decoding import translate

logger = logging.getLogger(__name__)


class StepBackup(keras.callbacks.Callback):
    """Backs up weights and optimizer state every few steps, so a killed run resumes exactly.

    Keras's `BackupAndRestore` restores the epoch but not the step within it: a run killed in
    the middle of an epoch replays that whole epoch on top of the restored optimizer state, so it
    ends with more optimizer steps than asked for. Here the optimizer's step counter is the
    state: `restore` loads the latest backup and returns the steps already taken, and the caller
    trains the remainder (`training.train` finishes the interrupted epoch, then the rest).

    Each backup is written to a temporary file and renamed over the previous one, so a kill while
    writing leaves the previous backup intact.

    Args:
        directory: Folder of the backup (`latest.weights.h5`).
        every_steps: Steps between backups; a backup is also taken at every epoch's end.
            Put this callback after those that act at an epoch's end (evaluation, logs), so
            that a backup of a finished epoch means its end-of-epoch work is done.
    """

    def __init__(self, directory: str | Path, every_steps: int):
        super().__init__()
        if every_steps < 1:
            raise ValueError(f"every_steps must be >= 1 (got {every_steps}).")
        self.directory = Path(directory)
        self.every_steps = every_steps
        self.path = self.directory / "latest.weights.h5"

    def restore(self, model: keras.Model) -> int:
        """Loads the latest backup into a built and compiled model.

        Args:
            model: The model; its optimizer is built here if it is not yet.

        Returns:
            The optimizer steps already taken (0 when there is no backup).
        """
        if not self.path.exists():
            return 0
        if not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        model.load_weights(self.path)
        steps = int(model.optimizer.iterations.numpy())
        logger.info("resumed from %s at step %d", self.path, steps)
        return steps

    def on_train_batch_end(self, batch, logs=None):
        last_of_epoch = batch + 1 == self.params.get("steps")
        if (
            not last_of_epoch
            and int(self.model.optimizer.iterations.numpy()) % self.every_steps == 0
        ):
            self._save()

    def on_epoch_end(self, epoch, logs=None):
        self._save()

    def _save(self):
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name("saving.weights.h5")
        self.model.save_weights(temporary)
        os.replace(temporary, self.path)


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
        best_bleu: The best score so far (a resumed run passes its earlier best).
    """

    def __init__(
        self,
        sources: Sequence[str],
        references: Sequence[str] | Sequence[Sequence[str]],
        tokenizer: Tokenizer,
        best_model_path: str | Path | None = None,
        batch_size: int = 64,
        best_bleu: float = -math.inf,
    ):
        super().__init__()
        self.sources = list(sources)
        self.references = references
        self.tokenizer = tokenizer
        self.best_model_path = None if best_model_path is None else Path(best_model_path)
        self.batch_size = batch_size
        self.best_bleu = best_bleu

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

    The clock starts at the first `fit` the callback is given to and runs across later ones.

    Args:
        max_minutes: The budget; None or a non-positive value means no limit.
    """

    def __init__(self, max_minutes: float | None):
        super().__init__()
        self.max_minutes = max_minutes
        self.started = None

    def on_train_begin(self, logs=None):
        if self.started is None:
            self.started = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        if self.max_minutes and time.monotonic() - self.started > 60.0 * self.max_minutes:
            self.model.stop_training = True
