"""The runner: train, evaluate, translate, score, export and analyze as library calls.

    from tfscones.training import runner
    from tfscones.training.config import load_config

    config = load_config("demo_softmax", ["training.max_minutes=5"])
    results = runner.train(config)                      # what `tfscones train` runs
    runner.translate(config.run_dir, ["Wie geht es dir?"])
    runner.score(config.run_dir, ["Wie geht es dir?"], ["How are you?"])
    runner.export(config.run_dir, "exports/demo/1")

`train` trains (or reuses) a joint SentencePiece vocabulary, builds the `tf.data` pipeline, builds
and compiles a `Seq2SeqTransformer` inside the configured `tf.distribute` strategy's scope, and fits
it with: a backup every `training.backup_every_steps` steps (a killed run started again resumes at
the step it last backed up, on the same data), the last model after every epoch, dev BLEU after
every epoch with the best model kept, TensorBoard logs, and an optional wall-clock budget. At the
end it scores the test set with the best model.


The run folder (`output_dir`, default `runs/<name>`) receives:
    config.yaml          the resolved config
    spm.model, spm.vocab the SentencePiece vocabulary
    model.keras          the best model by dev BLEU (what `training.translate` loads)
    checkpoints/last.keras, backup/, logs/ (TensorBoard), history.csv, results.json
"""

from __future__ import annotations

import csv
import json
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import keras
import tensorflow as tf
import yaml

from tfscones import decoding, heads
from tfscones.data import (
    Tokenizer,
    read_parallel_text,
    train_sentencepiece,
    translation_dataset,
)
from tfscones.data.symbol_vocab import SymbolTokenizer
from tfscones.decoding.scoring import check_text_pairs
from tfscones.evaluation import metrics
from tfscones.evaluation.analysis import ModelAnalysis, analyze_model
from tfscones.evaluation.selection import SelectionMetric, selection_metric
from tfscones.models import (
    PRESETS,
    LatentExpertTransformer,
    Seq2SeqTransformer,
    load_model,
    load_run,
)
from tfscones.models.loading import check_vocabulary_fits
from tfscones.run_folder import RunFolder, distinct_names
from tfscones.serving.export import ExportSettings, export_run
from tfscones.training import callbacks, machine
from tfscones.training.averaging import average_checkpoints
from tfscones.training.config import ConfigError, ExperimentConfig, config_to_dict
from tfscones.training.distribution import make_strategy, worker_index
from tfscones.training.resume_check import RunFolderError, check_run_folder
from tfscones.training.schedules import make_schedule
from tfscones.training.splits import (
    pairs_dataset,
    pronunciations,
    scored_test_set,
    sentence_pairs,
    split_files,
    split_languages,
    test_reference_files,
    text_files,
)
from tfscones.written_aside import check_folder, write_text_aside

logger = logging.getLogger("training")


def prepare_tokenizer(config: ExperimentConfig, run_dir: Path) -> Tokenizer | SymbolTokenizer:
    """Makes the run's vocabulary from the training pairs, or reuses the run's.

    `data.vocabulary: symbols` makes a `SymbolTokenizer` of the training set's characters,
    labels and language tags (`symbols.json`); otherwise a joint SentencePiece model is trained.

    SentencePiece reads text files whose every line is usable as they are; otherwise (a
    `data.on_bad_line: skip` corpus with bad lines, or TFDS) it reads the usable pairs, written
    out for it, so that it sees exactly the sentences training sees.
    """
    if config.data.vocabulary == "symbols":
        return prepare_symbols(config, run_dir)
    model_file = RunFolder(run_dir).sentencepiece_model
    if not model_file.exists():
        data = config.data
        if data.source == "text" and not has_skipped_pairs(config):
            inputs = [path for pair in text_files(config, "train") for path in pair]
        elif data.source == "text":
            inputs = _write_training_text(config, run_dir, limit=None)
        else:
            inputs = _write_training_text(config, run_dir, data.sentencepiece_sample_lines)
        train_sentencepiece(
            inputs,
            RunFolder(run_dir).tokenizer_prefix,
            vocab_size=data.vocabulary_size,
            input_sentence_size=data.sentencepiece_sample_lines,
            seed=config.training.seed,
        )
    return reused_sentencepiece(model_file, config.data.vocabulary_size)


def reused_sentencepiece(model_file: Path, vocabulary_size: int) -> Tokenizer:
    """The run folder's SentencePiece model, checked against the config's vocabulary size.

    Raises:
        RunFolderError: If the file is damaged (not a model, or one of other pieces).
    """
    try:
        tokenizer = Tokenizer.from_file(model_file)
        check_vocabulary_fits(tokenizer, vocabulary_size, model_file, "data.vocabulary_size")
    except (ValueError, RuntimeError, tf.errors.OpError) as error:
        raise RunFolderError(
            f"{' '.join(str(error).split())}; the run cannot go on with it: delete "
            f"{model_file.parent} to train the run again, or train in another folder"
        ) from None
    return tokenizer


def prepare_symbols(config: ExperimentConfig, run_dir: Path) -> SymbolTokenizer:
    """The run's symbol vocabulary: read from `symbols.json`, or made from the training set."""
    vocabulary_file = RunFolder(run_dir).symbol_vocabulary
    if vocabulary_file.exists():
        return SymbolTokenizer.from_file(vocabulary_file)
    data = config.data
    if data.source == "tsv":
        training = pronunciations(config, "train")
        sources, targets = training.sources(), list(training.phones)
        languages = sorted({lang for lang in training.languages if lang is not None})
    else:
        sources, targets = sentence_pairs(config, "train")
        languages = []
    tokenizer = SymbolTokenizer.build(sources, targets, languages, data.normalization)
    tokenizer.save(vocabulary_file)
    return tokenizer


def has_skipped_pairs(config: ExperimentConfig) -> bool:
    """Whether checking the training files (`data.on_bad_line`) leaves a pair out."""
    return any(
        read_parallel_text(source, target, on_bad_line=config.data.on_bad_line).num_skipped
        for source, target in text_files(config, "train")
    )


def _write_training_text(config: ExperimentConfig, run_dir: Path, limit: int | None) -> list:
    """Writes the first `limit` (all for None) usable training pairs for SentencePiece."""
    paths = [run_dir / "spm_source.txt", run_dir / "spm_target.txt"]
    pairs = pairs_dataset(config, "train")
    if limit:
        pairs = pairs.take(limit)
    with (
        paths[0].open("w", encoding="utf-8") as sources,
        paths[1].open("w", encoding="utf-8") as targets,
    ):
        for source, target in pairs.as_numpy_iterator():
            sources.write(source.decode("utf-8").replace("\n", " ") + "\n")
            targets.write(target.decode("utf-8").replace("\n", " ") + "\n")
    return paths


def training_batches(
    config: ExperimentConfig, tokenizer: Tokenizer, static_shapes: bool = False
) -> tf.data.Dataset:
    """Shuffled, repeated, token-batched training data, sharded by data across workers.

    Args:
        config: The experiment.
        tokenizer: The run's tokenizer.
        static_shapes: Pad every batch to its bucket's length, so that an XLA-compiled training
            step is compiled once per bucket instead of once per batch length.
    """
    data = config.data
    batches = translation_dataset(
        pairs_dataset(config, "train"),
        tokenizer,
        tokens_per_batch=data.tokens_per_batch,
        max_length=data.max_length,
        max_length_ratio=data.max_length_ratio,
        shuffle_buffer_size=data.shuffle_buffer_size,
        repeat=True,
        static_shapes=static_shapes,
        seed=config.training.seed,
    )
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return batches.with_options(options)


def build_model(config: ExperimentConfig, vocabulary_size: int) -> Seq2SeqTransformer:
    """A new model of the configured preset and head (with latent experts if configured).

    Raises:
        ConfigError: If `model.expert_choice_dropout` is set without `model.num_experts`.
    """
    arguments = dict(config.model.arguments)
    arguments.setdefault("tie_embeddings", config.model.tie_embeddings)
    arguments.setdefault("max_sequence_length", config.data.max_length + 2)
    if config.model.dropout is not None:
        arguments["dropout"] = config.model.dropout
    model_class = Seq2SeqTransformer
    if config.model.num_experts is not None:
        model_class = LatentExpertTransformer
        arguments["num_experts"] = config.model.num_experts
        arguments["expert_choice_dropout"] = config.model.expert_choice_dropout
    elif config.model.expert_choice_dropout:
        raise ConfigError("needs model.num_experts.", "model.expert_choice_dropout")
    return model_class.from_preset(
        config.model.preset, vocabulary_size=vocabulary_size, head=config.model.head, **arguments
    )


def make_loss(config: ExperimentConfig, head: heads.OutputHead) -> keras.losses.Loss:
    """The head's default loss with the configured arguments.

    Raises:
        ConfigError: If `loss.alpha` is set for a head other than SCONES.
    """
    arguments = {"label_smoothing": config.loss.label_smoothing}
    if config.loss.alpha is not None:
        if not head.takes_loss_argument("alpha"):
            raise ConfigError(
                f"is the SCONES weight; the {head.name} head takes no alpha "
                "(an entmax head's alpha goes in model.head: {name: entmax, alpha: ...}).",
                "loss.alpha",
            )
        arguments["alpha"] = config.loss.alpha
    return head.loss(**arguments)


def head_metrics(head: heads.OutputHead) -> list[keras.metrics.Metric]:
    """Metrics that show what the head's loss is made of."""
    return head.metrics()


def learning_rate_schedule(config: ExperimentConfig):
    """The configured warm-up and decay (`tfscones.training.schedules.make_schedule`).

    Raises:
        ConfigError: If the schedule is unknown or its values are out of range.
    """
    training = config.training
    try:
        return make_schedule(
            training.schedule,
            training.learning_rate,
            training.warmup_steps,
            total_steps=training.steps,
            final_fraction=training.final_learning_rate_fraction,
        )
    except ValueError as error:
        raise ConfigError(str(error), "training.schedule") from None


def make_optimizer(config: ExperimentConfig, schedule) -> keras.optimizers.Optimizer:
    """Adam, AdamW or LAMB (the SCONES paper's) following `schedule`.

    Raises:
        ConfigError: If the optimizer is unknown.
    """
    training = config.training
    common = {"learning_rate": schedule, "clipnorm": training.clip_norm}
    if training.ema_momentum is not None:
        common.update(use_ema=True, ema_momentum=training.ema_momentum)
    if training.optimizer == "adam":
        return keras.optimizers.Adam(beta_1=0.9, beta_2=0.98, epsilon=1e-9, **common)
    if training.optimizer == "adamw":
        return keras.optimizers.AdamW(weight_decay=training.weight_decay, beta_2=0.98, **common)
    if training.optimizer == "lamb":
        return keras.optimizers.Lamb(weight_decay=training.weight_decay or None, **common)
    raise ConfigError(
        f"must be adam, adamw or lamb (got {training.optimizer!r}).", "training.optimizer"
    )


def check_data_files(config: ExperimentConfig) -> None:
    """Checks that every data file the config names exists (the test files only if named).

    Raises:
        ConfigError: Naming the key and the missing file.
    """
    for split in ("train", "dev", "test"):
        if split == "test" and not has_test_set(config):
            continue
        for path in split_files(config, split):
            if not path.is_file():
                raise ConfigError(f"no such file: {path}", _split_key(config, split, path))


def has_test_set(config: ExperimentConfig) -> bool:
    """Whether the config names a test set (TFDS sets always have one)."""
    data = config.data
    if data.source == "tsv":
        return bool(data.test_tsv)
    return bool(data.test_source) or data.source == "tfds"


def _split_key(config: ExperimentConfig, split: str, path: Path) -> str:
    if config.data.source == "tsv":
        return f"data.{split}_tsv"
    if path in test_reference_files(config):
        return "data.test_references"
    sources = [Path(source) for source, _ in text_files(config, split)]
    return f"data.{split}_{'source' if path in sources else 'target'}"


def check_config(config: ExperimentConfig) -> None:
    """Checks what only the library can judge, before any expensive work starts.

    The data files must exist, and the head, model, loss, schedule and optimizer must accept
    the configured values (they are made here once, without data or weights).

    Raises:
        ConfigError: Naming the key and the problem.
    """
    check_data_files(config)
    try:
        head = heads.get(config.model.head)
    except (ValueError, TypeError) as error:
        raise ConfigError(str(error), "model.head") from None
    if config.model.preset not in PRESETS:
        raise ConfigError(
            f"unknown preset {config.model.preset!r}; allowed: {', '.join(PRESETS)}.",
            "model.preset",
        )
    try:
        build_model(config, config.data.vocabulary_size)
    except ConfigError:
        raise
    except (ValueError, TypeError) as error:
        raise ConfigError(str(error), "model.arguments") from None
    try:
        make_loss(config, head)
    except ConfigError:
        raise
    except ValueError as error:
        raise ConfigError(str(error), "loss") from None
    make_optimizer(config, learning_rate_schedule(config))


def compiled_model(config: ExperimentConfig, vocabulary_size: int, strategy):
    """Builds and compiles the model inside the strategy's scope.

    Returns:
        The model and its learning-rate schedule (which a time budget drives).
    """
    with strategy.scope():
        model = build_model(config, vocabulary_size)
        schedule = learning_rate_schedule(config)
        model.compile(
            optimizer=make_optimizer(config, schedule),
            loss=make_loss(config, model.head),
            metrics=head_metrics(model.head),
            jit_compile=config.training.jit_compile,
        )
    return model, schedule


def training_budget(fit_callbacks: list) -> callbacks.TrainingBudget:
    """The `TrainingBudget` among `training_callbacks`: the time a resumed run spent before."""
    return next(c for c in fit_callbacks if isinstance(c, callbacks.TrainingBudget))


def training_callbacks(
    config, run_dir, schedule, tokenizer, dev_sources, dev_references, progress=None
):
    """Dev score, progress line, checkpoints, logs, time budget and step backup, in that order.

    The order matters at an epoch's end: the evaluation puts `val_bleu` (or the figures of the
    config's `training.selection_metric`) into the logs before the
    progress line shows it and before the logs are written, and the backup comes last. The
    progress line goes to `progress` (a text stream; standard output if None).
    """
    run = RunFolder(run_dir)
    run.checkpoints.mkdir(exist_ok=True)
    training = config.training
    budget = callbacks.TrainingBudget(training.steps, training.max_minutes, schedule)
    metric = selection_metric(training.selection_metric)
    fit_callbacks = [
        callbacks.DevEvaluation(
            dev_sources,
            dev_references,
            tokenizer,
            metric,
            best_model_path=run.model,
            best_score=best_logged_score(run.history, metric),
            languages=split_languages(config, dev_sources),
        ),
        callbacks.ProgressLine(training.steps, budget, stream=progress, metric_name=metric.name),
        callbacks.LastModel(run.last_checkpoint),
        keras.callbacks.TensorBoard(run.logs),
        keras.callbacks.CSVLogger(run.history, append=True),
        budget,
    ]
    if training.average_checkpoints > 1:
        fit_callbacks.append(
            callbacks.EpochCheckpoints(run.checkpoints, training.average_checkpoints)
        )
    backup = callbacks.StepBackup(run.backup, training.backup_every_steps, [budget])
    return fit_callbacks + [backup]


def best_logged_score(history_csv: Path, metric: SelectionMetric) -> float:
    """The best dev score an earlier (killed) run of this folder logged; the worst if none."""
    if not history_csv.exists():
        return metric.worst
    column = f"val_{metric.name}"
    with history_csv.open(encoding="utf-8") as rows:
        scores = [float(row[column]) for row in csv.DictReader(rows) if row.get(column)]
    return metric.best_of(scores)


def keep_logged_epochs(history_csv: Path, epochs: int) -> None:
    """Drops the rows of epochs from `epochs` on, which a resumed run trains and logs again.

    A run killed after logging an epoch but before backing its end up resumes inside that
    epoch; without this, the appended CSV log would hold the epoch twice.
    """
    if not history_csv.exists():
        return
    with history_csv.open(encoding="utf-8", newline="") as file:
        rows = list(csv.reader(file))
    kept = rows[:1] + [row for row in rows[1:] if int(row[0]) < epochs]
    if len(kept) < len(rows):
        with history_csv.open("w", encoding="utf-8", newline="") as file:
            csv.writer(file).writerows(kept)


def fit(config: ExperimentConfig, model: keras.Model, batches: tf.data.Dataset, fit_callbacks):
    """Trains exactly `training.steps` optimizer steps (fewer if time runs out), resuming.

    A resumed run skips the batches the killed run consumed, finishes the interrupted epoch, then
    runs the remaining epochs: it ends at the same step count, on the same data, as an
    uninterrupted run. `fit_callbacks` ends with the `TrainingBudget` and the `StepBackup`.
    """
    steps_per_epoch = config.training.steps_per_epoch
    epochs = math.ceil(config.training.steps / steps_per_epoch)
    backup = fit_callbacks[-1]
    done = backup.restore(model)
    epoch, step_in_epoch = divmod(done, steps_per_epoch)
    for callback in fit_callbacks:
        if isinstance(callback, keras.callbacks.CSVLogger):
            keep_logged_epochs(Path(callback.filename), epoch)
    batches = batches.skip(done)
    if step_in_epoch:
        model.fit(
            batches,
            initial_epoch=epoch,
            epochs=epoch + 1,
            steps_per_epoch=steps_per_epoch - step_in_epoch,
            callbacks=fit_callbacks,
            verbose=0,
            shuffle=False,  # the pipeline shuffles
        )
        if model.optimizer.use_ema:
            backup.restore(model)  # fit ended by putting the moving average in the weights
        epoch += 1
        batches = batches.skip(steps_per_epoch - step_in_epoch)
    if epoch < epochs and not model.stop_training:
        model.fit(
            batches,
            initial_epoch=epoch,
            epochs=epochs,
            steps_per_epoch=steps_per_epoch,
            callbacks=fit_callbacks,
            verbose=0,
            shuffle=False,  # the pipeline shuffles
        )


def keep_checkpoint_average(model: keras.Model, fit_callbacks) -> float | None:
    """Averages the kept epoch checkpoints; keeps the mean as the best model if it scores higher.

    Returns:
        The dev score of the average, or None when no averaging was configured or fewer than
        two checkpoints were written.
    """
    kept = [c for c in fit_callbacks if isinstance(c, callbacks.EpochCheckpoints)]
    if not kept or len(kept[0].paths) < 2:
        return None
    evaluation = fit_callbacks[0]
    average_checkpoints(model, kept[0].paths)
    score = evaluation.score(model)
    improved = evaluation.keep_if_best(model, score)
    logger.info(
        "average of the last %d checkpoints: dev %s %.2f%s",
        len(kept[0].paths),
        evaluation.metric.name,
        score,
        " (best)" if improved else "",
    )
    return score


def worker_run_dir(config: ExperimentConfig) -> Path:
    """The run folder; workers other than the chief write to a subfolder of their own."""
    index = worker_index() if config.training.strategy == "multi_worker" else 0
    run_dir = config.run_dir if index == 0 else config.run_dir / f"worker-{index}"
    try:
        check_folder(run_dir, f"the run folder {run_dir}")
    except OSError as error:
        raise RunFolderError(str(error)) from None
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def train(config: ExperimentConfig, progress: TextIO | None = None) -> dict:
    """Trains and evaluates one experiment; returns (and writes) its results.

    Args:
        config: The experiment.
        progress: Where the progress line goes (standard output if None); a stream whose
            `isatty()` is true gets it redrawn in place.

    Returns:
        A dict with the best dev BLEU, test BLEU and chrF, steps trained, wall time, the machine
        (`tfscones.training.machine.describe_machine`), the one-minute load average at the
        start and the end (what else was running shows there) and the code
        (`tfscones.training.machine.code_version`).
    """
    started, load_at_start = time.monotonic(), machine.load_average()
    # The strategy comes first: a multi-worker strategy must configure TensorFlow's collective
    # ops before anything (the config check builds a model) starts its runtime.
    strategy = make_strategy(config.training.strategy, config.training.tpu)
    check_config(config)
    run_dir = worker_run_dir(config)
    with RunFolder(run_dir).hold():
        return train_in_held_folder(config, run_dir, strategy, progress, started, load_at_start)


def train_in_held_folder(config, run_dir, strategy, progress, started, load_at_start) -> dict:
    """`train`'s work in its run folder, which this process holds (`RunFolder.hold`).

    `started` (`time.monotonic()`) and `load_at_start` are from when `train` was called; the
    code version is taken here, before training, since the tree may change while it runs.
    """
    check_run_folder(config, run_dir)
    code = machine.code_version()
    keras.utils.set_random_seed(config.training.seed)
    if config.training.mixed_precision:
        keras.mixed_precision.set_global_policy(config.training.mixed_precision)
    tokenizer = prepare_tokenizer(config, run_dir)  # may refuse the data: no config.yaml yet
    write_text_aside(
        RunFolder(run_dir).config, yaml.safe_dump(config_to_dict(config), sort_keys=False)
    )
    dev_sources, dev_references = sentence_pairs(config, "dev", config.data.dev_sentences)
    model, schedule = compiled_model(config, tokenizer.vocab_size, strategy)
    fit_callbacks = training_callbacks(
        config, run_dir, schedule, tokenizer, dev_sources, dev_references, progress
    )
    batches = training_batches(config, tokenizer, static_shapes=bool(model.jit_compile))
    fit(config, model, batches, fit_callbacks)
    steps = int(model.optimizer.iterations.numpy())
    averaged_score = keep_checkpoint_average(model, fit_callbacks)
    spent_before = training_budget(fit_callbacks).spent_before
    metric = config.training.selection_metric
    results = {
        "name": config.name,
        "steps": steps,
        f"best_dev_{metric}": fit_callbacks[0].best_score,
        "train_minutes": (time.monotonic() - started + spent_before) / 60.0,
        "machine": machine.describe_machine(),
        "load_average": {"start": load_at_start, "end": machine.load_average()},
        "code": code,
    }
    if spent_before:
        results["resumed_after_minutes"] = spent_before / 60.0
    if averaged_score is not None:
        results[f"averaged_dev_{metric}"] = averaged_score
    results.update(evaluate_test(config, run_dir, tokenizer, model))
    write_text_aside(RunFolder(run_dir).results, json.dumps(results, indent=2))
    logger.info("results: %s", results)
    return results


def evaluate_test(config, run_dir, tokenizer, model) -> dict:
    """Greedy test scores of the best model (the last one if none was kept).

    BLEU and chrF for translation; macro WER and PER, and each language's, for a task chosen
    by WER or PER (`SelectionMetric.test_report`).
    """
    if not has_test_set(config):
        return {}
    best = RunFolder(run_dir).model
    if best.exists():
        model = load_model(best)
    sources, streams = scored_test_set(config, config.data.test_sentences)
    hypotheses = decoding.translate(model, tokenizer, sources, long_sources="translate")
    write_text_aside(RunFolder(run_dir).test_hypotheses, "\n".join(hypotheses) + "\n")
    metric = selection_metric(config.training.selection_metric)
    references = streams[0] if len(streams) == 1 else streams
    return metric.test_report(hypotheses, references, split_languages(config, sources))


def evaluate(run_dir: str | Path, sources: list[str], references: list, search=None) -> dict:
    """BLEU and chrF of a run's best model on given sentences (greedy unless `search` says).

    Args:
        run_dir: A training run folder (its `model.keras` and `spm.model`).
        sources: Source sentences.
        references: One reference translation per source, or several such streams
            (`metrics.corpus_bleu`).
        search: A `tfscones.decoding.Search` (None: greedy).

    Returns:
        `bleu`, `chrf`, `bleu_signature` (naming the number of references) and the
        `hypotheses`.

    Raises:
        FileNotFoundError: If the folder or one of its files is missing.
        ValueError: If a reference stream's length differs from the sources'.
    """
    streams = metrics.reference_streams(sources, references)
    hypotheses = translate(run_dir, sources, search)
    return {
        "bleu": metrics.corpus_bleu(hypotheses, streams).score,
        "chrf": metrics.corpus_chrf(hypotheses, streams).score,
        "bleu_signature": metrics.bleu_signature(len(streams)),
        "hypotheses": hypotheses,
    }


def translate(
    run_dir: str | Path, sentences: list[str], search=None, batch_size: int = 64
) -> list[str]:
    """Translations of `sentences` by a run's best model (greedy unless `search` says).

    Raises:
        FileNotFoundError: If the folder or one of its files is missing.
        TypeError: If `sentences` is one string rather than a list of them.
    """
    model, tokenizer = load_run(run_dir)
    return decoding.translate(model, tokenizer, sentences, batch_size, search or decoding.Search())


def score(run_dir: str | Path, sources: list[str], targets: list[str]) -> list[float]:
    """How well each target translates its source under a run's best model.

    A target's score is the sum of the head's log scores of its tokens, EOS included, under
    teacher forcing: the log-probability for softmax, Σ log P(z=1 | x, y) for the SCONES head
    (Stahlberg & Kumar 2022, eq. 3-4), -inf outside an entmax head's support. The same numbers
    as the exported SavedModel's `score` signature (`tfscones.decoding.score_texts`): a target
    longer than the model's positions gets NaN.

    Raises:
        FileNotFoundError: If the folder or one of its files is missing.
        TypeError: If `sources` or `targets` is one string.
        ValueError: If the two lists differ in length.
    """
    check_text_pairs(sources, targets)
    model, tokenizer = load_run(run_dir)
    return [float(value) for value in decoding.score_texts(model, tokenizer, sources, targets)]


def export(run_dir: str | Path, out: str | Path, settings: ExportSettings | None = None) -> dict:
    """Exports a run's best model as SavedModel version folder `out` (`BASE/NAME/VERSION`).

    Returns:
        What the export holds (`tfscones.serving.export_info`) and its `path`.

    Raises:
        tfscones.serving.ExportError: If a file is missing or `out` is not a new version folder.
    """
    return export_run(out, run=run_dir, settings=settings)


def analyze(
    run_dirs: list[str | Path],
    sources: list[str],
    references: list,
    on_analysed: Callable[[str, ModelAnalysis], None] | None = None,
    **analysis_arguments,
) -> dict[str, ModelAnalysis]:
    """`tfscones.evaluation.analysis.analyze_model` of each run's best model, by its name.

    Args:
        run_dirs: Training run folders.
        sources: Source sentences.
        references: One reference translation per source, or several such streams.
        on_analysed: Called with each run's name and analysis as it is done (progress).
        **analysis_arguments: `beam_sizes`, `exact_sentences`, `state_budget`.

    Returns:
        Each run's analysis under its name (`tfscones.run_folder.distinct_names`: the
        folder's name, with parents enough to tell two runs of one name apart), in order.

    Raises:
        FileNotFoundError: If a folder or one of its files is missing (checked for every run
            before the first analysis starts).
        ValueError: If one folder is given twice.
    """
    names = distinct_names(run_dirs)
    for run_dir in run_dirs:
        RunFolder(run_dir).check_decodable()
    analyses = {}
    for name, run_dir in zip(names, run_dirs, strict=True):
        model, tokenizer = load_run(run_dir)
        analyses[name] = analyze_model(model, tokenizer, sources, references, **analysis_arguments)
        if on_analysed is not None:
            on_analysed(name, analyses[name])
    return analyses
