"""The per-model cache of compiled functions: one build per model and key, freed with the model."""

import gc
import weakref

from tfscones.decoding.compiled import per_model_function


class Model:
    """Any object that takes a weak reference stands for a model."""


def test_built_once_per_model_and_key():
    builds = []

    def build(model_ref):
        builds.append(model_ref)
        return lambda: model_ref()

    first, second = Model(), Model()
    function = per_model_function(first, ("owner", 1), build)
    assert per_model_function(first, ("owner", 1), build) is function
    assert function() is first
    assert per_model_function(first, ("owner", 2), build) is not function
    assert per_model_function(second, ("owner", 1), build)() is second
    assert len(builds) == 3


def test_the_cache_does_not_keep_its_model_alive():
    model = Model()
    function = per_model_function(model, ("owner",), lambda model_ref: lambda: model_ref())
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None
    assert function() is None
