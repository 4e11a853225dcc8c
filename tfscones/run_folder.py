"""A training run's folder: the one place that names what it holds.

`tfscones train` writes a run folder; decoding, export, analysis and the reproduction read it.
Every one of them asks a `RunFolder` for a file's path instead of spelling its name:

    run = RunFolder("runs/demo-scones")
    run.check_decodable()             # model.keras and spm.model are there
    model, tokenizer = load_model(run.model), Tokenizer.from_file(run.tokenizer)

The folder holds:

    config.yaml                 the experiment's config, every default filled in
    spm.model, spm.vocab        the joint SentencePiece vocabulary (prefix `spm`), or
    symbols.json                a symbol vocabulary (characters, labels, language tags)
    model.keras                 the model of the best dev BLEU so far (or the averaged one)
    checkpoints/last.keras      the last epoch's model; checkpoints/ also keeps epochs to average
    backup/                     the step backup a killed run resumes from
    logs/                       TensorBoard logs
    history.csv                 one row of losses and dev BLEU per epoch
    results.json                steps, best dev BLEU, test BLEU and chrF, machine, minutes
    test.hyp                    the test set's greedy translations
    evaluation.json, analysis.json   what `tfscones reproduce` adds (beam BLEU, analysis tables)
    .lock                       held by the process writing the run (`RunFolder.hold`)

A run folder is one process's at a time: `tfscones train` holds it (`RunFolder.hold`) from
before it reads the folder until it has written its results, and a second process that asks
for it is refused at once with `RunFolderBusy`. The hold is an advisory `flock` on `.lock`,
which the kernel releases when the holder exits, however it exits: a run killed with SIGKILL
leaves no stale lock, and starting it again resumes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path, PurePath


class RunFolderBusy(RuntimeError):
    """Another process holds the run folder."""


@dataclasses.dataclass(frozen=True)
class RunFolder:
    """The paths of a training run folder's files.

    Attributes:
        path: The folder (a training config's `output_dir`).
    """

    path: Path

    def __init__(self, path: str | os.PathLike):
        object.__setattr__(self, "path", Path(path))

    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def tokenizer_prefix(self) -> Path:
        """The SentencePiece model prefix: training writes `<prefix>.model` and `.vocab`."""
        return self.path / "spm"

    @property
    def sentencepiece_model(self) -> Path:
        """The SentencePiece model file of a run with a SentencePiece vocabulary."""
        return self.path / "spm.model"

    @property
    def symbol_vocabulary(self) -> Path:
        """The vocabulary file of a run with a symbol vocabulary (`data.vocabulary: symbols`)."""
        return self.path / "symbols.json"

    @property
    def tokenizer(self) -> Path:
        """The run's vocabulary file: `symbols.json` where it has one, else `spm.model`.

        `tfscones.data.load_tokenizer` reads either.
        """
        if self.symbol_vocabulary.is_file():
            return self.symbol_vocabulary
        return self.sentencepiece_model

    @property
    def model(self) -> Path:
        """The best (or averaged) model, what decoding and export read."""
        return self.path / "model.keras"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def last_checkpoint(self) -> Path:
        """The last epoch's model, optimizer state included."""
        return self.checkpoints / "last.keras"

    @property
    def backup(self) -> Path:
        """The step backup's folder."""
        return self.path / "backup"

    @property
    def logs(self) -> Path:
        """TensorBoard's folder."""
        return self.path / "logs"

    @property
    def history(self) -> Path:
        return self.path / "history.csv"

    @property
    def results(self) -> Path:
        return self.path / "results.json"

    @property
    def test_hypotheses(self) -> Path:
        return self.path / "test.hyp"

    @property
    def evaluation(self) -> Path:
        """Greedy and beam BLEU and chrF that `tfscones reproduce` adds."""
        return self.path / "evaluation.json"

    @property
    def analysis(self) -> Path:
        """The analysis tables that `tfscones reproduce` adds."""
        return self.path / "analysis.json"

    @property
    def lock(self) -> Path:
        """The file whose `flock` says which process holds the folder."""
        return self.path / ".lock"

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Holds the folder for this process until the block ends (it must exist).

        Raises:
            RunFolderBusy: At once, if another process holds it, naming that process's id.
        """
        with self.lock.open("a+", encoding="utf-8") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                holder = lock.read().strip() or "unknown"
                raise RunFolderBusy(
                    f"{self.path} is in use by another process (pid {holder}): a run folder is "
                    "one process's at a time; wait for it to end, or give another output_dir"
                ) from None
            lock.truncate(0)
            lock.write(f"{os.getpid()}\n")
            lock.flush()
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def training_files(self) -> tuple[Path, ...]:
        """What a run leaves once it has started: a folder holding any of them holds a run."""
        return (
            self.sentencepiece_model,
            self.symbol_vocabulary,
            self.backup,
            self.checkpoints,
            self.model,
            self.history,
        )

    def check_decodable(self) -> None:
        """Checks that the folder holds what decoding needs, before anything loads.

        Raises:
            FileNotFoundError: Naming the folder and each missing file.
        """
        if not self.path.is_dir():
            raise FileNotFoundError(
                f"{self.path} is not a folder (give a training run's output_dir)"
            )
        needed = (self.model, self.tokenizer)
        missing = [path.name for path in needed if not path.is_file()]
        if missing:
            raise FileNotFoundError(
                f"{self.path} has no {' or '.join(missing)}: a training run folder holds "
                f"{' and '.join(path.name for path in needed)} once its first dev evaluation "
                "is done"
            )


def distinct_names(folders: list[str | os.PathLike]) -> list[str]:
    """A name for each run folder: its own name, with as many parents as tell it apart.

    `runs/base runs2/base runs/other` are `runs/base`, `runs2/base` and `other`: a user who
    compares two runs of one name wants both, told apart by the paths they gave.

    Raises:
        ValueError: If two of `folders` are one folder (by any name or link).
    """
    paths = [Path(folder) for folder in folders]
    seen: dict[Path, Path] = {}
    for path in paths:
        if path.resolve() in seen:
            raise ValueError(f"one folder is given twice: {seen[path.resolve()]} and {path}")
        seen[path.resolve()] = path
    depths = [1] * len(paths)
    while True:
        names = [
            str(PurePath(*path.parts[-depth:])) for path, depth in zip(paths, depths, strict=True)
        ]
        repeated = {name for name in names if names.count(name) > 1}
        if not repeated:
            return names
        depths = [depth + (name in repeated) for name, depth in zip(names, depths, strict=True)]
