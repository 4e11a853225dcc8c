"""Keep TensorFlow's native (C++) log lines out of a program's output.

TensorFlow's C++ code logs through absl. What it logs while `import tensorflow` runs (the oneDNN
notice, "Could not find cuda drivers", "All log messages before absl::InitializeLog() ...") is
written to the process's standard error before any setting is read, so `TF_CPP_MIN_LOG_LEVEL`
cannot silence it; only the file descriptor can. `import_tensorflow_quietly` imports TensorFlow
with file descriptor 2 pointed at the null device, and sets `TF_CPP_MIN_LOG_LEVEL` (unless the
user set it) to 3 so that later native messages are dropped too: on a CPU-only machine TensorFlow
logs "failed call to cuInit" and a oneDNN notice at level E (error) although nothing failed, and
every real failure reaches Python as an exception. `TF_CPP_MIN_LOG_LEVEL=0` shows them all.
Python's own warnings and exceptions are unaffected: they are raised or printed after the
descriptor is restored.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """Within the block, what native code writes to file descriptor 2 goes to the null device."""
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def import_tensorflow_quietly(min_log_level: str = "3") -> None:
    """Imports TensorFlow without its native start-up lines (a no-op once it is imported).

    Args:
        min_log_level: `TF_CPP_MIN_LOG_LEVEL` to set if the environment has none ("3": fatal
            errors only).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", min_log_level)
    if "tensorflow" in sys.modules:
        return
    with native_stderr_silenced():
        importlib.import_module("tensorflow")
