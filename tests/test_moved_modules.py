"""Modules moved into tfscones.evaluation, .training and .synthetic keep their old import paths."""

import importlib
import inspect

import pytest

from tfscones import evaluation, synthetic
from tfscones.data import vocab_ids

MOVED = {
    "tfscones.metrics": "tfscones.evaluation.metrics",
    "tfscones.calibration": "tfscones.evaluation.calibration",
    "tfscones.model_errors": "tfscones.evaluation.model_errors",
    "tfscones.diversity": "tfscones.evaluation.diversity",
    "tfscones.analysis": "tfscones.evaluation.analysis",
    "tfscones.callbacks": "tfscones.training.callbacks",
    "tfscones.schedules": "tfscones.training.schedules",
    "tfscones.averaging": "tfscones.training.averaging",
    "tfscones.distribution": "tfscones.training.distribution",
}


@pytest.mark.parametrize("old, new", MOVED.items())
def test_an_old_module_path_is_the_moved_module(old, new):
    assert importlib.import_module(old) is importlib.import_module(new)


def test_the_old_ibm3_module_gives_the_synthetic_packages_objects():
    shim = importlib.import_module("tfscones.data.ibm3")
    assert shim.__all__
    for name in shim.__all__:
        assert getattr(shim, name) is getattr(synthetic, name), name


def test_the_package_inits_re_export_their_modules_objects():
    for package in (evaluation, synthetic):
        for name in package.__all__:
            obj = getattr(package, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                assert obj.__module__.startswith(package.__name__ + "."), name


def test_ibm3_word_ids_do_not_shadow_the_token_ids():
    shim = importlib.import_module("tfscones.data.ibm3")
    assert not hasattr(shim, "UNK_ID") and not hasattr(shim, "NULL_ID")
    assert (synthetic.NULL_WORD_ID, synthetic.UNK_WORD_ID) == (0, 1)
    assert vocab_ids.UNK_ID == 2
