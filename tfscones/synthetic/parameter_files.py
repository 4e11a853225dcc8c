"""IBM-3 parameter files: `ibm3.json` (vocabularies, p1, options) and `ibm3.npz` (the tables).

`IBM3Parameters.save` and `IBM3Parameters.load` call these; the JSON header names its format
(`tfscones-ibm3`) so that a folder of something else is refused by name.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from tfscones.synthetic.options import EstimationOptions

FORMAT = "tfscones-ibm3"
HEADER_FILE = "ibm3.json"
ARRAYS_FILE = "ibm3.npz"
ARRAY_FIELDS = (
    "t_offsets",
    "t_targets",
    "t_probabilities",
    "fertility",
    "distortion_entries",
    "distortion_counts",
    "offset_buckets",
)


def write_parameter_files(parameters: Any, directory: str | os.PathLike) -> Path:
    """Writes `ibm3.json` and `ibm3.npz` of `parameters` to a folder, made if missing.

    Args:
        parameters: The `IBM3Parameters` (read by field name: this module serves that class).
        directory: The folder.

    Returns:
        The folder.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    header = {
        "format": FORMAT,
        "source_vocabulary": list(parameters.source_vocabulary),
        "target_vocabulary": list(parameters.target_vocabulary),
        "p1": parameters.p1,
        "options": dataclasses.asdict(parameters.options),
    }
    (directory / HEADER_FILE).write_text(json.dumps(header, ensure_ascii=False), encoding="utf-8")
    np.savez_compressed(
        directory / ARRAYS_FILE, **{name: getattr(parameters, name) for name in ARRAY_FIELDS}
    )
    return directory


def read_parameter_fields(directory: str | os.PathLike) -> dict[str, Any]:
    """Reads the folder `write_parameter_files` wrote.

    Returns:
        The fields of `IBM3Parameters`, by name.

    Raises:
        ValueError: If `ibm3.json` is not an IBM-3 parameter file.
    """
    directory = Path(directory)
    header = json.loads((directory / HEADER_FILE).read_text(encoding="utf-8"))
    if header.get("format") != FORMAT:
        raise ValueError(f"{directory / HEADER_FILE} is not a {FORMAT} file")
    with np.load(directory / ARRAYS_FILE, allow_pickle=False) as arrays:
        tables = {name: arrays[name] for name in ARRAY_FIELDS}
    return {
        "source_vocabulary": tuple(header["source_vocabulary"]),
        "target_vocabulary": tuple(header["target_vocabulary"]),
        "p1": header["p1"],
        "options": EstimationOptions(**header["options"]),
        **tables,
    }
