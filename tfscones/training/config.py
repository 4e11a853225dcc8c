"""Experiment configs: YAML files with an optional `base`, command-line overrides, strict keys.

A config is a YAML file, or the name of one shipped with the package in `tfscones/configs/`
(`load_config("demo_softmax")`; `shipped_configs()` lists them). A data path that starts with
`tfscones:` names a file inside the installed package (`tfscones:data/demo/train.de`, the
bundled demo corpus), so the shipped demo configs train from an installed wheel anywhere; other
relative paths are relative to the working directory.

A config file holds the sections below; every key is optional and unknown keys are errors.
`base: other.yaml` (relative to the file) is loaded first and overridden key by key, so a head's
config is a few lines on top of its corpus's. Overrides from the command line are
`section.key=value` with YAML values (`training.steps=200`, `model.head=sparsemax`,
`data.max_length=64`).
"""

from __future__ import annotations

import dataclasses
import os
import typing
from pathlib import Path
from typing import Any

import yaml

from tfscones import ranges


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a repeated key and an alias are errors.

    YAML says keys are unique, but PyYAML keeps the last of two silently: a config that sets
    `learning_rate` twice would train with one of them and never say so. An alias (`*name`)
    repeats an anchored value without copying it, so a few hundred bytes of nested aliases
    stand for gigabytes once the config is merged and copied (the "billion laughs"); a config
    repeats values with `base:` instead.
    """

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None,
                None,
                f"the alias *{event.anchor} is not allowed in a config (write the value out, or "
                "share settings with `base:`)",
                event.start_mark,
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def read_yaml(text: str):
    """The YAML value of `text`, as `yaml.safe_load` reads it, refusing repeated keys and aliases.

    Raises:
        yaml.YAMLError: If the text is not YAML, a mapping repeats a key or a node is an alias
            (naming the line).
    """
    return yaml.load(text, Loader=_UniqueKeyLoader)


CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
PACKAGE_PREFIX = "tfscones:"


class ConfigError(ValueError):
    """A config names an unknown key, or gives a value of the wrong type or out of range.

    Printed as `FILE: KEY: problem`: `origin` is the file (or `command line`) that set the key,
    filled in by `load_config` and `locate`.
    """

    def __init__(self, problem: str, key: str | None = None, origin: str | None = None):
        super().__init__(problem)
        self.problem = problem
        self.key = key
        self.origin = origin

    def __str__(self) -> str:
        return ": ".join(part for part in (self.origin, self.key, self.problem) if part)


def shipped_configs() -> list[str]:
    """Names of the configs shipped with the package (`demo_softmax`, `multi30k_softmax`, ...)."""
    return sorted(path.stem for path in CONFIG_DIR.glob("*.yaml"))


def config_path(name_or_path: str | Path) -> Path:
    """The file of a config given as a path, or as the name of a shipped config.

    Raises:
        ConfigError: If it is neither an existing file nor a shipped config's name.
    """
    path = Path(name_or_path)
    if path.is_file():
        return path
    stem = path.name.removesuffix(".yaml")
    if path.parent == Path(".") and (CONFIG_DIR / f"{stem}.yaml").is_file():
        return CONFIG_DIR / f"{stem}.yaml"
    raise ConfigError(
        f"config file {path} does not exist, and no shipped config is named {stem!r}; "
        f"shipped: {', '.join(shipped_configs())}."
    )


def data_path(path: str) -> Path:
    """A data file's path: `tfscones:REST` is REST inside the installed package.

    Raises:
        ConfigError: If a `tfscones:` path leads out of the package (`tfscones:../../x`).
    """
    if not path.startswith(PACKAGE_PREFIX):
        return Path(path)
    inside = PACKAGE_DIR / path.removeprefix(PACKAGE_PREFIX)
    if not inside.resolve().is_relative_to(PACKAGE_DIR):
        raise ConfigError(
            f"{path!r} leads out of the installed package ({inside.resolve()}); a "
            f"{PACKAGE_PREFIX} path names a file inside it, such as tfscones:data/demo/train.de"
        )
    return inside


@dataclasses.dataclass
class DataConfig:
    """Where the sentence pairs come from and how they are cut into batches.

    `source: text` reads aligned files (`train_source`, `train_target`, ... paths relative to the
    working directory, or `tfscones:` paths inside the package, see `data_path`; the training
    side may list several files, read one after the other, as
    `train_source: [a.de, b.de]` with `train_target: [a.en, b.en]`); `source: tfds` reads
    `tfds_name` (e.g. `wmt19_translate/de-en`) with `source_language`/`target_language` from
    `tfds_data_dir`; `source: tsv` reads pronunciation dictionaries (`train_tsv`, `dev_tsv`,
    `test_tsv`: a file or a list of files, `graphemes<TAB>phones` a line, see
    `tfscones.data.pronunciation_tsv`), where a file name holding `{language}` stands for one
    file of each of `languages` (`sigmorphon/{language}_train.tsv`), and a file without it is
    of the language its name begins with (`fre_train.tsv`).

    `test_references: [refs2.en, refs3.en]` makes a `text` test set multi-reference: further
    translations of `test_source`, one file a reference, each aligned line by line with it, so
    that test BLEU and chrF score against `test_target` and these together (sacrebleu's
    reference streams). Such a test set is read strictly (a bad line is an error whatever
    `on_bad_line` says): a pair skipped in one file would misalign the others.

    `vocabulary: sentencepiece` trains a joint SentencePiece model of `vocabulary_size` pieces;
    `vocabulary: symbols` makes a vocabulary of the training set's symbols
    (`tfscones.data.symbol_vocab`): source characters after `normalization` (NFC, NFD, NFKC,
    NFKD or none), target labels split at spaces, and a tag per language of `languages`
    (`language_tags: false` leaves them out).
    """

    source: str = "text"
    train_source: str | list | None = None
    train_target: str | list | None = None
    dev_source: str | None = None
    dev_target: str | None = None
    test_source: str | None = None
    test_target: str | None = None
    test_references: list | None = None
    train_tsv: str | list | None = None
    dev_tsv: str | list | None = None
    test_tsv: str | list | None = None
    languages: list | None = None
    language_tags: bool = True
    vocabulary: str = "sentencepiece"
    normalization: str = "NFC"
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

    `num_experts: K` makes it a `LatentExpertTransformer` trained by hard EM (Shen et al. 2019): K
    expert embeddings in place of the start token; `expert_choice_dropout` chooses each
    example's expert with dropout on (Shen et al. 2019, §5.4's pitfall, off by default).
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
    as the best model if it has the better dev score. `selection_metric` is the dev score that
    chooses the kept model (`tfscones.evaluation.selection`): `bleu` or `chrf` (higher is
    better), or `per` or `wer` (lower is better, macro-averaged over the languages, as the
    SIGMORPHON 2020 G2P task scores).
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
    selection_metric: str = "bleu"


@dataclasses.dataclass
class ExperimentConfig:
    """A whole experiment; `output_dir` defaults to `runs/<name>`."""

    name: str = "experiment"
    output_dir: str | None = None
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    loss: LossConfig = dataclasses.field(default_factory=LossConfig)
    training: TrainingConfig = dataclasses.field(default_factory=TrainingConfig)

    def __post_init__(self):
        check_run_name(self.name)

    @property
    def run_dir(self) -> Path:
        """The folder that receives vocabulary, checkpoints, logs and results."""
        return Path(self.output_dir or Path("runs") / self.name)


def check_run_name(name: str) -> None:
    """Refuses a run name that is not one plain folder name (it names `runs/<name>`).

    Raises:
        ConfigError: If `name` is empty, `.` or `..`, holds a path separator or a control
            character, or starts with a dot (a hidden folder), since `runs/<name>` would then
            point elsewhere: outside `runs`, or at a folder above it.
    """
    plain = (
        isinstance(name, str)
        and name.strip() == name
        and name not in ("", ".", "..")
        and not name.startswith(".")
        and not any(mark in name for mark in ("/", "\\", os.sep))
        and name.isprintable()
    )
    if not plain:
        raise ConfigError(
            "must be one plain folder name (no '/' or '\\', no leading dot, no spaces around "
            f"it), got {name!r}; give output_dir=PATH to choose the folder",
            "name",
        )


def _file_chain(path: Path, children: tuple[Path, ...] = ()) -> list[tuple[Path, dict]]:
    """A config file and its `base` files, each with its own keys, the last base first.

    Args:
        path: The config file.
        children: The files whose `base` chain led to `path`, the first given first.

    Raises:
        ConfigError: If a file cannot be read as a config, or the chain comes back to a file.
    """
    if path.resolve() in {child.resolve() for child in children}:
        chain = " -> ".join(str(file) for file in (*children, path))
        raise ConfigError(f"the base chain is a cycle: {chain}", "base", str(children[-1]))
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist.")
    try:
        content = read_yaml(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        problem = " ".join(str(error).split())
        raise ConfigError(f"not a valid YAML file: {problem}", origin=str(path)) from None
    if not isinstance(content, dict):
        raise ConfigError(f"must hold a mapping, not {type(content).__name__}.", origin=str(path))
    base = content.pop("base", None)
    try:
        _build(ExperimentConfig, content, "")
    except ConfigError as error:
        error.origin = str(path)
        raise
    if base is None:
        return [(path, content)]
    if not isinstance(base, str):
        raise ConfigError(f"must name one file (got {base!r}).", "base", str(path))
    return _file_chain(path.parent / base, (*children, path)) + [(path, content)]


def _read_yaml(path: Path) -> dict:
    merged: dict = {}
    for _, content in _file_chain(path):
        merged = _merge(merged, content)
    return merged


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
    try:
        node[key] = read_yaml(value)
    except yaml.YAMLError as error:
        problem = " ".join(str(error).split())
        raise ConfigError(
            f"{value!r} is not a YAML value ({problem}).", dotted_key.strip(), "command line"
        ) from None


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
                raise ConfigError("must be a section (a mapping).", where + name)
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
    if float in allowed and isinstance(value, str) and _is_float(value):
        return float(value)  # PyYAML reads 1e-3 (YAML 1.1: no dot) as a string
    kinds = [kind for kind in allowed if isinstance(kind, type)]
    boolean_for_number = isinstance(value, bool) and bool not in kinds
    if boolean_for_number or not any(isinstance(value, kind) for kind in kinds):
        names = " or ".join(getattr(kind, "__name__", str(kind)) for kind in allowed)
        raise ConfigError(f"must be {names} (got {value!r}).", key)
    return value


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip().lower() not in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity")


def load_config(
    paths: list[str | Path] | str | Path, overrides: list[str] = ()
) -> ExperimentConfig:
    """Loads YAML config files (later ones override earlier ones), then `key=value` overrides.

    Args:
        paths: One or more YAML files, or names of shipped configs (`demo_softmax`).
        overrides: `section.key=value` strings, values parsed as YAML.

    Returns:
        The validated config.

    Raises:
        ConfigError: On a missing or malformed file, an unknown key (named with its section and
            the allowed keys), or a value of the wrong type or out of range (named with the file
            that set it and what is allowed).
    """
    paths = [config_path(path) for path in ([paths] if isinstance(paths, str | Path) else paths)]
    raw: dict = {}
    for path in paths:
        raw = _merge(raw, _read_yaml(Path(path)))
    try:
        for override in overrides:
            _apply_override(raw, override)
        config = _build(ExperimentConfig, raw, "")
        check_values(config)
    except ConfigError as error:
        raise locate(error, paths, overrides) from None
    return config


def locate(error: ConfigError, paths: list, overrides: list[str] = ()) -> ConfigError:
    """Fills in the file (or `command line`) that set the key an error names.

    Args:
        error: An error whose `key` is a dotted config key (`training.steps`).
        paths: The config files, as given to `load_config`.
        overrides: The `section.key=value` overrides.

    Returns:
        The same error, its `origin` set unless it had one or names no key.
    """
    if error.origin or not error.key:
        return error
    for override in reversed(list(overrides)):
        if override.split("=", 1)[0].strip() == error.key:
            error.origin = "command line"
            return error
    chains = [link for path in paths for link in _file_chain(config_path(path))]
    for path, content in reversed(chains):
        if _holds_key(content, error.key):
            error.origin = str(path)
            return error
    error.origin = "defaults"
    return error


def _holds_key(content: dict, dotted_key: str) -> bool:
    node = content
    for part in dotted_key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


_LIMITS: dict[str, ranges.Range | tuple] = {
    "data.source": ("text", "tfds", "tsv"),
    "data.vocabulary": ("sentencepiece", "symbols"),
    "data.normalization": ("NFC", "NFD", "NFKC", "NFKD", "none"),
    "data.vocabulary_size": ranges.Range(16, integer=True),
    "data.sentencepiece_sample_lines": ranges.AT_LEAST_ONE,
    "data.max_length": ranges.AT_LEAST_ONE,
    "data.max_length_ratio": ranges.POSITIVE,
    "data.tokens_per_batch": ranges.AT_LEAST_ONE,
    "data.shuffle_buffer_size": ranges.AT_LEAST_ONE,
    "data.on_bad_line": ("error", "skip"),
    "data.dev_sentences": ranges.AT_LEAST_ONE,
    "data.test_sentences": ranges.AT_LEAST_ONE,
    "model.dropout": ranges.FRACTION,
    "model.num_experts": ranges.AT_LEAST_ONE,
    "loss.alpha": ranges.SCONES_ALPHA,
    "loss.label_smoothing": ranges.LABEL_SMOOTHING,
    "training.strategy": ("default", "mirrored", "multi_worker", "tpu"),
    "training.optimizer": ("adam", "adamw", "lamb"),
    "training.learning_rate": ranges.POSITIVE,
    "training.schedule": ("cosine", "linear", "inverse_sqrt"),
    "training.warmup_steps": ranges.NON_NEGATIVE_INTEGER,
    "training.final_learning_rate_fraction": ranges.UNIT_INTERVAL,
    "training.weight_decay": ranges.NON_NEGATIVE,
    "training.clip_norm": ranges.POSITIVE,
    "training.steps": ranges.AT_LEAST_ONE,
    "training.steps_per_epoch": ranges.AT_LEAST_ONE,
    "training.max_minutes": ranges.POSITIVE,
    "training.ema_momentum": ranges.FRACTION,
    "training.average_checkpoints": ranges.NON_NEGATIVE_INTEGER,
    "training.mixed_precision": ("float32", "mixed_float16", "mixed_bfloat16"),
    "training.jit_compile": ("auto", True, False),
    "training.backup_every_steps": ranges.AT_LEAST_ONE,
    "training.selection_metric": ("bleu", "chrf", "per", "wer"),
}


def check_values(config: ExperimentConfig) -> None:
    """Checks every value against its allowed range or choices (None means unset, allowed).

    Raises:
        ConfigError: Naming the first key out of range, its value and what is allowed.
    """
    for key, limit in _LIMITS.items():
        section, name = key.split(".")
        value = getattr(getattr(config, section), name)
        if value is None:
            continue
        if isinstance(limit, ranges.Range):
            if not limit.allows(value):
                raise ConfigError(f"{value!r} is out of range; allowed: {limit}.", key)
        elif not any(value == choice and type(value) is type(choice) for choice in limit):
            allowed = ", ".join(str(choice) for choice in limit)
            raise ConfigError(f"{value!r} is not allowed; allowed: {allowed}.", key)
    longest = config.data.max_length + 2
    if config.data.tokens_per_batch < longest:
        raise ConfigError(
            f"{config.data.tokens_per_batch} cannot hold one sentence of data.max_length "
            f"{config.data.max_length} tokens plus BOS and EOS; allowed: at least {longest}.",
            "data.tokens_per_batch",
        )
    _check_data_paths(config.data)
    _check_test_references(config)


DATA_PATH_KEYS = (
    "train_source",
    "train_target",
    "dev_source",
    "dev_target",
    "test_source",
    "test_target",
    "test_references",
    "train_tsv",
    "dev_tsv",
    "test_tsv",
)
"""The `data` keys that name files (one, or a list)."""
PAIRED_KEYS = (("train_source", "train_target"), ("dev_source", "dev_target"))
"""Source and target keys whose files are read side by side for training and selection."""


def _check_data_paths(data: DataConfig) -> None:
    """Refuses `tfscones:` paths out of the package, and a source file that is its target.

    A model trained on the same file as source and target learns to copy its input: that is
    never a translation task, and always a slip of the config (the test files are left alone:
    scoring a copy against itself has uses).
    """
    for key in DATA_PATH_KEYS:
        for path in _paths(getattr(data, key)):
            try:
                data_path(path)
            except ConfigError as error:
                error.key = f"data.{key}"
                raise
    for source_key, target_key in PAIRED_KEYS:
        sources, targets = _paths(getattr(data, source_key)), _paths(getattr(data, target_key))
        for source, target in zip(sources, targets, strict=False):
            if _same_file(data_path(source), data_path(target)):
                raise ConfigError(
                    f"{target!r} is the file of data.{source_key} too: a model trained on it "
                    "learns to copy its input; give the target side's file",
                    f"data.{target_key}",
                )


def _check_test_references(config: ExperimentConfig) -> None:
    """Refuses further test references unless a list of files of a `text` test set's BLEU.

    WER and PER compare one reference, so a task chosen by them takes none.
    """
    data = config.data
    references = data.test_references
    if references is None:
        return
    if not isinstance(references, list) or not all(isinstance(r, str) for r in references):
        raise ConfigError(
            f"must be a list of file names (got {references!r}).", "data.test_references"
        )
    if data.source != "text" or not data.test_source:
        raise ConfigError(
            "needs a `source: text` test set (data.test_source and data.test_target) to add "
            f"references to; this config has source {data.source!r}"
            + ("" if data.test_source else " and no data.test_source"),
            "data.test_references",
        )
    if config.training.selection_metric in ("wer", "per"):
        raise ConfigError(
            f"WER and PER compare one reference, but training.selection_metric is "
            f"{config.training.selection_metric!r}; leave data.test_references out",
            "data.test_references",
        )


def _paths(value) -> list[str]:
    """A data key's file names: none, one, or a list."""
    if value is None:
        return []
    return [str(item) for item in value] if isinstance(value, list) else [str(value)]


def _same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one existing file (by any name or link)."""
    try:
        return first.samefile(second)
    except OSError:
        return False


def config_to_dict(config: ExperimentConfig) -> dict:
    """The config as plain data, for writing next to the run's results."""
    return dataclasses.asdict(config)
