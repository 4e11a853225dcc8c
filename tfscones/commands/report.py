"""Write the results page from a reproduction folder: `tfscones report DIR --out PAGE`.

Reads the small files `tfscones reproduce` leaves in DIR (each run's `config.yaml`,
`results.json`, `history.csv`, `evaluation.json`, `analysis.json`, and `moe/`), writes the
markdown page and its plots (in `figures/` beside the page) and prints where. Runs that have
not finished show as such, with the command that makes them. The same folder always gives the
same page, byte for byte. A damaged file stops it in one line naming the file and the field
(`report error: ...`) before anything is written. `python -m training.report` is the same
command.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tfscones.reproduction.report import write_report
from tfscones.reproduction.run_outputs import RunOutputError
from tfscones.written_aside import check_folder


def parse_arguments(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the reproduction folder")
    parser.add_argument("--out", type=Path, help="the page to write (default: RESULTS/results.md)")
    arguments = parser.parse_args(argv)
    if not arguments.results.is_dir():
        parser.error(f"{arguments.results} is not a folder (give a `tfscones reproduce` --out)")
    if arguments.out is not None:
        if arguments.out.is_dir():
            parser.error(
                f"--out {arguments.out} is a folder: give the page's file, such as "
                f"{arguments.out / 'results.md'}"
            )
        try:
            check_folder(arguments.out.parent, f"--out {arguments.out}")
        except OSError as error:
            parser.error(str(error))
    return arguments


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Entry point of `tfscones report` and `python -m training.report`."""
    arguments = parse_arguments(argv, prog)
    out = arguments.out or arguments.results / "results.md"
    try:
        write_report(arguments.results, out)
    except RunOutputError as error:
        raise SystemExit(f"report error: {error}") from None
    print(f"wrote {out} and its plots in {out.parent / 'figures'}")
