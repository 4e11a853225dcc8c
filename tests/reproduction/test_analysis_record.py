"""`analysis.json` as the report reads it, from before and after a field was added."""

import json

import pytest

from tfscones.evaluation.analysis import ModelAnalysis
from tfscones.reproduction.run_outputs import ANALYSIS, RunOutputError, read_json

from .test_synthetic_plan import fake_analysis


def test_an_analysis_written_before_the_reference_count_reads_as_one_reference(tmp_path):
    record = fake_analysis(30.0, 28.0, 0.0)
    del record["analysis"]["references"]
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps(record))
    assert ModelAnalysis.from_dict(read_json(path, ANALYSIS)["analysis"]).references == 1


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [("references", 1.5, "analysis.references"), ("referenses", 2, 'referenses": not a field')],
)
def test_a_wrong_or_unknown_analysis_field_is_named(tmp_path, field, value, problem):
    record = fake_analysis(30.0, 28.0, 0.0)
    record["analysis"][field] = value
    path = tmp_path / "analysis.json"
    path.write_text(json.dumps(record))
    with pytest.raises(RunOutputError, match=problem):
        read_json(path, ANALYSIS)
