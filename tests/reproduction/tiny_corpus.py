"""A Multi30k-shaped data folder cut from the bundled demo corpus, and overrides for tiny runs."""

import itertools
from pathlib import Path

from tfscones.data.demo import demo_file
from tfscones.reproduction.plans import MULTI30K_FILES

LINES = {"train": 600, "dev": 12, "test": 12}
TINY = [
    "data.vocabulary_size=400",
    "data.max_length=32",
    "data.tokens_per_batch=512",
    "data.shuffle_buffer_size=100",
    "data.dev_sentences=12",
    "model.preset=tiny",
    "model.arguments={num_encoder_layers: 1, num_decoder_layers: 1}",
    "training.warmup_steps=2",
    "training.steps=3",
    "training.steps_per_epoch=3",
    "training.jit_compile=false",
]


def write_data_dir(folder: Path) -> Path:
    """`folder/multi30k-en-de/` with 600 training, 12 dev and 12 test pairs (German → English)."""
    for split, paths in MULTI30K_FILES.items():
        for path, language in zip(paths, ("de", "en"), strict=True):
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            with demo_file(split, language).open(encoding="utf-8") as lines:
                target.write_text("".join(itertools.islice(lines, LINES[split])), encoding="utf-8")
    return folder
