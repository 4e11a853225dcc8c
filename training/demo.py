"""The demo: train softmax and SCONES on the bundled Tatoeba corpus, compare, translate, export.

    python -m training.demo [--minutes 4] [--output-dir runs]

Each model (German -> English, the `demo` configs) trains for the given wall-clock minutes on
the bundled corpus (61,375 Tatoeba sentence pairs), its learning rate warming up and decaying to
zero within that budget. The program then prints a table of steps, dev BLEU and greedy and beam-4
test BLEU of both, exports the SCONES model as a SavedModel (`runs/exports/demo-scones-a0.5/N`,
the next free version), loads it back with `tf.saved_model.load`, and prints a few test sentences
translated by each model and by the SavedModel's `translate` (greedy) and `translate_beam`
(beam 4) signatures: the SavedModel that `export/serving/README.md` puts behind TF Serving.

The demo starts its two runs afresh (it deletes `runs/demo-softmax` and `runs/demo-scones-a0.5`
first); `python -m training.translate --run runs/demo-scones-a0.5 [--beam 4]` translates with a
trained model afterwards.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from pathlib import Path

import tensorflow as tf

from export.savedmodel import export, parse_arguments
from tfscones import metrics
from tfscones.data import Tokenizer
from tfscones.decoding import Search, translate
from tfscones.models import load_model
from training.config import load_config
from training.train import run

CONFIGS = Path(__file__).resolve().parent / "configs"
MODELS = {"softmax": "demo_softmax.yaml", "SCONES α=0.5": "demo_scones_a0.5.yaml"}
EXPORTED = "SCONES α=0.5"
EXAMPLES = 6


def main(argv: list[str] | None = None) -> None:
    """Entry point of `python -m training.demo`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=4.0, help="training budget per model")
    parser.add_argument("--output-dir", type=Path, default=Path("runs"))
    parser.add_argument(
        "--override", action="append", default=[], help="section.key=value for both configs"
    )
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    started = time.monotonic()
    print(
        f"tfscones demo: German -> English on the bundled Tatoeba corpus; softmax and SCONES "
        f"train {arguments.minutes:g} minutes each.",
        flush=True,
    )
    configs = {}
    for label, config_name in MODELS.items():
        overrides = [f"training.max_minutes={arguments.minutes}", *arguments.override]
        configs[label] = load_config(CONFIGS / config_name, overrides)
        configs[label].output_dir = str(arguments.output_dir / configs[label].name)
    results = {}
    for number, (label, config) in enumerate(configs.items(), start=1):
        shutil.rmtree(config.run_dir, ignore_errors=True)
        print(f"\n[{number}/{len(MODELS)}] training {label} in {config.run_dir}", flush=True)
        results[label] = run(config)
    models = {label: load_run(config.run_dir) for label, config in configs.items()}
    sources = read_lines(Path(configs[EXPORTED].data.test_source))
    references = read_lines(Path(configs[EXPORTED].data.test_target))
    print_results(results, beam_bleu(models, sources, references))
    print_examples(models, configs[EXPORTED].run_dir, sources[:EXAMPLES], references[:EXAMPLES])
    minutes, seconds = divmod(time.monotonic() - started, 60)
    print(f"\nThe demo took {int(minutes)} min {seconds:.0f} s.")
    print(
        "Translate your own sentences: python -m training.translate "
        f"--run {configs[EXPORTED].run_dir} --beam 4 < sentences.de"
    )


def beam_bleu(models: dict[str, tuple], sources, references) -> dict[str, float]:
    """Beam-4 BLEU on the test set of each `(model, tokenizer)`."""
    scores = {}
    for label, (model, tokenizer) in models.items():
        hypotheses = translate(model, tokenizer, sources, search=Search("beam", beam_size=4))
        scores[label] = metrics.corpus_bleu(hypotheses, references).score
    return scores


def print_results(results: dict[str, dict], beam_scores: dict[str, float]) -> None:
    """The results table: steps, minutes, dev BLEU, greedy and beam-4 test BLEU."""
    print("\nBLEU on the demo test set (sacrebleu):\n")
    print(f"| {'model':<13} | steps | minutes | dev greedy | test greedy | test beam 4 |")
    print(f"|{'-' * 15}|-------|---------|------------|-------------|-------------|")
    for label, result in results.items():
        print(
            f"| {label:<13} | {result['steps']:>5} | {result['train_minutes']:>7.1f} | "
            f"{result['best_dev_bleu']:>10.1f} | {result['test_bleu']:>11.1f} | "
            f"{beam_scores[label]:>11.1f} |"
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
    export(parse_arguments(["--run", str(run_dir), "--out", str(out), "--beam-size", "4"]))
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


def load_run(run_dir: Path):
    """The best model of a run and its tokenizer."""
    return load_model(run_dir / "model.keras"), Tokenizer.from_file(run_dir / "spm.model")


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file, split at newlines only."""
    return path.read_text(encoding="utf-8").split("\n")[:-1]


if __name__ == "__main__":
    main()
