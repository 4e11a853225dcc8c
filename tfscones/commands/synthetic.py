"""Synthetic language pairs of controlled ambiguity sampled from IBM-3 (SCONES §5, Appendix B).

    tfscones synthetic --source tfscones/data/demo/train.de \
        --target tfscones/data/demo/train.en --temperatures 0.1 0.3 0.5 1.0 --out runs/synthetic \
        [--dev-source tfscones/data/demo/dev.de --test-source tfscones/data/demo/test.de] \
        [--seed 0] [--em-iterations 5]

It estimates IBM-3 once from the parallel training files (`tfscones.synthetic`), saves it to
`OUT/ibm3/`, and for every temperature γ writes `OUT/gamma-<γ>/{train,dev,test}.{src,tgt}`: the
source sentences copied, each with one target sentence sampled from the model at γ (dev and test
only when their source is given). `OUT/summary.md` has, per temperature, the sampled training
targets' mean length and type count and the mean entropies of the tempered t, n and d rows.
`tfscones reproduce synthetic` makes such corpora itself and trains on them.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from tfscones import synthetic as ibm3
from tfscones.commands.argument_types import positive_int
from tfscones.data import read_sentence_pairs
from tfscones.data.text_lines import write_lines
from tfscones.synthetic import corpora


def temperature_argument(text: str) -> float:
    """An argparse type: a temperature γ, finite and > 0."""
    try:
        return ibm3.check_temperature(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parse_arguments(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    """The command-line arguments (see the module docstring)."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="training source sentences")
    parser.add_argument("--target", type=Path, required=True, help="their translations")
    parser.add_argument("--temperatures", type=temperature_argument, nargs="+", required=True)
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--dev-source", type=Path, help="dev source sentences to translate")
    parser.add_argument("--test-source", type=Path, help="test source sentences to translate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--em-iterations", type=positive_int, default=5, help="IBM Model 1 EM iterations"
    )
    return parser.parse_args(argv)


def write_sentences(path: Path, lines: list[str]) -> Path:
    """Writes one line per sentence (`tfscones.data.text_lines`); prints and returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_lines(path, lines)
    print(path)
    return path


def summary_markdown(arguments, parameters, seconds: float, rows: list[str]) -> list[str]:
    """The lines of OUT/summary.md: how the model was estimated, a table row per temperature."""
    model = parameters.summary()
    return [
        "# IBM-3 synthetic language pairs (SCONES §5, Appendix B)",
        "",
        f"IBM-3 estimated from `{arguments.source}` / `{arguments.target}` in {seconds:.1f} s"
        f" ({arguments.em_iterations} Model 1 EM iterations); saved in `ibm3/`. Source"
        f" vocabulary {model['source_vocabulary']} (NULL and `<unk>` included), target"
        f" vocabulary {model['target_vocabulary']}, {model['t_entries']} t entries,"
        f" p1 = {model['p1']:.4f} (not tempered). Targets sampled with seed {arguments.seed}.",
        "",
        "Length (mean whitespace words a sentence) and types are of the training targets;"
        " entropies are means over rows, in bits, of the tempered tables t_γ, n_γ, d_γ"
        " (eq. 10).",
        "",
        "| γ | mean length | types | H(t_γ) | H(n_γ) | H(d_γ) |",
        "|---|---:|---:|---:|---:|---:|",
        *rows,
    ]


def write_temperature(arguments, parameters, splits: dict[str, list[str]], gamma: float) -> str:
    """Writes the corpus of one temperature; prints its files, returns its summary row."""
    targets = corpora.write_corpus(parameters, splits, gamma, arguments.out, arguments.seed)
    for split in splits:
        print("\n".join(map(str, corpora.corpus_files(arguments.out, gamma, split))))
    return table_row(str(gamma), targets["train"], parameters.summary(gamma))


def table_row(label: str, targets: list[str], entropies: dict | None = None) -> str:
    """A row of the summary table; entropies left empty without `entropies`."""
    statistics = corpora.corpus_statistics(targets)
    cells = [label, f"{statistics['mean_length']:.2f}", str(statistics["types"])]
    for name in ("t_entropy", "n_entropy", "d_entropy"):
        cells.append(f"{entropies[name]:.3f}" if entropies else "")
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Entry point of `tfscones synthetic` and `python -m training.synthetic`."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    arguments = parse_arguments(argv, prog)
    try:
        sources, targets = read_sentence_pairs(arguments.source, arguments.target)
        splits = {"train": sources}
        for split, path in (("dev", arguments.dev_source), ("test", arguments.test_source)):
            if path:
                splits[split] = read_sentence_pairs(path, path)[0]
    except (OSError, ValueError) as error:
        raise SystemExit(f"synthetic: error: {error}") from None
    started = time.monotonic()
    options = ibm3.EstimationOptions(em_iterations=arguments.em_iterations)
    parameters = ibm3.estimate_ibm3(sources, targets, options)
    seconds = time.monotonic() - started
    print(parameters.save(arguments.out / "ibm3"))
    rows = [table_row("original targets", targets)]
    rows += [write_temperature(arguments, parameters, splits, g) for g in arguments.temperatures]
    write_sentences(
        arguments.out / "summary.md", summary_markdown(arguments, parameters, seconds, rows)
    )
