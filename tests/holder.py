"""A child process that holds a run folder (`RunFolder.hold`) until it is killed."""

import subprocess
import sys

HOLD = """
import sys, time
from tfscones.run_folder import RunFolder
with RunFolder(sys.argv[1]).hold():
    print("held", flush=True)
    time.sleep(600)
"""


def hold_in_child(path) -> subprocess.Popen:
    """Starts the holder of `path`; returns once it holds the folder."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline() == "held\n"
    return child
