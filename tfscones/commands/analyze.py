"""Model errors and search errors of trained models on a test set, as one report.

    tfscones analyze --runs runs/multi30k-softmax runs/multi30k-scones-a0.2 \
        --source ../shared/data/multi30k-en-de/test_2016_flickr.en \
        --reference ../shared/data/multi30k-en-de/test_2016_flickr.de \
        --limit 200 --exact-sentences 100 --state-budget 20000 --out reports/multi30k

For every run, `tfscones.evaluation.analyze_model`: BLEU, length ratio and speed against the beam
size (SCONES Figs. 3-4), beam-search errors against exact search (Fig. 7), exact search's BLEU,
length ratio, budget hits and states (Fig. 5, Tables 6-7), exact-search vs empty-translation log
scores (Fig. 6), how often the empty translation beats beam-4 (entmax paper Table 4), expected
calibration error (Table 6) and mean support size (Table 5). Writes `OUT/report.md`,
`OUT/report.json` and the PNG plots beside them, and prints the report. A run is reported by
its folder's name, with as many parent folders as tell it apart from the other runs'
(`runs/base` and `runs2/base`); one folder given twice, and an `--out` that is a file or under
one, are refused before anything loads.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tfscones.commands.argument_types import non_negative_int, positive_int
from tfscones.data import read_reference_streams
from tfscones.decoding import DEFAULT_STATE_BUDGET
from tfscones.evaluation.analysis import DEFAULT_BEAM_SIZES
from tfscones.evaluation.analysis_report import write_report
from tfscones.run_folder import distinct_names
from tfscones.training import runner
from tfscones.written_aside import check_folder


def parse_arguments(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, nargs="+", required=True, help="run folders")
    parser.add_argument("--source", type=Path, required=True, help="test sources, one a line")
    parser.add_argument(
        "--reference",
        type=Path,
        nargs="+",
        required=True,
        help="their references; several files make a multi-reference test set",
    )
    parser.add_argument("--limit", type=positive_int, help="analyse only the first N sentences")
    parser.add_argument(
        "--exact-sentences",
        type=non_negative_int,
        default=100,
        help="exact search on the first N (0: none)",
    )
    parser.add_argument("--state-budget", type=positive_int, default=DEFAULT_STATE_BUDGET)
    parser.add_argument("--beams", type=positive_int, nargs="+", default=list(DEFAULT_BEAM_SIZES))
    parser.add_argument("--out", type=Path, default=Path("reports/analysis"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Entry point of `tfscones analyze` and `python -m training.analyze`."""
    arguments = parse_arguments(argv, prog)
    started = time.perf_counter()
    try:
        check_folder(arguments.out, f"--out {arguments.out}")
        distinct_names(arguments.runs)
        sources, streams = read_reference_streams(arguments.source, arguments.reference)
        analyses = analyze_runs(arguments, sources, streams)
    except (OSError, ValueError) as error:
        sys.exit(f"analyze: error: {error}")
    write_report(analyses, arguments.source, arguments.out, time.perf_counter() - started)


def analyze_runs(arguments, sources: list[str], streams: list[list[str]]) -> dict:
    """`runner.analyze` of the runs the arguments name, saying when each is done."""
    if arguments.limit:
        sources = sources[: arguments.limit]
        streams = [stream[: arguments.limit] for stream in streams]
    return runner.analyze(
        arguments.runs,
        sources,
        streams,
        on_analysed=lambda name, analysis: print(
            f"{name}: analysed in {analysis.seconds:.0f} s", flush=True
        ),
        beam_sizes=arguments.beams,
        exact_sentences=arguments.exact_sentences,
        state_budget=arguments.state_budget,
    )
