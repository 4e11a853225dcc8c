"""Which machine and code a run ran on, and how busy the machine was: for reading its figures.

A run bounded by steps gives the same model on any machine; only its wall time depends on the
machine, and on what else ran beside it. `results.json` records both, and the code: the
package's version and, for a git checkout, its commit and whether files were changed.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import tensorflow as tf

import tfscones


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), or what `platform` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def gpu_names() -> list[str]:
    """The names of the GPUs TensorFlow sees."""
    return [
        tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
        for gpu in tf.config.list_physical_devices("GPU")
    ]


def describe_machine() -> dict:
    """The CPU, its logical cores usable by this process, the GPUs and TensorFlow's version.

    Returns:
        `cpu`, `cores`, `gpus`, `tensorflow` and a one-line `description`.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpus = gpu_names()
    description = f"{cpu_name()}, {cores} core{'s' if cores != 1 else ''}"
    if gpus:
        description += ", " + ", ".join(gpus)
    return {
        "cpu": cpu_name(),
        "cores": cores,
        "gpus": gpus,
        "tensorflow": tf.__version__,
        "description": description,
    }


def load_average() -> float | None:
    """The one-minute load average (runnable processes); None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def code_version() -> dict:
    """The tfscones version, and the git commit of its checkout where it runs from one.

    Returns:
        `tfscones` (the package version), `commit` (the checkout's HEAD, or None for an
        installed package or where git is missing) and `modified` (whether tracked files
        differ from that commit; None without a commit).
    """
    commit, modified = checkout_state(Path(tfscones.__file__).resolve().parent.parent)
    return {"tfscones": tfscones.__version__, "commit": commit, "modified": modified}


def checkout_state(folder: Path) -> tuple[str | None, bool | None]:
    """The git commit a folder is checked out at, and whether tracked files differ from it.

    Returns:
        `(commit, modified)`, or `(None, None)` outside a git checkout or without git.
    """
    commit = _git(folder, "rev-parse", "HEAD")
    if commit is None:
        return None, None
    return commit, bool(_git(folder, "status", "--porcelain", "--untracked-files=no"))


def _git(folder: Path, *arguments: str) -> str | None:
    """`git -C folder ...`'s stripped output, or None if it fails or git is missing."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *arguments],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()
