"""The G2P plan's measurements: beam-5 WER and PER per language, hypotheses, seed ensembles.

Peters & Martins 2021 (§4.1, Table 1) decode with beam width 5 and report WER and PER, each
computed per language and averaged over the 15 languages. For every run of the `g2p` plan this
writes:

- `OUT/<run>/evaluation.json`: greedy and beam-5 test WER and PER, macro-averaged and per
  language (`tfscones.evaluation.phone_errors`);
- `OUT/<run>/test-hypotheses/<language>.tsv`: the beam-5 hypotheses, one word a line as
  `gold<TAB>hypothesis`, the two-column format the shared task's scorer reads, so that anyone
  can rescore them;

and, once every seed of a loss's recipe chosen on dev has finished, the ensemble of those
seeds (`tfscones.decoding.Ensemble`: each token scored by the log of the mean of the models'
head probabilities), decoded and scored the same way, into `OUT/g2p/ensemble-<recipe>.json`
and `OUT/g2p/ensemble-<recipe>/test-hypotheses/`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from tfscones import decoding
from tfscones.data.tokenizer import load_tokenizer
from tfscones.decoding import Ensemble, Search
from tfscones.evaluation.selection import METRICS
from tfscones.models import load_model
from tfscones.reproduction.plans import (
    G2P,
    G2P_SEEDS,
    PlannedRun,
    chosen_on_dev,
    finished_results,
    g2p_losses,
    g2p_recipe_runs,
)
from tfscones.reproduction.run_outputs import G2P_ENSEMBLE, read_json
from tfscones.run_folder import RunFolder
from tfscones.training.config import ExperimentConfig
from tfscones.training.splits import sentence_pairs, split_languages
from tfscones.written_aside import write_text_aside

BEAM_SIZE = 5
HYPOTHESES_FOLDER = "test-hypotheses"
SEARCHES = {"greedy": Search(), "beam5": Search("beam", beam_size=BEAM_SIZE)}


def is_g2p(config: ExperimentConfig) -> bool:
    """Whether a run is scored as the G2P task is (by WER and PER)."""
    return config.training.selection_metric in ("wer", "per")


def evaluate_run(config: ExperimentConfig) -> dict:
    """Greedy and beam-5 test WER and PER of a run's best model; writes its hypotheses."""
    run = RunFolder(config.run_dir)
    model, tokenizer = load_model(run.model), load_tokenizer(run.tokenizer)
    return evaluate_words(model, tokenizer, config, run.path / HYPOTHESES_FOLDER)


def evaluate_words(model, tokenizer, config: ExperimentConfig, hypotheses_dir: Path) -> dict:
    """`evaluation.json`'s content for a model (or an `Ensemble`) on the config's test set.

    Returns:
        `{"words": N, "greedy": rates, "beam5": rates}`, where rates are `wer`, `per` (the
        macro averages) and `by_language` (each language's `words`, `wer`, `per`).
    """
    sources, references = sentence_pairs(config, "test")
    languages = split_languages(config, sources)
    evaluation: dict = {"words": len(sources)}
    for name, search in SEARCHES.items():
        hypotheses = decoding.translate(
            model, tokenizer, sources, search=search, long_sources="translate"
        )
        report = METRICS["per"].test_report(hypotheses, references, languages)
        evaluation[name] = {
            "wer": report["test_wer"],
            "per": report["test_per"],
            "by_language": report["test_by_language"],
        }
    write_hypotheses(hypotheses_dir, hypotheses, references, languages)
    return evaluation


def write_hypotheses(
    folder: Path,
    hypotheses: Sequence[str],
    references: Sequence[str],
    languages: Sequence[str | None] | None,
) -> None:
    """One `gold<TAB>hypothesis` TSV per language (`all.tsv` without languages), in order.

    Each file is written aside and renamed into place.
    """
    folder.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[str]] = {}
    groups = languages or [None] * len(hypotheses)
    for hypothesis, reference, language in zip(hypotheses, references, groups, strict=True):
        rows.setdefault(language or "all", []).append(f"{reference}\t{hypothesis}\n")
    for language, lines in rows.items():
        _write_text(folder / f"{language}.tsv", "".join(lines))


@dataclasses.dataclass(frozen=True)
class EnsembleRecipe:
    """The seeds of one loss's recipe chosen on dev, decoded together.

    Attributes:
        loss: The loss (`entmax-1.5`, ...).
        runs: Its runs, one a seed (`G2P_SEEDS`).
    """

    loss: str
    runs: tuple[PlannedRun, ...]

    @property
    def name(self) -> str:
        """`ensemble-<recipe>`: the seed-1 run's name without its seed."""
        return "ensemble-" + self.runs[0].name.removesuffix(f"-seed{self.runs[0].seed}")


def ensemble_recipes(out_dir: Path) -> list[EnsembleRecipe]:
    """The ensembles the plan can decode now: losses whose chosen recipe has every seed."""
    recipes = []
    for loss in g2p_losses():
        chosen = chosen_on_dev(out_dir, g2p_recipe_runs(loss))
        if chosen is None:
            continue
        runs = tuple(dataclasses.replace(chosen, seed=seed) for seed in G2P_SEEDS)
        if all(finished_results(out_dir, run) is not None for run in runs):
            recipes.append(EnsembleRecipe(loss, runs))
    return recipes


def ensemble_file(out_dir: Path, recipe: EnsembleRecipe) -> Path:
    """Where an ensemble's evaluation goes: `OUT/g2p/<ensemble name>.json`."""
    return out_dir / G2P.name / f"{recipe.name}.json"


def read_ensemble(out_dir: Path, recipe: EnsembleRecipe) -> dict | None:
    """An ensemble's recorded evaluation, or None if there is none of these runs.

    Raises:
        tfscones.reproduction.run_outputs.RunOutputError: If the file is damaged, naming it.
    """
    record = read_json(ensemble_file(out_dir, recipe), G2P_ENSEMBLE)
    return record if record and record["runs"] == [run.name for run in recipe.runs] else None


def read_ensembles(out_dir: Path) -> list[dict | None]:
    """The recorded evaluation of each ensemble the plan can decode now (None: not yet)."""
    return [read_ensemble(out_dir, recipe) for recipe in ensemble_recipes(out_dir)]


def ensemble_names(out_dir: Path) -> list[str]:
    """The names of the ensembles the plan can decode now (`ensemble-g2p-entmax15-ls0.04`)."""
    return [recipe.name for recipe in ensemble_recipes(out_dir)]


def evaluate_ensembles(out_dir: Path, config_of, names: Sequence[str] = ()) -> list[str]:
    """Decodes and scores each ensemble not yet recorded; returns what was done.

    Args:
        out_dir: The reproduction folder.
        config_of: `config_of(run)`: the `ExperimentConfig` of a planned run.
        names: The ensembles to decode (`ensemble_names`); every one the plan can decode now if
            empty.
    """
    done = []
    for recipe in ensemble_recipes(out_dir):
        if names and recipe.name not in names or read_ensemble(out_dir, recipe) is not None:
            continue
        folders = [RunFolder(out_dir / run.name) for run in recipe.runs]
        _check_models(recipe, folders)
        model = Ensemble([load_model(folder.model) for folder in folders])
        tokenizer = load_tokenizer(folders[0].tokenizer)
        hypotheses_dir = out_dir / G2P.name / recipe.name / HYPOTHESES_FOLDER
        evaluation = evaluate_words(model, tokenizer, config_of(recipe.runs[0]), hypotheses_dir)
        write_ensemble(out_dir, recipe, evaluation)
        done.append(f"ensembled {recipe.name}")
    return done


def write_ensemble(out_dir: Path, recipe: EnsembleRecipe, evaluation: dict) -> None:
    """Records an ensemble's evaluation (`evaluate_words`'s) with its loss and runs."""
    record = {"loss": recipe.loss, "runs": [run.name for run in recipe.runs], **evaluation}
    _write_text(ensemble_file(out_dir, recipe), json.dumps(record, indent=1) + "\n")


def _check_models(recipe: EnsembleRecipe, folders: list[RunFolder]) -> None:
    """Refuses an ensemble some of whose finished runs have lost their models.

    Raises:
        FileNotFoundError: Naming the runs, and how to train them again.
    """
    missing = [str(folder.path) for folder in folders if not folder.model.is_file()]
    if missing:
        raise FileNotFoundError(
            f"{recipe.name} needs the model of each of its runs; {', '.join(missing)} "
            f"{'has' if len(missing) == 1 else 'have'} results but no {folders[0].model.name} "
            "(models are not committed): move such a run's folder away and reproduce again "
            "to train it anew"
        )


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_aside(path, text)
