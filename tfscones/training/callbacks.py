"""Keras callbacks for translation training.

Step backups, the dev score (BLEU, or a task's own), epoch checkpoints kept for averaging, a
step and time budget that drives the learning-rate schedule, and a progress line.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import keras
import numpy as np

from tfscones.data.tokenizer import Tokenizer
from tfscones.decoding import translate
from tfscones.decoding.translate import cut_sources
from tfscones.evaluation.selection import METRICS, SelectionMetric
from tfscones.ranges import AT_LEAST_ONE
from tfscones.training.averaging import moving_average_weights
from tfscones.written_aside import check_space, write_text_aside, written_aside

logger = logging.getLogger(__name__)


def random_states(model: keras.Model) -> list[keras.Variable]:
    """The states of the model's random generators (its dropout layers'), in a fixed order.

    Each `keras.random.SeedGenerator` keeps a counter that every call advances; `save_weights`
    leaves the counters out, so a model restored from saved weights alone draws its first
    dropout masks again.
    """
    return [variable for variable in model.variables if variable.name == "seed_generator_state"]


class StepBackup(keras.callbacks.Callback):
    """Backs up weights and optimizer state every few steps, so a killed run resumes exactly.

    Keras's `BackupAndRestore` restores the epoch but not the step within it: a run killed in
    the middle of an epoch replays that whole epoch on top of the restored optimizer state, so it
    ends with more optimizer steps than asked for. Here the optimizer's step counter is the
    state: `restore` loads the latest backup and returns the steps already taken, and the caller
    trains the remainder (`training.train` finishes the interrupted epoch, then the rest).

    A backup is the weights file of its step (`step-N.weights.h5`) and `latest.json`, which names
    it: the weights are written first, then `latest.json` is written aside and renamed over the
    previous one (the moment the new backup replaces the old), then the older weights are
    removed, so a crash or a full disk at any moment leaves one whole backup. A disk without room
    for a backup stops training before it is written (`DiskFull`), and a damaged backup is
    named (`BackupError`) rather than loaded. The states of the model's random generators
    (`random_states`: which dropout masks come next), which `save_weights` leaves out, and state
    that lives outside the model (the time a budgeted run has spent), from `companions`: objects
    with `backup_state() -> dict` and `restore_state(dict)`, are saved beside the weights in
    `latest.json` at the same moments. A backup within an epoch keeps the training metrics'
    running totals too, and the resumed fit adds them to its first step's, so the interrupted
    epoch's logged loss and metrics are those of all its steps, not only of the steps after the
    resume. That holds for metrics whose state is running sums, as the loss tracker's and every
    `TokenMean`'s are (totals and counts); in one process it gives the uninterrupted run's
    figures bit for bit (the sums are added in the same order: floating-point addition
    commutes), across devices up to rounding. The sums are added after the first step rather
    than restored before it because a model without a distribution strategy creates its
    compiled metrics' variables in that step.

    Args:
        directory: Folder of the backup (`latest.weights.h5`, `latest.json`).
        every_steps: Steps between backups; a backup is also taken at every epoch's end.
            Put this callback after those that act at an epoch's end (evaluation, logs), so
            that a backup of a finished epoch means its end-of-epoch work is done.
        companions: Objects whose state is backed up and restored with the weights.
    """

    def __init__(self, directory: str | Path, every_steps: int, companions: Sequence = ()):
        super().__init__()
        self.directory = Path(directory)
        self.every_steps = AT_LEAST_ONE.check("every_steps", every_steps)
        self.companions = list(companions)
        self.state_path = self.directory / "latest.json"
        self.interrupted_epoch_sums = None

    def restore(self, model: keras.Model) -> int:
        """Loads the latest backup into a built and compiled model.

        Args:
            model: The model; its optimizer is built here if it is not yet.

        Returns:
            The optimizer steps already taken (0 when there is no backup).

        Raises:
            BackupError: If a file of the backup is damaged, naming it and what is wrong.
        """
        states = read_backup_state(self.directory)
        weights = self.directory / states.get("weights", LEGACY_WEIGHTS)
        if not weights.exists():
            if "weights" in states:
                raise damaged_backup(self.state_path, f"names {weights.name}, which is missing")
            return 0
        with model.distribute_strategy.scope():  # the optimizer's slots mirror the weights
            if not model.optimizer.built:
                model.optimizer.build(model.trainable_variables)
            try:
                model.load_weights(weights)
            except (OSError, ValueError, KeyError) as error:
                raise damaged_backup(weights, "cannot be loaded into this model", error) from None
        try:
            self._restore_states(model, states)
        except (KeyError, TypeError, ValueError) as error:
            raise damaged_backup(self.state_path, "does not fit this model", error) from None
        steps = int(model.optimizer.iterations.numpy())
        logger.info("resumed from %s at step %d", weights, steps)
        return steps

    def _restore_states(self, model: keras.Model, states: dict) -> None:
        """The companions', random generators' and metric sums' states of a backup."""
        for companion, state in zip(self.companions, states.get("companions", []), strict=False):
            companion.restore_state(state)
        if "random" in states:  # older backups kept none: their dropout masks restart
            for variable, value in zip(random_states(model), states["random"], strict=True):
                variable.assign(value)
        self.interrupted_epoch_sums = states.get("metrics")

    def on_train_batch_end(self, batch, logs=None):
        if self.interrupted_epoch_sums is not None:
            variables = self.model.metrics_variables
            for variable, value in zip(variables, self.interrupted_epoch_sums, strict=True):
                variable.assign_add(value)
            self.interrupted_epoch_sums = None
        last_of_epoch = batch + 1 == self.params.get("steps")
        if (
            not last_of_epoch
            and int(self.model.optimizer.iterations.numpy()) % self.every_steps == 0
        ):
            self._save(within_epoch=True)

    def on_epoch_end(self, epoch, logs=None):
        self._save()

    def _save(self, within_epoch: bool = False):
        step = int(self.model.optimizer.iterations.numpy())
        self.directory.mkdir(parents=True, exist_ok=True)
        weights = self.directory / f"step-{step}.weights.h5"
        check_space(self.directory, self._size(), f"the backup of step {step:,}")
        with written_aside(weights) as partial:
            self.model.save_weights(partial)
        states = {
            "step": step,
            "weights": weights.name,
            "companions": [companion.backup_state() for companion in self.companions],
            "random": [variable.numpy().tolist() for variable in random_states(self.model)],
        }
        if within_epoch:
            states["metrics"] = [v.numpy().tolist() for v in self.model.metrics_variables]
        write_text_aside(self.state_path, json.dumps(states))
        for stale in self.directory.glob("*.weights.h5"):
            if stale != weights:
                stale.unlink()

    def _size(self) -> int:
        """Bytes a backup will take: the largest weights file there, or the variables and more."""
        previous = [path.stat().st_size for path in self.directory.glob("*.weights.h5")]
        if previous:
            return max(previous)
        variables = [*self.model.variables, *self.model.optimizer.variables]
        size = sum(math.prod(v.shape) * np.dtype(v.dtype).itemsize for v in variables)
        return int(1.1 * size) + 2**20


LEGACY_WEIGHTS = "latest.weights.h5"
"""The weights file of backups written before `latest.json` named its own."""


class BackupError(ValueError):
    """A step backup is damaged: the message names the file and what is wrong with it."""


def read_backup_state(directory: str | Path) -> dict:
    """The `latest.json` of a `StepBackup` in `directory` ({} when there is none).

    Raises:
        BackupError: If it is not a JSON object with a whole-number `step`, naming the file.
    """
    state_path = Path(directory) / "latest.json"
    if not state_path.exists():
        return {}
    try:
        states = json.loads(state_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise damaged_backup(state_path, "is not JSON", error) from None
    if isinstance(states, list):  # the companions' states alone, before the step was kept
        return {"companions": states}
    if not isinstance(states, dict) or not isinstance(states.get("step", 0), int):
        raise damaged_backup(state_path, f"is not a backup's state (it holds {str(states):.60})")
    return states


def damaged_backup(path: Path, problem: str, error: Exception | None = None) -> BackupError:
    """The error for a damaged backup file: what is wrong, and how to go on without it."""
    reason = f" ({_reason(error)})" if error is not None else ""
    return BackupError(
        f"the backup {path} {problem}{reason}: the run cannot resume from it; delete "
        f"{path.parent} to train the run again from step 0, or train in another folder"
    )


def _reason(error: Exception) -> str:
    """An exception's message on one line, at most 200 characters."""
    text = " ".join(str(error).split())
    return text if len(text) <= 200 else text[:197] + "..."


def backed_up_step(directory: str | Path) -> int | None:
    """The step of a `StepBackup`'s latest backup in `directory`; None if it has none (yet).

    Raises:
        BackupError: If its `latest.json` is damaged.
    """
    return read_backup_state(directory).get("step")


class DevEvaluation(keras.callbacks.Callback):
    """Translates a dev set greedily after every epoch, logs its scores, keeps the best model.

    Every figure of the metric's family goes into the epoch's logs as `val_<figure>`
    (`val_bleu`; `val_wer` and `val_per`), so `TensorBoard`, `CSVLogger` and `History` record
    them; when the chosen figure improves, the model is saved to `best_model_path`. When the
    optimizer keeps a moving average of the weights (`use_ema`), that average is what is
    translated and saved; training goes on with the training weights.

    Args:
        sources: Source sentences of the dev set.
        references: Their reference translations, one stream (or several, aligned).
        tokenizer: The model's tokenizer.
        metric: The `tfscones.evaluation.selection.SelectionMetric` that chooses.
        best_model_path: Where the best model is saved (`.keras`); None saves nothing.
        batch_size: Sentences translated together.
        best_score: The best score so far (a resumed run passes its earlier best); the
            metric's worst by default.
        languages: Each dev source's language, for a macro-averaged metric (None: one group).
    """

    def __init__(
        self,
        sources: Sequence[str],
        references: Sequence[str] | Sequence[Sequence[str]],
        tokenizer: Tokenizer,
        metric: SelectionMetric = METRICS["bleu"],
        best_model_path: str | Path | None = None,
        batch_size: int = 64,
        best_score: float | None = None,
        languages: Sequence[str | None] | None = None,
    ):
        super().__init__()
        self.sources = list(sources)
        self.references = references
        self.tokenizer = tokenizer
        self.metric = metric
        self.best_model_path = None if best_model_path is None else Path(best_model_path)
        self.batch_size = batch_size
        self.best_score = metric.worst if best_score is None else best_score
        self.languages = languages

    def on_train_begin(self, logs=None):
        cut = cut_sources(self.tokenizer, self.sources, self.model.max_sequence_length)
        if cut:
            logger.info(
                "%d of %d dev sentences are longer than the model reads: the dev score "
                "translates their first pieces, as training reads its sentences",
                len(cut),
                len(self.sources),
            )

    def on_epoch_end(self, epoch, logs=None):
        with moving_average_weights(self.model):
            figures = self.scores(self.model)
            if logs is not None:
                logs.update({f"val_{name}": value for name, value in figures.items()})
            improved = self.keep_if_best(self.model, figures[self.metric.name])
        logger.info(
            "epoch %d: dev %s %.2f%s",
            epoch + 1,
            self.metric.name,
            figures[self.metric.name],
            " (best)" if improved else "",
        )

    def scores(self, model: keras.Model) -> dict[str, float]:
        """Every dev figure of `model` (the trained one, or another such as an average)."""
        hypotheses = translate(
            model, self.tokenizer, self.sources, self.batch_size, long_sources="translate"
        )
        return self.metric.score(hypotheses, self.references, self.languages)

    def score(self, model: keras.Model) -> float:
        """The chosen dev figure of `model`."""
        return self.scores(model)[self.metric.name]

    def keep_if_best(self, model: keras.Model, score: float) -> bool:
        """Saves `model` as the best one if `score` beats the best so far; says whether it did."""
        if not self.metric.is_better(score, self.best_score):
            return False
        self.best_score = score
        if self.best_model_path is not None:
            with written_aside(self.best_model_path) as partial:
                model.save(partial)
        return True


class LastModel(keras.callbacks.Callback):
    """Saves the model (optimizer state included) at every epoch's end, written aside.

    Keras's `ModelCheckpoint` writes in place, so a crash while it writes leaves half a model;
    this one renames a whole file over the previous epoch's (`tfscones.written_aside`).

    Args:
        path: The `.keras` file.
    """

    def __init__(self, path: str | Path):
        super().__init__()
        self.path = Path(path)

    def on_epoch_end(self, epoch, logs=None):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with written_aside(self.path) as partial:
            self.model.save(partial)


class EpochCheckpoints(keras.callbacks.Callback):
    """Saves the weights at every epoch's end and keeps the last `keep` files, for averaging.

    Files are `epoch-NNNN.weights.h5` in `directory` (NNNN counts epochs from 1); older ones are
    deleted, so at most `keep` lie there at any time.

    Args:
        directory: Folder of the checkpoints.
        keep: How many of the newest checkpoints to keep (at least 1).
    """

    def __init__(self, directory: str | Path, keep: int):
        super().__init__()
        self.directory = Path(directory)
        self.keep = AT_LEAST_ONE.check("keep", keep)

    @property
    def paths(self) -> list[Path]:
        """The kept checkpoints, oldest first."""
        return sorted(self.directory.glob("epoch-*.weights.h5"))

    def on_epoch_end(self, epoch, logs=None):
        self.directory.mkdir(parents=True, exist_ok=True)
        with written_aside(self.directory / f"epoch-{epoch + 1:04d}.weights.h5") as partial:
            self.model.save_weights(partial)
        for stale in self.paths[: -self.keep]:
            stale.unlink()


class TrainingBudget(keras.callbacks.Callback):
    """Stops training at a step count or a time budget; tells the schedule how much time is spent.

    Training stops after the step at which the optimizer has taken `max_steps` steps (so a run
    trains exactly that many, whatever the epoch length) or once `max_minutes` are spent. Before
    every step the fraction of the time budget spent is written into the schedule's `time_fraction`
    (a `tfscones.training.schedules.WarmupDecay` then finishes its warm-up and its decay inside the
    budget). The clock starts at the first `fit` the callback is given to and runs across later
    ones; a resumed run restores the time spent before the kill (`backup_state`, `restore_state`,
    kept by `StepBackup`), so it continues the same schedule.


    Args:
        max_steps: The step budget; None means no limit.
        max_minutes: The time budget; None or a non-positive value means no limit.
        schedule: A learning-rate schedule with a `time_fraction` variable, or None.
        clock: Seconds as a float (`time.monotonic`); tests pass a fake one.
    """

    def __init__(
        self,
        max_steps: int | None = None,
        max_minutes: float | None = None,
        schedule=None,
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__()
        self.max_steps = max_steps
        self.budget_seconds = 60.0 * max_minutes if max_minutes and max_minutes > 0 else None
        self.schedule = schedule
        self.clock = clock
        self.started = None
        self.spent_before = 0.0

    @property
    def elapsed_seconds(self) -> float:
        """Training time spent so far, across resumed runs."""
        running = 0.0 if self.started is None else self.clock() - self.started
        return self.spent_before + running

    @property
    def remaining_seconds(self) -> float | None:
        """Time left in the budget; None without a time budget."""
        if self.budget_seconds is None:
            return None
        return max(self.budget_seconds - self.elapsed_seconds, 0.0)

    def backup_state(self) -> dict:
        """What a resumed run needs: the training time spent."""
        return {"elapsed_seconds": self.elapsed_seconds}

    def restore_state(self, state: dict) -> None:
        """Continues from a backup's `backup_state`."""
        self.spent_before = float(state["elapsed_seconds"])
        self.started = None

    def on_train_begin(self, logs=None):
        if self.started is None:
            self.started = self.clock()

    def on_train_batch_begin(self, batch, logs=None):
        if self.budget_seconds is not None and hasattr(self.schedule, "time_fraction"):
            fraction = min(self.elapsed_seconds / self.budget_seconds, 1.0)
            self.schedule.time_fraction.assign(fraction)

    def on_train_batch_end(self, batch, logs=None):
        steps = int(self.model.optimizer.iterations.numpy())
        if self.max_steps is not None and steps >= self.max_steps:
            self.model.stop_training = True
        if self.budget_seconds is not None and self.elapsed_seconds >= self.budget_seconds:
            self.model.stop_training = True


class ProgressLine(keras.callbacks.Callback):
    """One line of progress: step, loss, learning rate, last dev score and time left.

    On a terminal the line is redrawn in place (at most every `refresh_seconds`) and ended at
    every epoch's end, so each epoch leaves one line behind; elsewhere (a log file, CI) one line
    is written every `log_seconds` and at every epoch's end. Time left is the least of what the
    step budget and the time budget leave, the step part estimated from the mean step time. A
    run bounded by minutes shows its step count without the step budget, which it will not reach.

    Args:
        total_steps: The run's step budget.
        budget: The run's `TrainingBudget`, for the time budget; None if there is none.
        stream: Where to write (standard output by default).
        refresh_seconds: Least time between redraws on a terminal.
        log_seconds: Time between lines when not on a terminal.
        metric_name: The dev figure shown (`val_<metric_name>` of the epoch's logs).
    """

    def __init__(
        self,
        total_steps: int,
        budget: TrainingBudget | None = None,
        stream: TextIO | None = None,
        refresh_seconds: float = 0.5,
        log_seconds: float = 30.0,
        metric_name: str = "bleu",
    ):
        super().__init__()
        self.metric_name = metric_name
        self.total_steps = total_steps
        self.budget = budget
        self.stream = stream or sys.stdout
        self.interactive = self.stream.isatty()
        self.every = refresh_seconds if self.interactive else log_seconds
        self.last_written = -math.inf
        self.started = None
        self.first_step = 0
        self.dev_score = None
        self.loss = None

    def on_train_begin(self, logs=None):
        self.started = time.monotonic()
        self.first_step = self._step()

    def on_train_batch_end(self, batch, logs=None):
        self.loss = (logs or {}).get("loss", self.loss)
        if time.monotonic() - self.last_written >= self.every:
            self._write(end="")

    def on_epoch_end(self, epoch, logs=None):
        self.dev_score = (logs or {}).get(f"val_{self.metric_name}", self.dev_score)
        self.loss = (logs or {}).get("loss", self.loss)
        self._write(end="\n")

    def _step(self) -> int:
        return int(self.model.optimizer.iterations.numpy())

    def _write(self, end: str) -> None:
        self.last_written = time.monotonic()
        line = " · ".join(self._fields())
        if self.interactive:
            self.stream.write(f"\r\033[K{line}{end}")
        else:
            self.stream.write(f"{line}\n")
        self.stream.flush()

    def _fields(self) -> list[str]:
        step = self._step()
        time_bound = self.budget is not None and self.budget.budget_seconds is not None
        fields = [f"step {step:>6,}" if time_bound else f"step {step:>6,}/{self.total_steps:,}"]
        if self.loss is not None:
            fields.append(f"loss {float(self.loss):.3f}")
        fields.append(f"lr {float(self.model.optimizer.learning_rate):.2e}")
        if self.dev_score is not None:
            fields.append(f"dev {METRICS[self.metric_name].shown(self.dev_score)}")
        left = self._seconds_left(step)
        if left is not None:
            fields.append(f"{int(left // 60)}:{int(left % 60):02d} left")
        return fields

    def _seconds_left(self, step: int) -> float | None:
        estimates = []
        if self.budget is not None and self.budget.remaining_seconds is not None:
            estimates.append(self.budget.remaining_seconds)
        done = step - self.first_step
        if done > 0:
            per_step = (time.monotonic() - self.started) / done
            estimates.append(per_step * max(self.total_steps - step, 0))
        return min(estimates, default=None)
