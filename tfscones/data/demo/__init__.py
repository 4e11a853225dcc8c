"""The bundled demo corpus (Tatoeba de-en, CC BY 2.0 FR; see ATTRIBUTION.md)."""

from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent
SPLITS = ("train", "train-short", "dev", "test")


def demo_file(split: str, language: str) -> Path:
    """Path of a demo split: `demo_file("train", "de")`; languages de/en.

    Splits: train (11,959 pairs), train-short (49,416 short pairs), dev and test (1,000 each).

    Args:
        split: One of "train", "train-short", "dev", "test".
        language: "de" or "en".

    Returns:
        The file's path inside the installed package.

    Raises:
        ValueError: If the split or language does not exist.
    """
    if split not in SPLITS or language not in ("de", "en"):
        raise ValueError(
            f"no demo file for split={split!r}, language={language!r}; "
            f"splits: {', '.join(SPLITS)}; languages: de, en."
        )
    return DEMO_DIR / f"{split}.{language}"
