"""Synthetic corpora: the sources of each split, each beside targets sampled at a temperature.

    targets = write_corpus(parameters, {"train": sources, "test": test_sources}, 0.5, out, seed=0)

For a temperature γ, `OUT/gamma-<γ>/<split>.src` holds the split's sources as given and
`<split>.tgt` one translation of each, sampled from IBM-3 at γ (`synthesize`): Stahlberg &
Kumar (2022, §5 and Appendix B) train on such pairs and take the samples of the test sources as
the references. With `test_references=N`, the test sources get N - 1 further samples
(`test.2.tgt`, ...: `reference_files`), so that BLEU can count every n-gram some sample of the
same distribution holds, where one sample of a high γ shares few with any translation. Each
split, and each further reference, has a seed of its own (`SPLIT_SEEDS`), so adding one never
changes another's samples; every file is written aside and renamed into place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tfscones.data.text_lines import write_lines
from tfscones.ranges import AT_LEAST_ONE
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


def reference_files(out: str | Path, temperature: float, count: int) -> list[Path]:
    """The test set's `count` reference files: `test.tgt`, then `test.2.tgt`, `test.3.tgt`, ..."""
    first = corpus_files(out, temperature, "test")[1]
    return [first] + [first.with_suffix(f".{number}.tgt") for number in range(2, count + 1)]


def write_corpus(
    parameters: IBM3Parameters,
    splits: Mapping[str, Sequence[str]],
    temperature: float,
    out: str | Path,
    seed: int,
    test_references: int = 1,
) -> dict[str, list[str]]:
    """Samples and writes one temperature's corpus.

    Args:
        parameters: The estimated IBM-3.
        splits: The source sentences of each split (`train`, `dev`, `test`: `SPLIT_SEEDS`).
        temperature: γ of eq. 10, finite and > 0.
        out: The folder of every temperature's corpus.
        seed: The corpus seed; each split samples with `(seed, SPLIT_SEEDS[split])`, the test
            set's reference k > 1 with `(seed, SPLIT_SEEDS["test"], k)`.
        test_references: How many samples of each test source to write (`reference_files`).

    Returns:
        The sampled targets of each split; `test` holds the first reference, and
        `test.<k>` the k-th (k > 1).

    Raises:
        ValueError: On a bad temperature or count, or a source sentence without words.
    """
    AT_LEAST_ONE.check("test_references", test_references)
    targets = {}
    for split, sources in splits.items():
        targets[split] = synthesize(parameters, sources, temperature, (seed, SPLIT_SEEDS[split]))
    for number in range(2, test_references + 1 if "test" in splits else 2):
        targets[f"test.{number}"] = synthesize(
            parameters, splits["test"], temperature, (seed, SPLIT_SEEDS["test"], number)
        )
    for split, sources in splits.items():
        source_file, target_file = corpus_files(out, temperature, split)
        source_file.parent.mkdir(parents=True, exist_ok=True)
        write_lines(source_file, sources)
        write_lines(target_file, targets[split])
    if "test" in splits:
        further = reference_files(out, temperature, test_references)[1:]
        for number, path in enumerate(further, start=2):
            write_lines(path, targets[f"test.{number}"])
    return targets


def corpus_statistics(sentences: Sequence[str]) -> dict[str, float | int]:
    """`mean_length` in whitespace words a sentence, and `types`: the distinct words."""
    words = [sentence.split() for sentence in sentences]
    return {
        "mean_length": sum(map(len, words)) / len(words),
        "types": len({word for line in words for word in line}),
    }
