"""K translations of each source: a hard-MoE model's experts, or a decoding baseline's K best.

Shen et al. (2019), §4 compare a hard mixture of K experts, each decoded greedily, with K
translations from one plain model: K samples, K top-k samples, the K best of a beam of K and
diverse beam search with K groups of one beam. `tfscones diversity` and `tfscones reproduce moe`
score them with `tfscones.evaluation.diversity`.
"""

from __future__ import annotations

import json
from pathlib import Path

from tfscones.data.text_lines import read_lines
from tfscones.decoding import Search, translate_nbest


def baseline_searches(k: int, top_k: int, diversity_strength: float, seed: int) -> dict:
    """The decoding baselines of Shen et al. 2019, §4, each giving `k` translations a sentence."""
    return {
        "sampling": Search("sample", num_hypotheses=k, seed=seed),
        f"top-{top_k} sampling": Search("sample", num_hypotheses=k, top_k=top_k, seed=seed),
        f"beam {k}, {k}-best": Search("beam", beam_size=k, num_hypotheses=k),
        f"diverse beam ({k} groups)": Search(
            "diverse_beam",
            beam_size=k,
            num_groups=k,
            num_hypotheses=k,
            diversity_strength=diversity_strength,
        ),
    }


def k_translations(model, tokenizer, sources, search, count) -> list[list]:
    """`count` translations per source (empty strings fill slots a sparse head leaves)."""
    nbest = translate_nbest(model, tokenizer, sources, search=search)
    return [[text for text, _ in row] + [""] * (count - len(row)) for row in nbest]


def read_multiref(path: Path) -> tuple[list[str], list[list[str]]]:
    """Sources and references from JSON lines `{"src": ..., "refs": [...]}`."""
    sources, references = [], []
    for number, line in enumerate(read_lines(path), start=1):
        try:
            record = json.loads(line)
            sources.append(record["src"])
            references.append(list(record["refs"]))
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            message = f"{path}:{number}: not a JSON line with 'src' and 'refs' ({error})"
            raise ValueError(message) from None
    return sources, references


def read_references(source: Path, reference_files: list[Path]) -> tuple[list[str], list[list]]:
    """Sources and aligned reference files, one reference per file and line."""
    sources = read_lines(source)
    columns = [read_lines(path) for path in reference_files]
    for path, column in zip(reference_files, columns, strict=True):
        if len(column) != len(sources):
            raise ValueError(f"{path} has {len(column)} lines but {source} has {len(sources)}")
    return sources, [list(row) for row in zip(*columns, strict=True)]


def expert_translations(model, tokenizer, sources: list[str]) -> list[list[str]]:
    """Each expert's greedy translation of every source (Shen et al. 2019, §3.2)."""
    return k_translations(model, tokenizer, sources, Search("experts"), model.num_experts)


def baseline_translations(
    model, tokenizer, sources: list[str], k: int, top_k: int, diversity_strength: float, seed: int
) -> dict[str, list[list[str]]]:
    """K translations of every source by each decoding baseline (`baseline_searches`), by name."""
    searches = baseline_searches(k, top_k, diversity_strength, seed)
    return {
        name: k_translations(model, tokenizer, sources, search, k)
        for name, search in searches.items()
    }
