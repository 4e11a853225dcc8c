"""The results page's confidence section: each head's confidence as a quality estimate.

From the confidence plan's records (`tfscones.reproduction.confidence`), per test set: how well
each unsupervised measure of each head's model predicts the sentence chrF of its own greedy
translation (Pearson and Spearman with bootstrap 95% intervals, the AUROC of flagging the worst
10%), how well it tells references from corrupted ones, and on the multi-reference set how often
both references outscore every corruption. The figures the targets read are here too
(`spearman_gain`, `interval_gap`, `corruption_auroc`, `multiref_wins`).
"""

from __future__ import annotations

from pathlib import Path

from tfscones.reproduction.confidence import read_records
from tfscones.reproduction.plans import CONFIDENCE, CONFIDENCE_HEADS

TEST_SETS = {
    "multi30k": "Multi30k test_2016_flickr (English→German)",
    "demo": "The demo corpus's Tatoeba test set (German→English)",
}
MEASURE_NAMES = {
    "log_confidence": "confidence (summed log score)",
    "normalised": "length-normalised log score",
    "mean_entropy": "mean token entropy (lower better)",
    "dropout_mean": "MC dropout mean",
    "dropout_variance": "MC dropout variance (lower better)",
}
CORRUPTION_NAMES = {
    "other_reference": "another sentence's reference",
    "without_a_content_word": "a content word removed",
    "two_words_swapped": "two words swapped",
}


def confidence_section(results_dir: Path, folder: str) -> list[str]:
    """The section's markdown lines."""
    records = read_records(results_dir)
    lines = [
        "## Confidence as a quality estimate",
        "",
        "Each head's model chosen on dev (Multi30k: the runs of the SCONES and entmax sections;",
        "the demo corpus: each head trained 6,000 steps with dropout 0.1, SCONES's α chosen on",
        "dev) scores its own greedy translations and the references, teacher-forced, by the",
        "unsupervised measures of Fomicheva et al. (2020): the summed log score (its",
        "confidence), its length-normalised form, the mean token entropy (heads whose scores",
        "are a distribution), and the mean and variance of the summed log score over Monte",
        "Carlo dropout passes. Correlations are with the sentence chrF of the greedy",
        "translation, with percentile-bootstrap 95% intervals; each measure is signed so",
        "that higher means better.",
        "",
        "```bash",
        f"tfscones reproduce {CONFIDENCE.name} --data ../shared/data --out {folder}",
        "```",
        "",
    ]
    for test_set, by_head in records.items():
        lines += _test_set_lines(test_set, by_head)
    return lines


def _test_set_lines(test_set: str, by_head: dict[str, dict | None]) -> list[str]:
    lines = [f"### {TEST_SETS[test_set]}", ""]
    measured = {head: record for head, record in by_head.items() if record is not None}
    missing = [head for head in CONFIDENCE_HEADS if head not in measured]
    if missing:
        lines += [f"Not measured yet: {', '.join(missing)}.", ""]
    if not measured:
        return lines
    lines += [
        "| head (run) | measure | Pearson [95%] | Spearman [95%] | flags the worst 10% "
        "(AUROC) | references above corruptions (AUROC) |",
        "|---|---|---|---|---|---|",
    ]
    for head, record in measured.items():
        report = record["report"]
        for name, figures in report["correlation"].items():
            lines.append(
                f"| {head} ({record['run']}) | {MEASURE_NAMES[name]} "
                f"| {_with_interval(figures['pearson'], figures['pearson_interval'])} "
                f"| {_with_interval(figures['spearman'], figures['spearman_interval'])} "
                f"| {_number(report['flagging_auroc'][name])} "
                f"| {_number(report['corruption_auroc'][name]['all'])} |"
            )
    lines += ["", *_corruption_lines(measured), *_multiref_lines(measured)]
    return lines


def _corruption_lines(measured: dict[str, dict]) -> list[str]:
    """Each head's confidence against each kind of corruption (AUROC)."""
    lines = [
        "The confidence (summed log score) of each reference against each corruption of it "
        "(AUROC; sentences, with their mean chrF of the greedy translation):",
        "",
        "| head | sentences | mean chrF | " + " | ".join(CORRUPTION_NAMES.values()) + " |",
        "|---|---|---|" + "---|" * len(CORRUPTION_NAMES),
    ]
    for head, record in measured.items():
        report = record["report"]
        by_kind = report["corruption_auroc"]["log_confidence"]
        cells = " | ".join(_number(by_kind.get(kind)) for kind in CORRUPTION_NAMES)
        lines.append(f"| {head} | {report['sentences']:,} | {report['mean_chrf']:.1f} | {cells} |")
    return lines + [""]


def _multiref_lines(measured: dict[str, dict]) -> list[str]:
    wins = {
        head: record["report"]["multiref_wins"]
        for head, record in measured.items()
        if "multiref_wins" in record["report"]
    }
    if not wins:
        return []
    return [
        "Several good translations at once: the share of the multi-reference dev set's sources "
        "whose two references both outscore every corruption of each (Stahlberg & Kumar 2022: "
        "a multi-label head need not split its belief between correct translations): "
        + "; ".join(f"{head} {share:.1%}" for head, share in wins.items())
        + ".",
        "",
    ]


def _with_interval(value: float | None, interval: list[float | None]) -> str:
    if value is None:
        return "undefined"
    low, high = (_number(end) for end in interval)
    return f"{value:.3f} [{low}, {high}]"


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def best_measure(record: dict) -> tuple[str, dict] | None:
    """The measure of a record with the highest Spearman, and its figures; None if none has one."""
    defined = {
        name: figures
        for name, figures in record["report"]["correlation"].items()
        if figures["spearman"] is not None
    }
    if not defined:
        return None
    name = max(defined, key=lambda name: defined[name]["spearman"])
    return name, defined[name]


def _best_pair(results_dir: Path, test_set: str) -> tuple[dict, dict] | None:
    """SCONES's and softmax's best measures on a test set, once both are measured."""
    records = read_records(results_dir)[test_set]
    if records["SCONES"] is None or records["softmax"] is None:
        return None
    best = best_measure(records["SCONES"]), best_measure(records["softmax"])
    return None if None in best else (best[0][1], best[1][1])


def spearman_gain(results_dir: Path, test_set: str) -> float | None:
    """SCONES's best Spearman minus softmax's best (every measure of each, MC dropout too)."""
    pair = _best_pair(results_dir, test_set)
    return pair[0]["spearman"] - pair[1]["spearman"] if pair else None


def interval_gap(results_dir: Path, test_set: str) -> float | None:
    """The lower end of SCONES's best Spearman interval minus the upper end of softmax's.

    Positive when the intervals are apart with SCONES above; None until both are measured or
    where an interval is undefined.
    """
    pair = _best_pair(results_dir, test_set)
    if pair is None or None in (pair[0]["spearman_interval"][0], pair[1]["spearman_interval"][1]):
        return None
    return pair[0]["spearman_interval"][0] - pair[1]["spearman_interval"][1]


def corruption_auroc(results_dir: Path, test_set: str) -> float | None:
    """SCONES's AUROC of references against all their corruptions by its confidence."""
    record = read_records(results_dir)[test_set]["SCONES"]
    return record["report"]["corruption_auroc"]["log_confidence"]["all"] if record else None


def multiref_wins(results_dir: Path, test_set: str = "demo") -> float | None:
    """SCONES's share of multi-reference sources whose references beat every corruption."""
    record = read_records(results_dir)[test_set]["SCONES"]
    return record["report"].get("multiref_wins") if record else None
