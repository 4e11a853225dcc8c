"""Experiment configs: YAML files with an optional `base`, command-line overrides, strict keys.

A config file holds the sections below; every key is optional and unknown keys are errors.
`base: other.yaml` (relative to the file) is loaded first and overridden key by key, so a head's
config is a few lines on top of its corpus's. Overrides from the command line are
`section.key=value` with YAML values (`training.steps=200`, `model.head=sparsemax`,
`data.max_length=64`).
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A config names an unknown key, or gives a value of the wrong type."""


@dataclasses.dataclass
class DataConfig:
    """Where the sentence pairs come from and how they are cut into batches.

    `source: text` reads aligned files (`train_source`, `train_target`, ... paths relative to the
    working directory; the training side may list several files, read one after the other, as
    `train_source: [a.de, b.de]` with `train_target: [a.en, b.en]`); `source: tfds` reads
    `tfds_name` (e.g. `wmt19_translate/de-en`) with `source_language`/`target_language` from
    `tfds_data_dir`.
    """

    source: str = "text"
    train_source: str | list | None = None
    train_target: str | list | None = None
    dev_source: str | None = None
    dev_target: str | None = None
    test_source: str | None = None
    test_target: str | None = None
    tfds_name: str | None = None
    tfds_data_dir: str | None = None
    source_language: str | None = None
    target_language: str | None = None
    dev_split: str = "validation"
    test_split: str = "test"
    vocabulary_size: int = 8000
    sentencepiece_sample_lines: int = 2_000_000
    max_length: int = 128
    max_length_ratio: float = 3.0
    tokens_per_batch: int = 4096
    shuffle_buffer_size: int = 10_000
    on_bad_line: str = "error"
    dev_sentences: int | None = None
    test_sentences: int | None = None


@dataclasses.dataclass
class ModelConfig:
    """The architecture: a `Seq2SeqTransformer` preset, its head, and argument overrides.

    `num_experts: K` makes it a `LatentExpertTransformer` trained by hard EM (seed 002): K
    expert embeddings in place of the start token; `expert_choice_dropout` chooses each
    example's expert with dropout on (seed 002 §5.4's pitfall, off by default).
    """

    preset: str = "small"
    head: Any = "softmax"
    tie_embeddings: bool = True
    dropout: float | None = None
    num_experts: int | None = None
    expert_choice_dropout: bool = False
    arguments: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class LossConfig:
    """Arguments of the head's loss: `alpha` for SCONES only, label smoothing for all."""

    alpha: float | None = None
    label_smoothing: float = 0.0


@dataclasses.dataclass
class TrainingConfig:
    """How to optimise, for how long, where, and how often to evaluate and back up.

    `schedule` is `cosine` or `linear` (warm-up, then decay to `final_learning_rate_fraction` of
    the peak by the end of the run: after `steps`, or when `max_minutes` is spent, whichever comes
    first) or `inverse_sqrt` (the original Transformer's, which never decays to zero).
    `ema_momentum` evaluates and keeps the optimizer's moving average of the weights;
    `average_checkpoints: N` keeps the last N epoch checkpoints and, at the end, keeps their mean
    as the best model if it has the better dev BLEU.
    """

    strategy: str = "default"
    tpu: str | None = None
    optimizer: str = "adam"
    learning_rate: float = 1e-3
    schedule: str = "cosine"
    warmup_steps: int = 4000
    final_learning_rate_fraction: float = 0.0
    weight_decay: float = 0.0
    clip_norm: float | None = 1.0
    steps: int = 100_000
    steps_per_epoch: int = 1000
    max_minutes: float | None = None
    ema_momentum: float | None = None
    average_checkpoints: int = 0
    mixed_precision: str | None = None
    jit_compile: Any = "auto"
    backup_every_steps: int = 200
    seed: int = 1


@dataclasses.dataclass
class ExperimentConfig:
    """A whole experiment; `output_dir` defaults to `runs/<name>`."""

    name: str = "experiment"
    output_dir: str | None = None
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    loss: LossConfig = dataclasses.field(default_factory=LossConfig)
    training: TrainingConfig = dataclasses.field(default_factory=TrainingConfig)

    @property
    def run_dir(self) -> Path:
        """The folder that receives vocabulary, checkpoints, logs and results."""
        return Path(self.output_dir or Path("runs") / self.name)


def _read_yaml(path: Path) -> dict:
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist.")
    content = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(content, dict):
        raise ConfigError(f"config file {path} must hold a mapping, not {type(content).__name__}.")
    base = content.pop("base", None)
    try:
        _build(ExperimentConfig, content, "")
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
    if base is None:
        return content
    return _merge(_read_yaml(path.parent / base), content)


def _merge(base: dict, update: dict) -> dict:
    merged = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _apply_override(raw: dict, override: str) -> None:
    if "=" not in override:
        raise ConfigError(f"override {override!r} must look like section.key=value.")
    dotted_key, value = override.split("=", 1)
    *sections, key = dotted_key.strip().split(".")
    node = raw
    for section in sections:
        node = node.setdefault(section, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {override!r}: {section!r} is not a section.")
    node[key] = yaml.safe_load(value)


def _build(cls, values: dict, where: str):
    fields = {field.name: field for field in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(
            f"unknown config key(s) {', '.join(where + k for k in unknown)}; "
            f"allowed in {where.rstrip('.') or 'the top level'}: {', '.join(fields)}."
        )
    hints = typing.get_type_hints(cls)
    arguments = {}
    for name, value in values.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, dict):
                raise ConfigError(f"config key {where + name} must be a section (a mapping).")
            arguments[name] = _build(hint, value, f"{where}{name}.")
        else:
            arguments[name] = _checked_value(value, hint, where + name)
    return cls(**arguments)


def _checked_value(value, hint, key: str):
    allowed = typing.get_args(hint) or (hint,)
    if value is None and type(None) in allowed or Any in allowed:
        return value
    if float in allowed and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not any(isinstance(value, kind) for kind in allowed if isinstance(kind, type)):
        names = " or ".join(getattr(kind, "__name__", str(kind)) for kind in allowed)
        raise ConfigError(f"config key {key} must be {names} (got {value!r}).")
    return value


def load_config(
    paths: list[str | Path] | str | Path, overrides: list[str] = ()
) -> ExperimentConfig:
    """Loads YAML config files (later ones override earlier ones), then `key=value` overrides.

    Args:
        paths: One or more YAML files.
        overrides: `section.key=value` strings, values parsed as YAML.

    Returns:
        The validated config.

    Raises:
        ConfigError: On a missing file, an unknown key (named with its section and the allowed
            keys), or a value of the wrong type.
    """
    raw: dict = {}
    for path in [paths] if isinstance(paths, str | Path) else paths:
        raw = _merge(raw, _read_yaml(Path(path)))
    for override in overrides:
        _apply_override(raw, override)
    return _build(ExperimentConfig, raw, "")


def config_to_dict(config: ExperimentConfig) -> dict:
    """The config as plain data, for writing next to the run's results."""
    return dataclasses.asdict(config)
