"""Run a benchmark and keep what it printed, with the machine it ran on, for the benchmarks page.

    python -m benchmarks.record --out docs/benchmarks -- benchmarks.loss_speed --vocab 8000
    python -m benchmarks.page docs/benchmarks --out docs/benchmarks.md

Runs `python -m MODULE ARGS...` in a fresh process, shows its output as it comes, and writes
`OUT/<module>--<arguments>.json`: the command, its whole standard output, the machine
(`tfscones.training.machine.describe_machine`), the code (`code_version`: version, commit), the
one-minute load average before and after (anything else running shows there) and how long it
ran. A failed benchmark writes nothing.
Record on a machine doing nothing else: a figure taken under load is not a figure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from tfscones.training.machine import code_version, describe_machine, load_average

MAX_SLUG = 120
HASH_CHARACTERS = 10


def record_name(module: str, arguments: list[str]) -> str:
    """The record's file stem: the module's last name and its arguments as a slug.

    A slug longer than `MAX_SLUG` characters (paths as arguments make long ones; file systems
    take 255 bytes a name) keeps its beginning and ends with a hash of the whole, so that two
    commands still get two names.
    """
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", " ".join(arguments)).strip("-")
    if len(slug) > MAX_SLUG:
        digest = hashlib.sha1(slug.encode("utf-8")).hexdigest()[:HASH_CHARACTERS]
        slug = f"{slug[: MAX_SLUG - HASH_CHARACTERS - 1].rstrip('-')}-{digest}"
    name = module.rsplit(".", 1)[-1]
    return f"{name}--{slug}" if slug else name


def run_benchmark(module: str, arguments: list[str]) -> tuple[str, int]:
    """Runs the benchmark, echoing its output; returns the output and the exit status."""
    process = subprocess.Popen(
        [sys.executable, "-m", module, *arguments],
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    lines = []
    for line in process.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    return "".join(lines), process.wait()


def record(module: str, arguments: list[str], out: Path) -> Path | None:
    """Runs a benchmark and writes its record; None (nothing written) if it failed.

    The record's folder is made before the benchmark runs, so that a folder that cannot be
    written fails at once, not after the run.
    """
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{record_name(module, arguments)}.json"
    load_before, started = load_average(), time.monotonic()
    output, status = run_benchmark(module, arguments)
    if status != 0:
        return None
    entry = {
        "module": module,
        "command": " ".join(["python", "-m", module, *arguments]),
        "output": output,
        "machine": describe_machine(),
        "load_average": {"start": load_before, "end": load_average()},
        "code": code_version(),
        "seconds": time.monotonic() - started,
    }
    path.write_text(json.dumps(entry, indent=1) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> None:
    """`python -m benchmarks.record --out DIR -- MODULE [ARGS...]`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks"))
    parser.add_argument("module", help="the benchmark, as for python -m (benchmarks.loss_speed)")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="its arguments")
    arguments = parser.parse_args(argv)
    path = record(arguments.module, arguments.arguments, arguments.out)
    if path is None:
        raise SystemExit(f"record: {arguments.module} failed; nothing written")
    print(f"recorded {path}")


if __name__ == "__main__":
    main()
