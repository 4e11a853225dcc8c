"""Serving: the `tf.Module` of text-in, text-out signatures, its request limits, SavedModel export.

`TranslationModule` (in `module.py`) holds the signatures TF Serving runs; `export.py` writes it
as a versioned SavedModel (`export_run` for a training run's folder). `ctranslate2_export.py`
and `ctranslate2_translator.py` export a model for CTranslate2 and translate with it; they import
the optional extra `ctranslate2`, so they are imported from their modules, not from here.
"""

from tfscones.serving.export import (
    ExportError,
    ExportSettings,
    export_info,
    export_run,
    write_savedmodel,
)
from tfscones.serving.module import (
    DEFAULT_MAX_BATCH_SIZE,
    RequestLimits,
    TranslationModule,
    standard_searches,
)

__all__ = [
    "DEFAULT_MAX_BATCH_SIZE",
    "ExportError",
    "ExportSettings",
    "RequestLimits",
    "TranslationModule",
    "export_info",
    "export_run",
    "standard_searches",
    "write_savedmodel",
]
