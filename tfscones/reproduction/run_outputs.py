"""The one reader of run outputs: every file the report and the plans read, checked on reading.

`tfscones reproduce` leaves small files in a reproduction folder (each run's `results.json`,
`evaluation.json`, `analysis.json`, `history.csv` and `config.yaml`; `moe/*.json`,
`g2p/ensemble-*.json`, `demo/expected_bleu.json`, `synthetic/corpora.json`), and
`tfscones report` makes the results page from them. Every one of them is read here, against a
`Shape` that says what the readers use: a file copied half, cut short, emptied or edited by
hand is refused with one `RunOutputError` naming the file and the field, never a `KeyError`
far from the file or a table of NaN. The numbers of results, evaluations and comparisons must
be finite; an analysis's floats may be any number (its means and log scores are NaN or -inf
where there is nothing to average), and a verdict on one that is not finite reads `not judged`
(`tfscones.reproduction.verdicts`).

    results = read_json(RunFolder(run_dir).results, RESULTS)  # None if there is none
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tfscones.evaluation.analysis import ModelAnalysis
from tfscones.evaluation.selection import METRICS
from tfscones.ranges import (
    AT_LEAST_ONE,
    NON_NEGATIVE,
    NON_NEGATIVE_INTEGER,
    POSITIVE,
    UNIT_INTERVAL,
    Range,
)
from tfscones.training.config import read_yaml

SHOWN_CHARACTERS = 40


class RunOutputError(ValueError):
    """A run output that is not the JSON, YAML or CSV its reader expects, naming file and field."""


@dataclasses.dataclass(frozen=True)
class Place:
    """Where in which file a value is, for the error that names it.

    Attributes:
        path: The file.
        field: The field, dotted and indexed (`greedy.bleu`, `wins.shares[0]`); empty for
            the whole file.
    """

    path: Path
    field: str = ""

    def key(self, name: str) -> Place:
        """The place of a field of the object here."""
        return Place(self.path, f"{self.field}.{name}" if self.field else name)

    def index(self, position: int) -> Place:
        """The place of an item of the list here."""
        return Place(self.path, f"{self.field}[{position}]")

    def error(self, problem: str) -> RunOutputError:
        """`FILE: field "FIELD": PROBLEM` (without the field for the whole file)."""
        field = f'field "{self.field}": ' if self.field else ""
        return RunOutputError(f"{self.path}: {field}{problem}")

    def expected(self, what: str, value: Any) -> RunOutputError:
        """`... expected WHAT, got VALUE`."""
        return self.error(f"expected {what}, got {shown(value)}")


def shown(value: Any) -> str:
    """A value as an error shows it: JSON, cut short; `an object`, `a list` for containers."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN_CHARACTERS else text[: SHOWN_CHARACTERS - 3] + "..."


class Shape(typing.Protocol):
    """What a value must be: `check` raises a `RunOutputError` naming its place if it is not."""

    def check(self, value: Any, place: Place) -> None: ...


@dataclasses.dataclass(frozen=True)
class Number:
    """A number of `allowed`, or with `allowed` None any JSON number (NaN and infinities too)."""

    allowed: Range | None = Range()

    def check(self, value: Any, place: Place) -> None:
        if self.allowed is None:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise place.expected("a number", value)
        elif not self.allowed.allows(value):
            raise place.expected(_described(self.allowed), value)


def _described(allowed: Range) -> str:
    """`a finite number`, or with bounds `a whole number in [1, inf)`."""
    if allowed.low is None and allowed.high is None:
        return "a whole number" if allowed.integer else "a finite number"
    return allowed.description()


@dataclasses.dataclass(frozen=True)
class Text:
    """A string."""

    def check(self, value: Any, place: Place) -> None:
        if not isinstance(value, str):
            raise place.expected("a string", value)


@dataclasses.dataclass(frozen=True)
class Flag:
    """`true` or `false`."""

    def check(self, value: Any, place: Place) -> None:
        if not isinstance(value, bool):
            raise place.expected("true or false", value)


@dataclasses.dataclass(frozen=True)
class Nullable:
    """`null`, or a value of `shape`."""

    shape: Shape

    def check(self, value: Any, place: Place) -> None:
        if value is not None:
            self.shape.check(value, place)


@dataclasses.dataclass(frozen=True)
class ListOf:
    """A list of at least `least` items, each of `item`."""

    item: Shape
    least: int = 0

    def check(self, value: Any, place: Place) -> None:
        if not isinstance(value, list):
            raise place.expected("a list", value)
        if len(value) < self.least:
            raise place.error(f"expected at least {self.least} item(s), got {len(value)}")
        for position, item in enumerate(value):
            self.item.check(item, place.index(position))


@dataclasses.dataclass(frozen=True)
class Object:
    """An object with `required` fields, maybe `optional` ones, each of its shape.

    Attributes:
        required: The fields it must have.
        optional: The fields it may have.
        one_of: Of these optional fields, it must have at least one.
        others: The shape of every other field; None: other fields are not read.
        closed: Whether other fields are errors (a dataclass's fields: nothing else).
    """

    required: Mapping[str, Shape] = dataclasses.field(default_factory=dict)
    optional: Mapping[str, Shape] = dataclasses.field(default_factory=dict)
    one_of: Sequence[str] = ()
    others: Shape | None = None
    closed: bool = False

    def check(self, value: Any, place: Place) -> None:
        if not isinstance(value, dict):
            raise place.expected("an object", value)
        for name, shape in self.required.items():
            if name not in value:
                raise place.key(name).error("missing")
            shape.check(value[name], place.key(name))
        if self.one_of and not any(name in value for name in self.one_of):
            raise place.error(f"missing: one of {', '.join(self.one_of)}")
        for name, item in value.items():
            if name in self.required:
                continue
            shape = self.optional.get(name, self.others)
            if shape is not None:
                shape.check(item, place.key(str(name)))
            elif self.closed:
                raise place.key(str(name)).error("not a field of this file")


def dataclass_shape(cls: type) -> Object:
    """The shape of `dataclasses.asdict` of a dataclass: its fields exactly, by their types.

    `int` is a whole number, `float` any JSON number (NaN and infinities too: an analysis
    records them where a mean has nothing to average), `str` a string, `list[T]`, `T | None`
    and nested dataclasses as their parts. A field with a default may be missing (a file
    written before the field was added).
    """
    hints = typing.get_type_hints(cls)
    fields = {field.name: _hint_shape(hints[field.name]) for field in dataclasses.fields(cls)}
    defaulted = {field.name for field in dataclasses.fields(cls) if _has_default(field)}
    return Object(
        required={name: shape for name, shape in fields.items() if name not in defaulted},
        optional={name: shape for name, shape in fields.items() if name in defaulted},
        closed=True,
    )


def _has_default(field: dataclasses.Field) -> bool:
    return (
        field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    )


def _hint_shape(hint: Any) -> Shape:
    if dataclasses.is_dataclass(hint):
        return dataclass_shape(hint)
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if origin is list:
        return ListOf(_hint_shape(arguments[0]))
    if origin in (types.UnionType, typing.Union):
        (inner,) = (argument for argument in arguments if argument is not type(None))
        return Nullable(_hint_shape(inner))
    return {int: Number(Range(integer=True)), float: Number(None), str: Text()}[hint]


def read_json(path: Path, shape: Shape) -> Any:
    """A JSON file's value, checked against `shape`; None if there is no such file.

    Raises:
        RunOutputError: If the file cannot be read, is empty, is not UTF-8 or not JSON, or its
            value is not of `shape`, naming the file (and the field).
    """
    text = _read_text(path)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        problem = error.msg[0].lower() + error.msg[1:]
        raise Place(path).error(
            f"not JSON (line {error.lineno} column {error.colno}: {problem})"
        ) from None
    shape.check(value, Place(path))
    return value


def read_yaml_file(path: Path, shape: Shape) -> Any:
    """A YAML file's value (no aliases, no repeated keys), checked; None if there is none.

    Raises:
        RunOutputError: As `read_json` does, for YAML.
    """
    text = _read_text(path)
    if text is None:
        return None
    try:
        value = read_yaml(text)
    except yaml.YAMLError as error:
        raise Place(path).error(f"not YAML ({_yaml_problem(error)})") from None
    shape.check(value, Place(path))
    return value


def _yaml_problem(error: yaml.YAMLError) -> str:
    """`line L column C: problem` where PyYAML marks one, else its message on one line."""
    mark, problem = getattr(error, "problem_mark", None), getattr(error, "problem", None)
    if mark is None or problem is None:
        return " ".join(str(error).split())
    return f"line {mark.line + 1} column {mark.column + 1}: {problem}"


def read_csv_rows(path: Path, key: str) -> list[dict[str, float]]:
    """The rows of a CSV file of numbers with a header, such as a Keras `CSVLogger`'s.

    Args:
        path: The file; no file gives no rows.
        key: A column every row must have, a whole number ≥ 0 (`epoch`).

    Returns:
        Each row's numbers by column; empty cells are left out.

    Raises:
        RunOutputError: If the file is empty, has no `key` column, a row has more or fewer
            cells than the header, or a cell is not a number, naming the file and the line.
    """
    text = _read_text(path)
    if text is None:
        return []
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader)
    if key not in header:
        raise Place(path).error(f'no "{key}" column (the header names {", ".join(header)})')
    rows = []
    for row in reader:
        line = reader.line_num
        if len(row) != len(header):
            raise _line_error(path, line, f"{len(row)} cells, the header names {len(header)}")
        cells = dict(zip(header, row, strict=True))
        values = {name: _cell(cell, path, line, name) for name, cell in cells.items() if cell}
        if not NON_NEGATIVE_INTEGER.allows(_whole(values.get(key))):
            problem = f'field "{key}": expected a whole number in [0, inf), got {shown(cells[key])}'
            raise _line_error(path, line, problem)
        rows.append(values)
    return rows


def _cell(cell: str, path: Path, line: int, column: str) -> float:
    try:
        return float(cell)
    except ValueError:
        problem = f'field "{column}": expected a number, got {shown(cell)}'
        raise _line_error(path, line, problem) from None


def _whole(value: float | None) -> int | float | None:
    """A float that is a whole number as an int (`3.0`: 3), anything else as it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _line_error(path: Path, line: int, problem: str) -> RunOutputError:
    return RunOutputError(f"{path}: line {line}: {problem}")


def _read_text(path: Path) -> str | None:
    """The file's text; None if there is no file."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        data = path.read_bytes()
    except OSError as error:
        raise Place(path).error(f"cannot be read ({error.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = data[error.start : error.end]
        raise Place(path).error(f"not UTF-8: bytes {bad!r} at byte offset {error.start}") from None
    if not text.strip():
        raise Place(path).error("empty file")
    return text


FINITE = Number()
RATE = Number(NON_NEGATIVE)
COUNT = Number(NON_NEGATIVE_INTEGER)
DEV_SCORES = tuple(f"best_dev_{name}" for name in METRICS)

RESULTS = Object(
    required={"steps": COUNT, "train_minutes": Number(POSITIVE)},
    optional={
        **dict.fromkeys(DEV_SCORES, FINITE),
        "averaged_dev_bleu": FINITE,
        "test_bleu": FINITE,
        "test_chrf": FINITE,
        "resumed_after_minutes": RATE,
        "machine": Object(optional={"description": Text()}),
        "load_average": Object({"start": RATE, "end": RATE}),
        "code": Object(optional={"commit": Nullable(Text()), "modified": Flag()}),
    },
    one_of=DEV_SCORES,
)
"""`results.json`: what `tfscones train` records of a finished run."""

_SCORES = Object({"bleu": FINITE, "chrf": FINITE})
BLEU_EVALUATION = Object({"greedy": _SCORES, "beam4": _SCORES})
EVALUATION_SIGNATURE = Object(optional={"bleu_signature": Text()})
"""`evaluation.json` as the plan's steps read it: its BLEU signature, naming the references."""
"""`evaluation.json` of a translation run: greedy and beam-4 test BLEU and chrF."""

_RATES = Object(
    {
        "wer": RATE,
        "per": RATE,
        "by_language": Object(others=Object({"words": COUNT, "wer": RATE, "per": RATE})),
    }
)
G2P_EVALUATION = Object({"words": COUNT, "greedy": _RATES, "beam5": _RATES})
"""`evaluation.json` of a G2P run: greedy and beam-5 test WER and PER, per language too."""

G2P_ENSEMBLE = Object({"loss": Text(), "runs": ListOf(Text()), **G2P_EVALUATION.required})
"""`g2p/ensemble-<recipe>.json`: a G2P evaluation of the ensemble of the runs named."""

ANALYSIS_SETTINGS = Object(
    {
        "beam_sizes": ListOf(Number(AT_LEAST_ONE), least=1),
        "exact_sentences": Nullable(COUNT),
        "state_budget": Number(AT_LEAST_ONE),
    }
)

ANALYSIS = Object({"settings": ANALYSIS_SETTINGS, "analysis": dataclass_shape(ModelAnalysis)})
"""`analysis.json`: the settings of an analysis and its `ModelAnalysis`."""

CONFIG = Object({"training": Object({"steps_per_epoch": Number(AT_LEAST_ONE)})})
"""`config.yaml`, as far as the report reads it."""

_METHOD = Object(
    {
        "bleu": FINITE,
        "pairwise_bleu": FINITE,
        "average_oracle_bleu": FINITE,
        "references_covered": RATE,
    }
)
DIVERSITY = Object(
    {
        "runs": ListOf(Text()),
        "sentences": Number(AT_LEAST_ONE),
        "methods": Object({"sampling": _METHOD}, others=_METHOD),
    }
)
"""`moe/diversity.json`: Shen et al. (2019), Table 1 columns of each method."""

EXPERTS = Object(
    {
        "bleu": ListOf(FINITE, least=1),
        "baseline_greedy_bleu": FINITE,
        "wins": Object(
            {"shares": ListOf(Number(UNIT_INTERVAL), least=1), "pairs": COUNT, "left_out": COUNT}
        ),
    }
)
"""`moe/experts.json`: each expert's BLEU and share of E-step wins."""

_CORPUS_STATISTICS = Object({"mean_length": RATE, "types": COUNT})
SYNTHETIC_CORPORA = Object(
    {
        "settings": Object(others=None),
        "estimation_seconds": RATE,
        "model": Object(
            {
                "source_vocabulary": COUNT,
                "target_vocabulary": COUNT,
                "t_entries": COUNT,
                "p1": Number(UNIT_INTERVAL),
            }
        ),
        "original_targets": _CORPUS_STATISTICS,
        "temperatures": Object(
            others=Object(
                {
                    **_CORPUS_STATISTICS.required,
                    "t_entropy": RATE,
                    "n_entropy": RATE,
                    "d_entropy": RATE,
                },
                optional={"sample_bleu": RATE},
            )
        ),
    }
)
"""`synthetic/corpora.json`: how the synthetic plan's corpora were made, and their statistics."""

_FIGURE = Nullable(FINITE)  # a correlation of constant numbers has none
_CORRELATION = Object(
    {
        "pearson": _FIGURE,
        "spearman": _FIGURE,
        "pearson_interval": ListOf(_FIGURE, least=2),
        "spearman_interval": ListOf(_FIGURE, least=2),
        "pairs": COUNT,
    }
)
CONFIDENCE_RECORD = Object(
    {
        "test_set": Text(),
        "head": Text(),
        "run": Text(),
        "dropout_passes": COUNT,
        "report": Object(
            {
                "sentences": Number(AT_LEAST_ONE),
                "mean_chrf": FINITE,
                "correlation": Object(others=_CORRELATION),
                "flagging_auroc": Object(others=Number(UNIT_INTERVAL)),
                "corruption_auroc": Object(others=Object(others=Nullable(Number(UNIT_INTERVAL)))),
            },
            optional={"multiref_wins": Number(UNIT_INTERVAL)},
        ),
    }
)
"""`confidence/<run>.json`: how well one model's confidence predicts quality on its test set."""

EXPECTATIONS = Object(
    others=ListOf(Object({"steps": COUNT, "greedy_bleu": FINITE, "beam4_bleu": FINITE}))
)
"""`demo/expected_bleu.json`: the demo configs' test BLEU by step budget."""
