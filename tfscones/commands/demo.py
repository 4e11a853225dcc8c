"""The demo: train softmax and SCONES on the bundled Tatoeba corpus, compare, translate, export.

    tfscones demo [--minutes 7] [--output-dir runs] [--one-after-another]

(`python -m training.demo` is the same command.)

Each model (German -> English, the `demo` configs) trains for the given wall-clock minutes on
the bundled corpus (61,375 Tatoeba sentence pairs), its learning rate warming up and decaying to
zero within that budget. On a machine without a GPU the two models train side by side, each in
its own process on half the CPU cores: small models use a CPU's cores better that way than one
after another with all of them (`--one-after-another` does the latter; a GPU machine always
does). A progress line per model shows its step, loss, learning rate, last dev BLEU and the time
left. The program then prints a table of steps, dev BLEU and greedy and beam-4 test BLEU of both
and the greedy BLEU their step counts should give (measured with fixed step budgets,
`tfscones.reproduction.demo_expectations`), exports the SCONES model as a SavedModel
(`runs/exports/demo-scones-a0.5/N`, the next free version), loads it back with
`tf.saved_model.load`, and prints a few test sentences translated by each model and by the
SavedModel's `translate` (greedy) and `translate_beam` (beam 4) signatures: the SavedModel that
`export/serving/README.md` puts behind TF Serving.

The demo starts its two runs afresh in folders it creates, and deletes nothing: the first time
in `runs/demo-softmax` and `runs/demo-scones-a0.5`, then, while those hold an earlier demo's
runs, in the first free numbered pair (`runs/demo-softmax-2` and `runs/demo-scones-a0.5-2`, ...);
it says which. `tfscones translate --run runs/demo-scones-a0.5 [--search beam]` translates with
a trained model afterwards (the demo prints the command with its folder).
"""

from __future__ import annotations

import argparse
import io
import itertools
import logging
import multiprocessing
import os
import queue
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import TextIO

import tensorflow as tf

from tfscones.data.text_lines import read_lines
from tfscones.decoding import Search, translate
from tfscones.evaluation import metrics
from tfscones.models import load_run
from tfscones.reproduction.demo_expectations import describe_expectation, read_expectations
from tfscones.serving.export import ExportSettings, export_run
from tfscones.training.config import ConfigError, ExperimentConfig, data_path, load_config
from tfscones.training.runner import check_config, train
from tfscones.written_aside import check_folder

MODELS = {"softmax": "demo_softmax", "SCONES α=0.5": "demo_scones_a0.5"}
EXPORTED = "SCONES α=0.5"
EXAMPLES = 6
LOG_SECONDS = 30.0


def minutes_and_seconds(elapsed: float) -> str:
    """`elapsed` seconds as "M min S s", rounded to the second (479.6 s is "8 min 0 s")."""
    minutes, seconds = divmod(round(elapsed), 60)
    return f"{minutes} min {seconds} s"


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Entry point of `tfscones demo` and `python -m training.demo`."""
    arguments = parse_demo_arguments(argv, prog)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    started = time.monotonic()
    try:
        configs = demo_configs(arguments)
    except ConfigError as error:
        raise SystemExit(f"config error: {error}") from None
    side_by_side = not arguments.one_after_another and not tf.config.list_physical_devices("GPU")
    print(
        f"tfscones demo: German -> English on the bundled Tatoeba corpus (61,375 sentence pairs);"
        f" softmax and SCONES train {arguments.minutes:g} minutes each, "
        f"{'side by side' if side_by_side else 'one after the other'}.",
        flush=True,
    )
    claim_run_folders(configs)
    if side_by_side:
        results = train_side_by_side(configs)
    else:
        results = train_one_after_another(configs)
    print_results(results)
    models = {label: load_run(config.run_dir) for label, config in configs.items()}
    sources, references = test_set(configs[EXPORTED])
    print_examples(models, configs[EXPORTED].run_dir, sources[:EXAMPLES], references[:EXAMPLES])
    print(f"\nThe demo took {minutes_and_seconds(time.monotonic() - started)}.")
    arguments = " ".join(translate_arguments(configs[EXPORTED].run_dir))
    print(
        f"Translate your own sentences: {tfscones_command()} translate {arguments} < sentences.de"
    )


def translate_arguments(run_dir: Path) -> list[str]:
    """The `tfscones translate` arguments the demo suggests: beam 4 with the run's model."""
    return ["--run", str(run_dir), "--search", "beam", "--beam", "4"]


def tfscones_command() -> str:
    """How to call the `tfscones` command from here: its name if the shell finds this one."""
    script = Path(sys.executable).parent / "tfscones"
    if not script.exists():
        return f"{sys.executable} -m tfscones"
    if shutil.which("tfscones") == str(script):
        return "tfscones"
    return os.path.relpath(script)


def parse_demo_arguments(argv: list[str] | None, prog: str | None = None) -> argparse.Namespace:
    """The demo's command line."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=7.0, help="training budget per model")
    parser.add_argument("--output-dir", type=Path, default=Path("runs"))
    parser.add_argument(
        "--one-after-another",
        action="store_true",
        help="train the models one after the other, each with all cores",
    )
    parser.add_argument(
        "--override", action="append", default=[], help="section.key=value for both configs"
    )
    arguments = parser.parse_args(argv)
    try:
        check_folder(arguments.output_dir, f"--output-dir {arguments.output_dir}")
    except OSError as error:
        parser.error(str(error))
    return arguments


def demo_configs(arguments: argparse.Namespace) -> dict[str, ExperimentConfig]:
    """The demo's configs by label, with the time budget and overrides applied.

    Raises:
        ConfigError: If `--minutes` or an override is out of range, an override sets a run's
            name or folder (the demo names its two runs; `--output-dir` chooses where), or a
            config is refused.
    """
    for override in arguments.override:
        key = override.split("=", 1)[0].strip()
        if key in ("name", "output_dir"):
            raise ConfigError(
                "the demo names its two runs itself; give --output-dir to choose where they go",
                key,
                "--override",
            )
    configs = {}
    for label, config_name in MODELS.items():
        overrides = [f"training.max_minutes={arguments.minutes}", *arguments.override]
        config = load_config(config_name, overrides)
        config.output_dir = str(arguments.output_dir / config.name)
        check_config(config)
        configs[label] = config
    return configs


def claim_run_folders(configs: dict[str, ExperimentConfig]) -> None:
    """Points each config at a run folder this call creates, so the demo never deletes a file.

    The configs' own folders are used if none of them exists; otherwise the first numbered set
    (`NAME-2`, `NAME-3`, ...) none of whose folders exists. A set is claimed by creating its
    folders, so two demos started at once never share one.
    """
    bases = {label: Path(config.output_dir) for label, config in configs.items()}
    for number in itertools.count(1):
        suffix = "" if number == 1 else f"-{number}"
        folders = {label: base.with_name(base.name + suffix) for label, base in bases.items()}
        if _create_all(list(folders.values())):
            break
    for label, folder in folders.items():
        configs[label].output_dir = str(folder)
    if suffix:
        print(
            f"{', '.join(str(base) for base in bases.values())} hold earlier runs (the demo "
            f"deletes nothing): training in {', '.join(str(f) for f in folders.values())}.",
            flush=True,
        )


def _create_all(folders: list[Path]) -> bool:
    """Creates every folder, or none: False (leaving nothing made here) if any exists."""
    made = []
    for folder in folders:
        try:
            folder.mkdir(parents=True)
        except FileExistsError:
            for own in made:
                own.rmdir()
            return False
        made.append(folder)
    return True


def train_and_score(config: ExperimentConfig, progress: TextIO | None = None) -> dict:
    """Trains one demo model; its results with the beam-4 BLEU of its best model on test."""
    results = train(config, progress)
    model, tokenizer = load_run(config.run_dir)
    sources, references = test_set(config)
    search = Search("beam", beam_size=4)
    hypotheses = translate(model, tokenizer, sources, search=search, long_sources="translate")
    results["test_beam_bleu"] = metrics.corpus_bleu(hypotheses, references).score
    return results


def train_one_after_another(configs: dict[str, ExperimentConfig]) -> dict[str, dict]:
    """Trains the models in turn in this process, each with all cores."""
    results = {}
    for number, (label, config) in enumerate(configs.items(), start=1):
        print(f"\n[{number}/{len(configs)}] training {label} in {config.run_dir}", flush=True)
        results[label] = train_and_score(config)
    return results


def train_side_by_side(configs: dict[str, ExperimentConfig]) -> dict[str, dict]:
    """Trains the models at once, each in a child process with its share of the cores.

    Raises:
        RuntimeError: if a child fails (with its traceback) or dies without a result.
    """
    shares = core_shares(sorted(os.sched_getaffinity(0)), len(configs))
    print(f"\nTraining in {', '.join(str(c.run_dir) for c in configs.values())}:", flush=True)
    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    children = {
        label: context.Process(
            target=train_in_child, args=(label, config, cores, messages), daemon=True
        )
        for (label, config), cores in zip(configs.items(), shares, strict=True)
    }
    for child in children.values():
        child.start()
    display = ProgressDisplay(list(configs), sys.stdout)
    results = {}
    while len(results) < len(children):
        try:
            kind, label, payload = messages.get(timeout=5.0)
        except queue.Empty:
            check_children_alive(children, results)
            continue
        if kind == "failed":
            raise RuntimeError(f"training {label} failed:\n{payload}")
        if kind == "done":
            results[label] = payload
            payload = (
                f"done: {payload['steps']:,} steps, best dev BLEU {payload['best_dev_bleu']:.1f}"
            )
        display.update(label, payload, force=kind == "done")
    for child in children.values():
        child.join()
    return {label: results[label] for label in configs}


def check_children_alive(children: dict, results: dict) -> None:
    """Raises RuntimeError if a child without a result has exited."""
    for label, child in children.items():
        if label not in results and child.exitcode is not None:
            raise RuntimeError(f"training {label} ended with exit code {child.exitcode}")


def core_shares(cores: list[int], parts: int) -> list[set[int]]:
    """Splits the cores into `parts` disjoint, equal shares; with fewer cores, they share them.

    Example:
    >>> core_shares([0, 1, 2, 3], 2)
    [{0, 1}, {2, 3}]
    """
    if len(cores) < parts:
        return [set(cores)] * parts
    size = len(cores) // parts
    return [set(cores[part * size : (part + 1) * size]) for part in range(parts)]


def train_in_child(label: str, config: ExperimentConfig, cores: set[int], messages) -> None:
    """A child process's work: trains and scores one model on its cores, reporting to `messages`.

    The child is pinned to its cores before TensorFlow starts its thread pools, one thread per
    core: two unpinned processes wander between the cores and train about 10% fewer steps.
    """
    os.sched_setaffinity(0, cores)
    tf.config.threading.set_intra_op_parallelism_threads(len(cores))
    tf.config.threading.set_inter_op_parallelism_threads(len(cores))
    try:
        results = train_and_score(config, ProgressRelay(label, messages))
    except Exception:  # noqa: BLE001 -- the parent reports it; a child has no one to raise to
        messages.put(("failed", label, traceback.format_exc()))
        return
    messages.put(("done", label, results))


class ProgressRelay(io.TextIOBase):
    """A stream that passes each progress line a child's training writes to the parent.

    It says it is a terminal, so `ProgressLine` redraws often; the parent decides what to show.
    """

    def __init__(self, label: str, messages):
        super().__init__()
        self.label = label
        self.messages = messages

    def isatty(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        line = text.replace("\r\033[K", "").strip()
        if line:
            self.messages.put(("progress", self.label, line))
        return len(text)


class ProgressDisplay:
    """The latest progress line of each model, redrawn as a block on a terminal.

    Elsewhere (a log, CI) the block is written when it first has a line and then every
    `LOG_SECONDS`; a model's first line and a forced one (its end) are written as they come,
    and a line already written (a finished model's) is not written again.
    """

    STARTING = "starting"

    def __init__(self, labels: list[str], stream: TextIO):
        self.lines = dict.fromkeys(labels, self.STARTING)
        self.stream = stream
        self.interactive = stream.isatty()
        self.width = max(len(label) for label in labels)
        self.drawn = 0
        self.last_written = -LOG_SECONDS
        self.written = dict.fromkeys(labels)

    def update(self, label: str, line: str, force: bool = False) -> None:
        """Takes a model's latest line; shows the block if due."""
        force = force or self.lines[label] == self.STARTING
        self.lines[label] = line
        if self.interactive or time.monotonic() - self.last_written >= LOG_SECONDS:
            self._show()
        elif force:
            self._write(label, line)
            self.stream.flush()

    def _show(self) -> None:
        self.last_written = time.monotonic()
        if self.interactive and self.drawn:
            self.stream.write(f"\033[{self.drawn}F")
        for label, line in self.lines.items():
            if self.interactive:
                self.stream.write(f"\033[K{label:<{self.width}}  {line}\n")
            elif line != self.written[label]:
                self._write(label, line)
        self.drawn = len(self.lines)
        self.stream.flush()

    def _write(self, label: str, line: str) -> None:
        self.stream.write(f"{label:<{self.width}}  {line}\n")
        self.written[label] = line


def print_results(results: dict[str, dict]) -> None:
    """The results table: steps, minutes, dev BLEU, greedy and beam-4 test BLEU."""
    print("\nBLEU on the demo test set (1,000 Tatoeba sentences, sacrebleu):\n")
    print(f"| {'model':<13} | steps | minutes | dev greedy | test greedy | test beam 4 |")
    print(f"|{'-' * 15}|-------|---------|------------|-------------|-------------|")
    for label, result in results.items():
        print(
            f"| {label:<13} | {result['steps']:>5,} | {result['train_minutes']:>7.1f} | "
            f"{result['best_dev_bleu']:>10.1f} | {result['test_bleu']:>11.1f} | "
            f"{result['test_beam_bleu']:>11.1f} |"
        )
    print_expectations(results)


def print_expectations(results: dict[str, dict]) -> None:
    """What greedy test BLEU each model's step count should give, from step-bounded runs."""
    expectations = read_expectations()
    width = max(len(label) for label in results)
    print(
        "\nExpected greedy test BLEU at these step counts (the same configs trained for fixed "
        "step budgets,\nseed 1, `tfscones reproduce demo`; runs of one config differ by about "
        "1.5 BLEU):"
    )
    for label, result in results.items():
        points = expectations[MODELS[label]]
        print(
            f"  {label:<{width}}  {result['steps']:>5,} steps: "
            f"{describe_expectation(points, result['steps'])}"
        )
    print(
        "A slower machine trains fewer steps in the same minutes, and fewer steps give less BLEU:"
        "\ncompare at equal steps, or train longer with --minutes."
    )


def print_examples(models: dict[str, tuple], exported_run: Path, sources, references) -> None:
    """Test sentences translated by each model and by `exported_run`'s SavedModel."""
    translations = {
        f"{label} (greedy)": translate(model, tokenizer, sources)
        for label, (model, tokenizer) in models.items()
    }
    translations.update(translate_with_savedmodel(exported_run, sources))
    width = max(len(label) for label in translations)
    for index, source in enumerate(sources):
        print(f"\n{'source':<{width}}  {source}\n{'reference':<{width}}  {references[index]}")
        for label, outputs in translations.items():
            print(f"{label:<{width}}  {outputs[index]}")


def translate_with_savedmodel(run_dir: Path, sources: list[str]) -> dict[str, list[str]]:
    """Exports a run as the next SavedModel version; translates through the loaded export."""
    base = run_dir.parent / "exports" / run_dir.name
    versions = [int(p.name) for p in base.glob("*") if p.name.isdigit()]
    out = base / str(max(versions, default=0) + 1)
    export_run(out, run=run_dir, settings=ExportSettings())
    print(f"\nExported {run_dir.name} to {out}; translating through the loaded SavedModel.")
    loaded = tf.saved_model.load(str(out))
    source = tf.constant(sources)
    return {
        f"SavedModel ({name})": [
            text.decode("utf-8")
            for text in loaded.signatures[name](source=source)["translations"].numpy()
        ]
        for name in ("translate", "translate_beam")
    }


def test_set(config: ExperimentConfig) -> tuple[list[str], list[str]]:
    """The config's test sources and references."""
    data = config.data
    return read_lines(data_path(data.test_source)), read_lines(data_path(data.test_target))
