"""The bundled demo corpus (Tatoeba de-en, CC BY 2.0 FR; see ATTRIBUTION.md)."""

from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent


def demo_file(split: str, language: str) -> Path:
    """Path of a demo split: `demo_file("train", "de")`, splits train/dev/test, languages de/en.

    Args:
        split: One of "train", "dev", "test".
        language: "de" or "en".

    Returns:
        The file's path inside the installed package.

    Raises:
        ValueError: If the split or language does not exist.
    """
    if split not in ("train", "dev", "test") or language not in ("de", "en"):
        raise ValueError(
            f"no demo file for split={split!r}, language={language!r}; "
            "splits: train, dev, test; languages: de, en."
        )
    return DEMO_DIR / f"{split}.{language}"
