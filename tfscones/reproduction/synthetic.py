"""The synthetic plan's corpora: IBM-3 estimated once, one corpus sampled at each temperature γ.

Stahlberg & Kumar (2022, §5) estimated IBM-3 on WMT German-English and sampled English-like
targets for the German sources at temperatures γ. The plan does the same on the bundled Tatoeba
German-English corpus (`CORPUS`): German to English as in the paper, small enough that a tiny
Transformer learns it in minutes on one core, and shipped with the package, so the plan needs
no data folder. Its training pairs estimate the model (`tfscones.synthetic.estimate_ibm3`); its
train and dev sources each get one target sampled at every γ of `SYNTHETIC_TEMPERATURES`, its
test sources `SYNTHETIC_REFERENCES` samples, the references.

    prepare_corpora(out_dir)  # OUT/synthetic/: ibm3/, gamma-<γ>/{train,dev,test}.{src,tgt}

`OUT/synthetic/corpora.json` is written last, with the settings and, per γ, the sampled
training targets' length and types, the tempered tables' entropies and `sample_bleu`: the BLEU
of one further sample of each test source against the references, what IBM-3 itself scores.
The corpora are sampled again only when it is missing, its settings differ, or a corpus file
is gone (the corpora are not committed; sampled again with the same seed, they are the same).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from tfscones import synthetic as ibm3
from tfscones.data import read_sentence_pairs
from tfscones.evaluation.metrics import corpus_bleu
from tfscones.reproduction.plans import (
    SYNTHETIC_FOLDER,
    SYNTHETIC_REFERENCES,
    SYNTHETIC_TEMPERATURES,
)
from tfscones.reproduction.run_outputs import SYNTHETIC_CORPORA, read_json
from tfscones.synthetic.corpora import (
    SPLIT_SEEDS,
    corpus_files,
    corpus_statistics,
    reference_files,
    write_corpus,
)
from tfscones.training.config import data_path
from tfscones.written_aside import write_text_aside

CORPUS = {
    "train": ("tfscones:data/demo/train.de", "tfscones:data/demo/train.en"),
    "dev": ("tfscones:data/demo/dev.de", "tfscones:data/demo/dev.en"),
    "test": ("tfscones:data/demo/test.de", "tfscones:data/demo/test.en"),
}
CORPUS_SEED = 0
EM_ITERATIONS = 5
CORPORA_FILE = "corpora.json"
ENTROPIES = ("t_entropy", "n_entropy", "d_entropy")
MODEL_SIZES = ("source_vocabulary", "target_vocabulary", "t_entries", "p1")


def corpora_dir(out_dir: Path) -> Path:
    """The folder of the plan's corpora and IBM-3: `OUT/synthetic`."""
    return Path(out_dir) / SYNTHETIC_FOLDER


def corpora_settings(temperatures: Sequence[float]) -> dict:
    """What the corpora are made from and how, as `corpora.json` records it."""
    return {
        "corpus": {split: list(files) for split, files in CORPUS.items()},
        "temperatures": [float(gamma) for gamma in temperatures],
        "seed": CORPUS_SEED,
        "em_iterations": EM_ITERATIONS,
        "test_references": SYNTHETIC_REFERENCES,
    }


def read_corpora(out_dir: Path) -> dict | None:
    """`OUT/synthetic/corpora.json`, or None if there is none.

    Raises:
        tfscones.reproduction.run_outputs.RunOutputError: If it is damaged, naming the field.
    """
    return read_json(corpora_dir(out_dir) / CORPORA_FILE, SYNTHETIC_CORPORA)


def corpora_ready(out_dir: Path, temperatures: Sequence[float]) -> bool:
    """Whether the corpora of these settings are all there."""
    record = read_corpora(out_dir)
    folder = corpora_dir(out_dir)
    files = [
        path
        for gamma in temperatures
        for split in CORPUS
        for path in corpus_files(folder, gamma, split)
    ]
    files += [
        path
        for gamma in temperatures
        for path in reference_files(folder, gamma, SYNTHETIC_REFERENCES)
    ]
    return (
        record is not None
        and record["settings"] == corpora_settings(temperatures)
        and all(path.is_file() for path in files)
    )


def prepare_corpora(
    out_dir: Path, temperatures: Sequence[float] = SYNTHETIC_TEMPERATURES
) -> list[str]:
    """Estimates IBM-3 and samples every temperature's corpus, unless they are ready.

    Args:
        out_dir: The reproduction folder; the corpora go into `OUT/synthetic`.
        temperatures: The γ to sample a corpus at.

    Returns:
        What was done: `sampled synthetic corpora γ=0.1, ...`, or nothing.
    """
    if corpora_ready(out_dir, temperatures):
        return []
    folder = corpora_dir(out_dir)
    sources, targets = read_sentence_pairs(*map(data_path, CORPUS["train"]))
    started = time.monotonic()
    parameters = ibm3.estimate_ibm3(
        sources, targets, ibm3.EstimationOptions(em_iterations=EM_ITERATIONS)
    )
    seconds = time.monotonic() - started
    parameters.save(folder / "ibm3")
    splits = {"train": sources}
    for split in ("dev", "test"):
        splits[split] = read_sentence_pairs(*map(data_path, CORPUS[split]))[0]
    statistics = {}
    for gamma in temperatures:
        sampled = write_corpus(parameters, splits, gamma, folder, CORPUS_SEED, SYNTHETIC_REFERENCES)
        statistics[str(float(gamma))] = {
            **corpus_statistics(sampled["train"]),
            **{name: parameters.summary(gamma)[name] for name in ENTROPIES},
            "sample_bleu": _sample_bleu(parameters, splits["test"], gamma, sampled),
        }
    record = {
        "settings": corpora_settings(temperatures),
        "estimation_seconds": seconds,
        "model": {name: parameters.summary()[name] for name in MODEL_SIZES},
        "original_targets": corpus_statistics(targets),
        "temperatures": statistics,
    }
    write_text_aside(folder / CORPORA_FILE, json.dumps(record, indent=1) + "\n")
    return [f"sampled synthetic corpora γ={', '.join(f'{g:g}' for g in temperatures)}"]


def _sample_bleu(parameters, sources: list[str], gamma: float, sampled: dict) -> float:
    """BLEU of one further IBM-3 sample of each test source against the sampled references."""
    seed = (CORPUS_SEED, SPLIT_SEEDS["test"], SYNTHETIC_REFERENCES + 1)
    sample = ibm3.synthesize(parameters, sources, gamma, seed)
    streams = [sampled["test"]]
    streams += [sampled[f"test.{number}"] for number in range(2, SYNTHETIC_REFERENCES + 1)]
    return corpus_bleu(sample, streams).score
