"""What a run folder may hold when a run starts: nothing, or an earlier run of the same config.

A run started again in its folder resumes from the backup (see `training.train`); the
vocabulary, model and optimizer state it finds there must come from the same experiment.
Keys that only say how long or where to train may change on resume (`RESUMABLE_KEYS`); any
other difference is refused, naming the keys, instead of silently reusing an old `spm.model`
or failing inside Keras loading.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tfscones.run_folder import RunFolder
from tfscones.training.config import ExperimentConfig, config_to_dict, read_yaml

RESUMABLE_KEYS = frozenset(
    {
        "name",
        "output_dir",
        "data.dev_sentences",
        "data.test_source",
        "data.test_target",
        "data.test_references",
        "data.test_split",
        "data.test_sentences",
        "training.steps",
        "training.max_minutes",
        "training.strategy",
        "training.tpu",
        "training.jit_compile",
        "training.backup_every_steps",
    }
)


class RunFolderError(RuntimeError):
    """A run folder holds another experiment's files."""


def check_run_folder(config: ExperimentConfig, run_dir: Path) -> None:
    """Refuses to start in a folder that holds a run of a different config.

    Args:
        config: The experiment about to start.
        run_dir: Its run folder.

    Raises:
        RunFolderError: If the folder's `config.yaml` differs in a key outside
            `RESUMABLE_KEYS` (the message lists each with both values), if it cannot be read,
            or if the folder holds run files without a `config.yaml` (empty folders hold
            nothing).
    """
    saved_file = RunFolder(run_dir).config
    start_afresh = (
        f"resume with the same config, or start afresh in another folder "
        f"(output_dir=...) or after deleting {run_dir}."
    )
    if not saved_file.exists():
        found = [path.name for path in RunFolder(run_dir).training_files() if _holds_a_file(path)]
        if found:
            raise RunFolderError(
                f"{run_dir} holds {', '.join(found)} of a run without its config.yaml; "
                + start_afresh
            )
        return
    try:
        saved = read_yaml(saved_file.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as error:
        raise RunFolderError(f"cannot read {saved_file} ({error}); {start_afresh}") from None
    differences = [
        f"{key}: {before!r} there, {after!r} now"
        for key, (before, after) in sorted(
            config_differences(with_defaults(saved), config_to_dict(config)).items()
        )
        if key not in RESUMABLE_KEYS
    ]
    if differences:
        raise RunFolderError(
            f"{run_dir} holds a run of another config ({'; '.join(differences)}); " + start_afresh
        )


def with_defaults(saved: dict | None) -> dict:
    """A saved config with the keys it lacks set to their defaults.

    A run folder written before a key existed (`data.vocabulary`, say) holds that key's
    behaviour then, its default: the run resumes unless the config now sets another value.
    """
    merged = config_to_dict(ExperimentConfig())
    for section, values in (saved or {}).items():
        if isinstance(values, dict) and isinstance(merged.get(section), dict):
            merged[section] = {**merged[section], **values}
        else:
            merged[section] = values
    return merged


def _holds_a_file(path: Path) -> bool:
    """Whether `path` is a file, or a folder with a file somewhere below it (empty ones are not)."""
    return path.is_file() or (path.is_dir() and any(p.is_file() for p in path.rglob("*")))


def config_differences(before: dict, after: dict) -> dict:
    """`{"section.key": (before's, after's)}` of every setting two config dicts differ in."""
    return _differences(_flat(before), _flat(after))


def _flat(config: dict, prefix: str = "") -> dict:
    """`{"section.key": value}` of a config dict's sections (values that are dicts stay whole)."""
    flat = {}
    for key, value in (config or {}).items():
        if isinstance(value, dict) and not prefix:
            flat.update(_flat(value, f"{key}."))
        else:
            flat[prefix + key] = value
    return flat


def _differences(before: dict, after: dict) -> dict:
    keys = set(before) | set(after)
    return {
        key: (before.get(key), after.get(key)) for key in keys if before.get(key) != after.get(key)
    }
