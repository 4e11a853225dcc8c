"""Reproduce a paper's results: `tfscones reproduce scones|entmax|moe|g2p|synthetic --out DIR`.

Trains every run of the paper's plan for its fixed number of steps with its seed, evaluates and
analyses it, and skips whatever an earlier call finished (a killed run resumes from its
backup); `tfscones reproduce demo` measures the demo's BLEU at fixed step budgets;
`tfscones reproduce g2p` is Peters & Martins 2021's Table 1 on SIGMORPHON 2020 G2P, and
`tfscones reproduce synthetic` Stahlberg & Kumar 2022's synthetic language pairs (§5), and
`tfscones reproduce confidence` measures how well each head's confidence predicts quality.
`tfscones.reproduction.plans` lists the runs; `tfscones report OUT` writes the results page
from the folder. A damaged output already in the folder stops it before any step, in one line
naming the file and the field (`reproduce error: ...`). `python -m training.reproduce` is the
same command.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

from tfscones.commands.argument_types import non_negative_int, positive_int
from tfscones.data import ParallelTextError, VocabularyError
from tfscones.data.text_lines import TextLineError
from tfscones.decoding import DEFAULT_STATE_BUDGET
from tfscones.evaluation.analysis import DEFAULT_BEAM_SIZES
from tfscones.reproduction.plans import DEFAULT_DATA_DIR, PLANS, SYNTHETIC, AnalysisSettings
from tfscones.reproduction.reproduce import reproduce
from tfscones.reproduction.run_outputs import RunOutputError
from tfscones.run_folder import RunFolderBusy
from tfscones.training.config import ConfigError
from tfscones.training.resume_check import RunFolderError


def parse_arguments(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("paper", choices=sorted(PLANS), help="which paper's plan to run")
    parser.add_argument(
        "--data",
        default=DEFAULT_DATA_DIR,
        help=f"folder holding multi30k-en-de/ and sigmorphon2020-g2p/ (default "
        f"{DEFAULT_DATA_DIR}); for g2p, the sigmorphon2020-g2p/ folder itself may be given",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("reproduction"), help="the reproduction folder"
    )
    parser.add_argument(
        "--beam-sizes",
        type=positive_int,
        nargs="+",
        default=argparse.SUPPRESS,
        help=f"beam sizes of the analysis curves (default {_listed(DEFAULT_BEAM_SIZES)}; "
        f"synthetic: {_listed(SYNTHETIC.analysis.beam_sizes)})",
    )
    parser.add_argument(
        "--exact-sentences",
        type=non_negative_int,
        default=argparse.SUPPRESS,
        help="exact search on the first N test sentences (default: all; synthetic: "
        f"{SYNTHETIC.analysis.exact_sentences}; 0: none)",
    )
    parser.add_argument(
        "--state-budget",
        type=positive_int,
        default=argparse.SUPPRESS,
        help=f"exact search's states per sentence (default {DEFAULT_STATE_BUDGET:,})",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        default=[],
        metavar="RUN",
        help="work on these runs of the plan only (for g2p, or its ensembles, such as "
        "ensemble-g2p-entmax15-ls0.04, once their seeds have finished)",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        help="section.key=value for every run, such as training.strategy=mirrored",
    )
    return parser.parse_intermixed_args(argv)


def _listed(values) -> str:
    return " ".join(map(str, values))


def analysis_settings(arguments: argparse.Namespace) -> AnalysisSettings:
    """The plan's `analysis`, with the settings the command line gives in its place."""
    given = {
        name: getattr(arguments, name)
        for name in ("beam_sizes", "exact_sentences", "state_budget")
        if hasattr(arguments, name)
    }
    if "beam_sizes" in given:
        given["beam_sizes"] = tuple(sorted(set(given["beam_sizes"])))
    return dataclasses.replace(PLANS[arguments.paper].analysis, **given)


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Entry point of `tfscones reproduce` and `python -m training.reproduce`."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    arguments = parse_arguments(argv, prog)
    settings = analysis_settings(arguments)
    try:
        done = reproduce(
            arguments.paper,
            arguments.out,
            arguments.data,
            settings,
            arguments.overrides,
            arguments.only,
        )
    except ConfigError as error:
        raise SystemExit(f"config error: {error}") from None
    except (RunFolderError, RunFolderBusy) as error:
        raise SystemExit(f"run folder error: {error}") from None
    except RunOutputError as error:
        raise SystemExit(
            f"reproduce error: {error} (reproduce never works over a damaged output: repair "
            "the file or move it away)"
        ) from None
    except (ParallelTextError, TextLineError, VocabularyError, FileNotFoundError) as error:
        raise SystemExit(f"data error: {error}") from None
    except ValueError as error:
        raise SystemExit(f"reproduce: error: {error}") from None
    print("\n".join(done) if done else f"{arguments.paper}: everything was already done.")
    print(f"Results page: tfscones report {arguments.out} --out {arguments.out}/results.md")
