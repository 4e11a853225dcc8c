"""The synthetic section of the results page: Stahlberg & Kumar (2022), §5, Figs. 8-9, Table 7.

The corpora each temperature γ gave (`synthetic/corpora.json`); beam-4 test BLEU against γ for
every head (Fig. 8), beside what one more IBM-3 sample of each test source scores against the
same references; exact-search BLEU minus the softmax model's beam-4 BLEU on the same
sentences at the same γ (Fig. 9); the fraction of sentences whose exact search reached the
state budget beside the paper's Table 7, and how often exact search returned the empty
translation. Each figure is the mean over the seeds a run has (two at γ =
`SYNTHETIC_SPREAD_TEMPERATURE`); the seed spread is the largest difference between those two
seeds of one head, of beam-4 BLEU for the claims on beam search and of Fig. 9's relative BLEU
for the claim on exact search, which is judged on the mean relative BLEU of each head over the
high temperatures (`HIGH_TEMPERATURES`), where the paper sees the heads apart.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tfscones.evaluation import analysis_report
from tfscones.evaluation.analysis_report import number
from tfscones.reproduction.plans import (
    SYNTHETIC,
    SYNTHETIC_CONFIGS,
    SYNTHETIC_SPREAD_TEMPERATURE,
    SYNTHETIC_TEMPERATURES,
    synthetic_run,
)
from tfscones.reproduction.records import RunRecord
from tfscones.reproduction.synthetic import CORPUS, ENTROPIES, read_corpora
from tfscones.reproduction.verdicts import NO_SPREAD, Claim, bleu_verdict, condition_verdict

SOFTMAX, LOW_ALPHA, HIGH_ALPHA = SYNTHETIC_CONFIGS
# The temperatures of Fig. 9's claim: "the translations with the global highest probability for
# high IBM-3 sampling temperatures are heavily degraded for softmax and SCONES with α = 1, the
# drop is much less dramatic for SCONES with α = 0.2" (Stahlberg & Kumar 2022, §5). The heads
# are judged by their mean relative BLEU over these γ, not by the fall from the lowest γ, where
# a few exact searches on the first sentences decide the figure.
HIGH_TEMPERATURES = tuple(gamma for gamma in SYNTHETIC_TEMPERATURES if gamma >= 0.5)
# Table 7 of the paper: the percentage of test sentences whose exact search had not finished
# within 1M states; "for runs that are not listed here, exact search terminated within 1M
# steps for all sentences". The paper has no γ = 1.
PAPER_BUDGET_HITS = {
    0.1: {SOFTMAX: 1.05, LOW_ALPHA: 0.55, HIGH_ALPHA: 1.25},
    0.2: {SOFTMAX: 1.00, LOW_ALPHA: 5.10, HIGH_ALPHA: 2.65},
    0.3: {SOFTMAX: 0.10, LOW_ALPHA: 12.6, HIGH_ALPHA: 1.80},
    0.5: {SOFTMAX: 0.0, LOW_ALPHA: 25.0, HIGH_ALPHA: 0.0},
    0.7: {SOFTMAX: 0.0, LOW_ALPHA: 25.9, HIGH_ALPHA: 0.0},
}


def synthetic_section(
    records: list[RunRecord], results_dir: Path, figures: Path, folder: str
) -> list[str]:
    """The section: command, corpora, Figs. 8 and 9, Table 7, claims."""
    beam4 = _by_temperature(records, _beam4_bleu)
    relative = _relative_exact_bleu(records)
    lines = [
        f"## {SYNTHETIC.title}",
        "",
        "```bash",
        f"tfscones reproduce synthetic --out {folder}",
        "```",
        "",
        *_corpora_lines(results_dir),
        "### Fig. 8: beam-4 BLEU against γ",
        "",
        *_references_note(records),
        *_table(beam4, "beam-4 test BLEU (mean of seeds)", _sample_row(results_dir)),
        *_plot(figures / "synthetic_beam4.png", beam4, "beam-4 test BLEU", "Fig. 8"),
        "### Fig. 9: exact search, BLEU relative to softmax beam-4",
        "",
        *_exact_note(records),
        *_table(relative, "exact-search BLEU − softmax beam-4 BLEU (same sentences)"),
        *_plot(figures / "synthetic_exact.png", relative, "exact − softmax beam-4 BLEU", "Fig. 9"),
        "### Table 7: exact searches that reached the state budget",
        "",
        "The paper's Table 7 lists the runs some of whose searches reached 1M states; every "
        "search of the runs it does not list finished (0% here).",
        "",
        *_budget_table(records),
        "### Claims",
        "",
    ]
    for claim in _claims(records, beam4, relative):
        lines += claim.lines()
    return lines + [""]


def _corpora_lines(results_dir: Path) -> list[str]:
    record = read_corpora(results_dir)
    if record is None:
        return ["The corpora have not been sampled yet.", ""]
    model = record["model"]
    original = record["original_targets"]
    references = record["settings"].get("test_references", 1)
    test_samples = "one target" if references == 1 else f"{references} targets each"
    lines = [
        f"IBM-3 estimated on the bundled Tatoeba training pairs (`{CORPUS['train'][0]}`, "
        f"`{CORPUS['train'][1]}`) in {record['estimation_seconds']:.0f} s: source vocabulary "
        f"{model['source_vocabulary']:,}, target vocabulary {model['target_vocabulary']:,}, "
        f"{model['t_entries']:,} t entries, p1 = {model['p1']:.3f}. The training and dev "
        f"sources each got one target sampled at every γ, the test sources {test_samples}; "
        "the test samples are the references. "
        "Length (whitespace words) and types are the training targets'; entropies (bits) the "
        "mean over rows of the tempered t, n and d tables (eq. 10).",
        "",
        "| γ | mean length | types | H(t_γ) | H(n_γ) | H(d_γ) |",
        "|---|---:|---:|---:|---:|---:|",
        f"| original targets | {original['mean_length']:.2f} | {original['types']:,} | | | |",
    ]
    for gamma, row in record["temperatures"].items():
        entropies = " | ".join(f"{row[name]:.3f}" for name in ENTROPIES)
        lines.append(
            f"| {float(gamma):g} | {row['mean_length']:.2f} | {row['types']:,} | {entropies} |"
        )
    return lines + [""]


def _record(records: list[RunRecord], head: str, gamma: float, seed: int) -> RunRecord | None:
    name = synthetic_run(head, gamma, seed).name
    return next((record for record in records if record.run.name == name), None)


def _seeds(records: list[RunRecord], head: str, gamma: float) -> list[RunRecord]:
    found = (_record(records, head, gamma, seed) for seed in (1, 2))
    return [record for record in found if record is not None]


def _beam4_bleu(record: RunRecord) -> float | None:
    return record.test_bleu("beam4")


def _exact_bleu(record: RunRecord) -> float | None:
    exact = record.analysis.exact if record.analysis else None
    return exact.bleu if exact else None


def _softmax_beam_bleu(record: RunRecord) -> float | None:
    """Beam-4 BLEU on the exact-search sentences, which Fig. 9 subtracts."""
    exact = record.analysis.exact if record.analysis else None
    return exact.beam_bleu if exact else None


def _mean(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return sum(known) / len(known) if known else None


def _by_temperature(
    records: list[RunRecord], value: Callable[[RunRecord], float | None]
) -> dict[str, dict[float, float | None]]:
    """`{head: {γ: the mean over its seeds of value}}`."""
    return {
        head: {
            gamma: _mean([value(record) for record in _seeds(records, head, gamma)])
            for gamma in SYNTHETIC_TEMPERATURES
        }
        for head in SYNTHETIC_CONFIGS
    }


def _relative_exact_bleu(records: list[RunRecord]) -> dict[str, dict[float, float | None]]:
    """Fig. 9: each head's exact-search BLEU minus softmax's beam-4 BLEU, per γ (seed means)."""
    exact = _by_temperature(records, _exact_bleu)
    softmax_beam = _by_temperature(records, _softmax_beam_bleu)[SOFTMAX]
    return {
        head: {
            gamma: None
            if values[gamma] is None or softmax_beam[gamma] is None
            else values[gamma] - softmax_beam[gamma]
            for gamma in SYNTHETIC_TEMPERATURES
        }
        for head, values in exact.items()
    }


def _references_note(records: list[RunRecord]) -> list[str]:
    """How many references each test source's BLEU counted, as the analyses record it."""
    counts = sorted({r.analysis.references for r in records if r.analysis is not None})
    if not counts:
        return []
    plural = "reference" if counts == [1] else "references"
    return [
        f"BLEU (sacrebleu) against {' or '.join(map(str, counts))} sampled {plural} of each "
        "test source.",
        "",
    ]


def _sample_row(results_dir: Path) -> dict[str, dict[float, float | None]]:
    """What one more IBM-3 sample of each test source scores against the references."""
    record = read_corpora(results_dir)
    temperatures = record["temperatures"] if record else {}
    if not any("sample_bleu" in row for row in temperatures.values()):
        return {}
    return {
        "an IBM-3 sample": {
            gamma: temperatures.get(str(float(gamma)), {}).get("sample_bleu")
            for gamma in SYNTHETIC_TEMPERATURES
        }
    }


def _table(
    values: dict[str, dict[float, float | None]],
    what: str,
    extra_rows: dict[str, dict[float, float | None]] | None = None,
) -> list[str]:
    header = " | ".join(f"γ={gamma:g}" for gamma in SYNTHETIC_TEMPERATURES)
    lines = [f"| {what} | {header} |", "|---|" + "---:|" * len(SYNTHETIC_TEMPERATURES)]
    for head, by_gamma in {**values, **(extra_rows or {})}.items():
        cells = " | ".join(_cell(by_gamma[gamma]) for gamma in SYNTHETIC_TEMPERATURES)
        lines.append(f"| {head} | {cells} |")
    return lines + [""]


def _cell(value: float | None) -> str:
    return "not run yet" if value is None else number(value)


def _plot(
    path: Path, values: dict[str, dict[float, float | None]], label: str, alt: str
) -> list[str]:
    """A line per head against γ; nothing until some run has a value."""
    if all(value is None for by_gamma in values.values() for value in by_gamma.values()):
        return []
    with analysis_report.figure(path, (6, 4)) as axes:
        for head, by_gamma in values.items():
            points = [(gamma, value) for gamma, value in by_gamma.items() if value is not None]
            if points:
                axes.plot(*zip(*points, strict=True), marker="o", label=head)
        axes.set_xlabel("IBM-3 sampling temperature γ")
        axes.set_ylabel(label)
    return [f"![{alt}](figures/{path.name})", ""]


def _exact_note(records: list[RunRecord]) -> list[str]:
    settings = next((r.analysis_settings for r in records if r.analysis_settings), None)
    if settings is None:
        return ["Exact search has not run yet.", ""]
    count = settings["exact_sentences"]
    sentences = "every test sentence" if count is None else f"the first {count} test sentences"
    return [
        f"Exact search on {sentences}, {settings['state_budget']:,} states each at most; a "
        "search that reaches the "
        "budget keeps the best translation it found (the paper's rule). Both terms of each "
        "difference are on those sentences.",
        "",
    ]


def _budget_table(records: list[RunRecord]) -> list[str]:
    lines = [
        "| γ | head | budget reached (ours) | Table 7 (paper) | exact search empty (ours) |",
        "|---|---|---:|---:|---:|",
    ]
    for gamma in SYNTHETIC_TEMPERATURES:
        for head in SYNTHETIC_CONFIGS:
            exacts = [
                r.analysis.exact for r in _seeds(records, gamma=gamma, head=head) if r.analysis
            ]
            exacts = [exact for exact in exacts if exact is not None]
            paper = PAPER_BUDGET_HITS.get(gamma, {}).get(head)
            paper_cell = "not in the paper" if paper is None else f"{paper:.2f}%"
            if not exacts:
                lines.append(f"| {gamma:g} | {head} | not run yet | {paper_cell} | |")
                continue
            reached = _mean([100 * exact.incomplete_fraction for exact in exacts])
            empty = _mean([100 * exact.empty_fraction for exact in exacts])
            lines.append(f"| {gamma:g} | {head} | {reached:.1f}% | {paper_cell} | {empty:.1f}% |")
    return lines + [""]


def _seed_spread(
    records: list[RunRecord], value: Callable[[RunRecord], float | None]
) -> float | None:
    """The largest difference of `value` between the two seeds of one head at the spread γ."""
    gaps = []
    for head in SYNTHETIC_CONFIGS:
        values = [value(r) for r in _seeds(records, head, SYNTHETIC_SPREAD_TEMPERATURE)]
        if len(values) == 2 and None not in values:
            gaps.append(abs(values[0] - values[1]))
    return max(gaps) if gaps else None


def _relative_for_spread(records: list[RunRecord]) -> Callable[[RunRecord], float | None]:
    """A run's exact-search BLEU minus its own seed's softmax beam-4 BLEU (Fig. 9, one seed)."""

    def relative(record: RunRecord) -> float | None:
        softmax = _record(records, SOFTMAX, SYNTHETIC_SPREAD_TEMPERATURE, record.run.seed)
        exact, beam = _exact_bleu(record), softmax and _softmax_beam_bleu(softmax)
        return None if exact is None or beam is None else exact - beam

    return relative


def _claims(records, beam4, relative) -> list[Claim]:
    beam_spread = _seed_spread(records, _beam4_bleu)
    exact_spread = _seed_spread(records, _relative_for_spread(records))
    return [
        _alike_claim(beam4, beam_spread),
        _falls_claim(beam4, beam_spread),
        _exact_claim(relative, exact_spread),
    ]


def _complete(values: dict[str, dict[float, float | None]]) -> bool:
    return all(value is not None for by_gamma in values.values() for value in by_gamma.values())


def _spread_text(spread: float | None, what: str) -> str:
    if spread is None:
        return "no seed spread yet"
    return f"seed spread {spread:.1f} {what} (γ = {SYNTHETIC_SPREAD_TEMPERATURE:g})"


def _alike_claim(beam4, spread) -> Claim:
    text = "With beam search (beam 4), softmax and SCONES score alike at every γ (Fig. 8)."
    if not _complete(beam4):
        return Claim(text, "Not every run has been evaluated yet.", "not run yet")
    gaps = {
        gamma: max(v[gamma] for v in beam4.values()) - min(v[gamma] for v in beam4.values())
        for gamma in SYNTHETIC_TEMPERATURES
    }
    widest = max(gaps, key=gaps.get)
    evidence = (
        f"The widest gap between the heads is {gaps[widest]:.1f} BLEU, at γ = {widest:g}; "
        f"{_spread_text(spread, 'BLEU')}."
    )
    if spread is None:
        return Claim(text, evidence, NO_SPREAD)
    return Claim(text, evidence, condition_verdict(gaps[widest] <= spread, gaps))


def _falls_claim(beam4, spread) -> Claim:
    text = "Beam-4 BLEU falls as γ grows, for every head (Fig. 8)."
    if not _complete(beam4):
        return Claim(text, "Not every run has been evaluated yet.", "not run yet")
    low, high = SYNTHETIC_TEMPERATURES[0], SYNTHETIC_TEMPERATURES[-1]
    drops = {head: values[low] - values[high] for head, values in beam4.items()}
    evidence = (
        f"From γ = {low:g} to γ = {high:g}: "
        + ", ".join(
            f"{head} {values[low]:.1f} → {values[high]:.1f}" for head, values in beam4.items()
        )
        + f"; {_spread_text(spread, 'BLEU')}."
    )
    return Claim(text, evidence, bleu_verdict(min(drops.values()), spread))


def _exact_claim(relative, spread) -> Claim:
    text = (
        "With exact search, the translations of highest probability degrade at high γ much more "
        "for softmax and SCONES α = 1 than for SCONES α = 0.2 (Fig. 9)."
    )
    if not _complete(relative):
        return Claim(text, "Not every run has been analysed yet.", "not run yet")
    levels = {
        head: _mean([values[gamma] for gamma in HIGH_TEMPERATURES])
        for head, values in relative.items()
    }
    difference = levels[LOW_ALPHA] - max(levels[SOFTMAX], levels[HIGH_ALPHA])
    evidence = (
        f"Relative BLEU at γ ∈ {{{', '.join(f'{g:g}' for g in HIGH_TEMPERATURES)}}}, mean: "
        + ", ".join(f"{head} {level:.1f}" for head, level in levels.items())
        + f"; α = 0.2 is above the higher of softmax and α = 1 by {difference:.1f}; "
        + f"{_spread_text(spread, 'relative BLEU')}."
    )
    return Claim(text, evidence, bleu_verdict(difference, spread))
