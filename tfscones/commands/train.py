"""Train one experiment: `tfscones train --config demo_softmax [section.key=value ...]`.

`--config` takes a YAML file, or the name of a config shipped with the package (`tfscones train
--list-configs` lists them). `python -m training.train` is the same command. What a run writes
is described in `tfscones.training.runner`.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from tfscones.commands import INTERRUPTED
from tfscones.data import ParallelTextError, VocabularyError
from tfscones.data.text_lines import TextLineError
from tfscones.run_folder import RunFolder, RunFolderBusy
from tfscones.training import runner
from tfscones.training.callbacks import BackupError, backed_up_step
from tfscones.training.config import ConfigError, load_config, locate, shipped_configs
from tfscones.training.resume_check import RunFolderError
from tfscones.written_aside import FULL_DISK_ERRORS


def parse_arguments(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    """Command-line arguments: `--config FILE_OR_NAME [--config ...] [section.key=value ...]`."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", action="append", help="YAML config file, or a shipped config's name"
    )
    parser.add_argument(
        "--list-configs", action="store_true", help="list the shipped configs and stop"
    )
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides")
    arguments = parser.parse_args(argv)
    if not arguments.config and not arguments.list_configs:
        parser.error("give --config FILE_OR_NAME (--list-configs lists the shipped ones)")
    return arguments


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Entry point of `tfscones train` and `python -m training.train`."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    arguments = parse_arguments(argv, prog)
    if arguments.list_configs:
        print("\n".join(sorted(shipped_configs())))
        return
    config = None
    try:
        config = load_config(arguments.config, arguments.overrides)
        results = runner.train(config)
    except KeyboardInterrupt:
        print(interrupted_message(config and config.run_dir), file=sys.stderr)
        raise SystemExit(INTERRUPTED) from None
    except BackupError as error:
        raise SystemExit(f"run folder error: {error}") from None
    except OSError as error:
        if error.errno not in FULL_DISK_ERRORS:
            raise
        hint = f"; {resume_hint(config.run_dir)}" if config else ""
        raise SystemExit(f"disk error: {error}{hint}") from None
    except ConfigError as error:
        located = locate(error, arguments.config, arguments.overrides)
        raise SystemExit(f"config error: {located}") from None
    except (RunFolderError, RunFolderBusy) as error:
        raise SystemExit(f"run folder error: {error}") from None
    except (ParallelTextError, TextLineError, VocabularyError, FileNotFoundError) as error:
        raise SystemExit(f"data error: {error}") from None
    print(json.dumps(results, indent=2))


def interrupted_message(run_dir: Path | None) -> str:
    """What a user who pressed Ctrl-C needs: where the last backup is and how to resume."""
    if run_dir is None:
        return "interrupted before training started."
    return f"interrupted: {resume_hint(run_dir)}"


def resume_hint(run_dir: Path) -> str:
    """Where a stopped run's last backup is and that the same command resumes from it."""
    backup = RunFolder(run_dir).backup
    try:
        step = backed_up_step(backup)
    except BackupError as error:
        return str(error)
    if step is None:
        return f"nothing in {run_dir} to resume from (no backup was written yet)."
    return f"the last backup is at step {step:,} in {backup}; the same command resumes from it."
