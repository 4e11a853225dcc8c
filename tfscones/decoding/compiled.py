"""The one cache of compiled functions made for a model: built once, freed with the model.

A `tf.function` traces once per input signature, but a new `tf.function` object traces again,
so a function that closes over a model (a compiled search, force decoding, a prefix scorer) must
be made once and reused. `per_model_function` keeps such functions in a weak-keyed table: an
entry lives exactly as long as its model, and the function reaches its model through a weak
reference, so the cache never keeps a model alive (a strong reference from the value to its own
weak key would).

Example:
```python
def compiled_encoder(model):
    def build(model_ref):
        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
        def encode(source_ids):
            return model_ref().encode(source_ids)

        return encode

    return per_model_function(model, (compiled_encoder,), build)  # traced once per model
```
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

Function = TypeVar("Function")

_FUNCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def per_model_function(
    model: Any, key: Hashable, build: Callable[[Callable[[], Any]], Function]
) -> Function:
    """The function `build` makes for `model` and `key`, made on the first call only.

    Args:
        model: The model the function serves; any object that takes a weak reference.
        key: What tells apart the functions of one model. Start it with the function (or the
            module-level callable) that owns the entry, so that owners never collide; add the
            settings the function is compiled for (a `Search`, `jit_compile`, ...).
        build: `build(model_ref) -> function`; `model_ref()` returns the model. Called once per
            model and key; the function it returns should reach the model only through
            `model_ref`.

    Returns:
        The cached function.
    """
    functions = _FUNCTIONS.setdefault(model, {})
    if key not in functions:
        functions[key] = build(weakref.ref(model))
    return functions[key]


__all__ = ["per_model_function"]
