"""Synthetic corpora: the sources of each split, each beside one target sampled at a temperature.

    targets = write_corpus(parameters, {"train": sources, "test": test_sources}, 0.5, out, seed=0)

For a temperature γ, `OUT/gamma-<γ>/<split>.src` holds the split's sources as given and
`<split>.tgt` one translation of each, sampled from IBM-3 at γ (`synthesize`): Stahlberg &
Kumar (2022, §5 and Appendix B) train on such pairs and take the samples of the test sources as
the references. Each split has a seed of its own (`SPLIT_SEEDS`), so adding a split never
changes another's samples; every file is written aside and renamed into place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tfscones.data.text_lines import write_lines
from tfscones.synthetic.parameters import IBM3Parameters
from tfscones.synthetic.sampling import synthesize

SPLIT_SEEDS = {"train": 0, "dev": 1, "test": 2}


def corpus_folder(out: str | Path, temperature: float) -> Path:
    """The folder of one temperature's corpus: `OUT/gamma-<γ>` (`gamma-0.5`, `gamma-1.0`)."""
    return Path(out) / f"gamma-{float(temperature)}"


def corpus_files(out: str | Path, temperature: float, split: str) -> tuple[Path, Path]:
    """The source and target files of one split of one temperature's corpus."""
    folder = corpus_folder(out, temperature)
    return folder / f"{split}.src", folder / f"{split}.tgt"


def write_corpus(
    parameters: IBM3Parameters,
    splits: Mapping[str, Sequence[str]],
    temperature: float,
    out: str | Path,
    seed: int,
) -> dict[str, list[str]]:
    """Samples and writes one temperature's corpus.

    Args:
        parameters: The estimated IBM-3.
        splits: The source sentences of each split (`train`, `dev`, `test`: `SPLIT_SEEDS`).
        temperature: γ of eq. 10, finite and > 0.
        out: The folder of every temperature's corpus.
        seed: The corpus seed; each split samples with `(seed, SPLIT_SEEDS[split])`.

    Returns:
        The sampled targets of each split.

    Raises:
        ValueError: On a bad temperature or a source sentence without words.
    """
    targets = {}
    for split, sources in splits.items():
        targets[split] = synthesize(parameters, sources, temperature, (seed, SPLIT_SEEDS[split]))
    for split, sources in splits.items():
        source_file, target_file = corpus_files(out, temperature, split)
        source_file.parent.mkdir(parents=True, exist_ok=True)
        write_lines(source_file, sources)
        write_lines(target_file, targets[split])
    return targets


def corpus_statistics(sentences: Sequence[str]) -> dict[str, float | int]:
    """`mean_length` in whitespace words a sentence, and `types`: the distinct words."""
    words = [sentence.split() for sentence in sentences]
    return {
        "mean_length": sum(map(len, words)) / len(words),
        "types": len({word for line in words for word in line}),
    }
