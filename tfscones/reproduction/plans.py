"""What each paper's reproduction trains and measures: runs bounded by steps, seeded.

A `Plan` lists the runs of one paper (`scones`, `entmax`, `moe`), each a shipped config with a
seed, trained for the config's fixed `training.steps` (never a wall-clock budget), so that any
machine trains the same model from the same initial weights on the same batches, only slower or
faster. Runs are named `<config name>-seed<N>` and shared between plans: the softmax baseline
the SCONES and entmax reproductions compare with is one run.

The SCONES plan chooses α on the dev set: the SCONES run with the best dev BLEU among
α ∈ {0.2, 0.5, 1.0} (seed 1) names the α of the tanh run, which therefore can only be planned
once those three have finished (`Plan.runs` leaves it out until then). The entmax plan trains
entmax-1.5 and sparsemax each with Fenchel-Young label smoothing ε ∈ {0.1, 0} and keeps, for
each head, the run best on dev (`chosen_on_dev`): Peters & Martins's claims are judged with
that entmax-1.5 run, the sparsemax target with that sparsemax run. Sparsemax's recipe is chosen
on dev further, between the ε = 0 recipe and its `SPARSE_VARIANTS` (`recipe_runs`). The plan
adds a second seed of each head's run best on dev so far, as the targets are means over seeds;
until every candidate has finished, that run is only the best so far (the report says which
candidates are still to finish).

The moe plan trains the softmax baseline and the hard-MoE model on the demo corpus, each with
dropout 0 and 0.1, and compares the two runs chosen on dev (`moe_compared_runs`).

The synthetic plan (Stahlberg & Kumar 2022, §5) trains softmax and SCONES α = 0.2 and 1.0 on
the IBM-3 corpus sampled at each temperature γ (`tfscones.reproduction.synthetic` samples them
into the reproduction folder), a second seed of each at γ = 0.5, and analyses every run with
beam 4 and exact search (`Plan.analysis`).

The confidence plan (`tfscones.reproduction.confidence`) measures how well each head's
confidence predicts translation quality, on Multi30k with the scones and entmax plans' runs
chosen on dev, and on the demo corpus with a model of each head trained 6,000 steps with
dropout 0.1 (SCONES's α chosen on dev there too).

The `demo` plan is no paper's: it trains the two configs of `tfscones demo` for fixed step
budgets, so that the demo, bounded by minutes, can say what its step count should give.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection
from pathlib import Path

from tfscones.decoding import DEFAULT_STATE_BUDGET
from tfscones.evaluation.analysis import DEFAULT_BEAM_SIZES
from tfscones.evaluation.selection import METRICS, selection_metric
from tfscones.reproduction.run_outputs import RESULTS, read_json
from tfscones.run_folder import RunFolder
from tfscones.synthetic.corpora import corpus_files, reference_files

MULTI30K_FILES = {
    "train": ("multi30k-en-de/train.en", "multi30k-en-de/train.de"),
    "dev": ("multi30k-en-de/val.en", "multi30k-en-de/val.de"),
    "test": ("multi30k-en-de/test_2016_flickr.en", "multi30k-en-de/test_2016_flickr.de"),
}
DEFAULT_DATA_DIR = "../shared/data"
# The bundled multi-reference Tatoeba dev set (German→English, two references a source): the
# moe plan's diversity set and the confidence plan's several-good-translations set.
MULTIREF_FILE = "tfscones:data/demo/multiref-dev.de-en.jsonl"
SCONES_ALPHAS = (0.2, 0.5, 1.0)
SPARSE_SMOOTHING = (0.1, 0.0)
SPARSE_CONFIGS = {"entmax-1.5": "multi30k_entmax15", "sparsemax": "multi30k_sparsemax"}


@dataclasses.dataclass(frozen=True)
class RecipeVariant:
    """One change to a sparse head's ε = 0 recipe, trained as a candidate of the dev choice.

    Attributes:
        suffix: The config's name after `_ls0_` (`lr0.001`: `multi30k_sparsemax_ls0_lr0.001`);
            the config says why, and the dev figures that chose or rejected it.
        label: What the run's label adds (`lr=0.001`).
        change: The change in words, beside the recipe's own setting.
    """

    suffix: str
    label: str
    change: str


SPARSE_VARIANTS = {
    "sparsemax": (
        RecipeVariant("lr0.001", "lr=0.001", "a peak learning rate of 0.001 (the recipe's: 0.002)"),
        RecipeVariant(
            "avg3", "avg=3", "the mean of the last 3 epoch checkpoints kept when better on dev"
        ),
        RecipeVariant(
            "untied",
            "untied",
            "an output projection of its own (the recipe ties it to the embeddings)",
        ),
    )
}
SPREAD_SEEDS = (1, 2)
MOE_EXPERTS = 5
# Four passes over the demo corpus, chosen on dev: at 3,000 steps (two passes) both models were
# still climbing (best dev BLEU softmax 21.7, hard-MoE 17.4); at 6,000 both are better on dev
# (22.2 and 18.4, the mixture's best at 3,600 steps, as it overfits without dropout after).
MOE_STEPS = 6000
# Each model's dropout is chosen on dev between these (the configs' `_dropout0.1` twins).
MOE_DROPOUTS = (0.0, 0.1)
MOE_CONFIGS = {"softmax": "demo_softmax", f"hard-MoE K={MOE_EXPERTS}": f"demo_moe_k{MOE_EXPERTS}"}
DEMO_STEPS = (1000, 2000, 3000)
# The heads whose confidence the confidence plan measures, and its two test sets: Multi30k's
# test_2016_flickr (English→German) and the demo corpus's test set (German→English, which the
# bundled multi-reference dev set translates too).
CONFIDENCE_HEADS = ("softmax", "SCONES", "entmax-1.5", "sparsemax")
CONFIDENCE_TEST_SETS = ("multi30k", "demo")
# The demo corpus's models of the confidence plan: the moe plan's 6,000 steps and the dropout its
# dev chose for softmax there, as Monte Carlo dropout needs dropout to draw.
CONFIDENCE_DEMO_CONFIGS = {
    "softmax": ("demo_softmax_dropout0.1",),
    "SCONES": tuple(f"demo_scones_a{alpha}_dropout0.1" for alpha in SCONES_ALPHAS),
    "entmax-1.5": ("demo_entmax15_dropout0.1",),
    "sparsemax": ("demo_sparsemax_dropout0.1",),
}
G2P_FOLDER = "sigmorphon2020-g2p"
# Each loss of Peters & Martins 2021, Table 1, is trained with ε = 0 and with the grid below,
# ε then chosen on dev (the paper chose 0.15 for cross-entropy and 0.04 for both entmax losses:
# the grid holds both).
G2P_LOSSES = {
    "cross-entropy": "g2p_softmax",
    "entmax-1.5": "g2p_entmax15",
    "sparsemax": "g2p_sparsemax",
}
G2P_SMOOTHING = (0.0, 0.04, 0.15)
# SCONES on G2P, beyond the paper: α chosen on dev, without label smoothing.
G2P_SCONES = "SCONES"
G2P_SCONES_ALPHAS = (0.2, 0.5, 1.0)
# The seeds of each loss's recipe chosen on dev: their mean and spread, and their ensemble.
G2P_SEEDS = (1, 2)
# Stahlberg & Kumar 2022, §5: the IBM-3 sampling temperatures γ of Figs. 8 and 9, the heads
# trained on each, and the γ whose second seeds give the seed spread: the middle of the range,
# where the paper's exact-search curves part (Fig. 9).
SYNTHETIC_TEMPERATURES = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
SYNTHETIC_CONFIGS = {
    "softmax": "synthetic_softmax",
    "SCONES α=0.2": "synthetic_scones_a0.2",
    "SCONES α=1.0": "synthetic_scones_a1.0",
}
SYNTHETIC_SPREAD_TEMPERATURE = 0.5
# Samples of each test source at its γ, all references of its BLEU (the paper scores against
# one). One sample of a high γ shares few n-grams with another: one reference left every head's
# beam-4 BLEU between 0.5 and 2.1 for γ >= 0.7, where the heads could not be told apart.
# Eight references count the n-grams the distribution makes likely.
SYNTHETIC_REFERENCES = 8
SYNTHETIC_FOLDER = "synthetic"
# Exact search, with the paper's 1M states a sentence, on the first 200 test sentences of each
# synthetic run: a sentence that reaches the budget costs minutes (the paper's Table 7 has a
# quarter of SCONES α=0.2's sentences reach it at γ = 0.5), and the plan has 21 runs. On 50
# sentences, two seeds' relative exact-search BLEU differed by 2.7, more than the heads did.
SYNTHETIC_EXACT_SENTENCES = 200


@dataclasses.dataclass(frozen=True)
class AnalysisSettings:
    """How much of the analysis to run (the defaults are the SCONES paper's).

    Attributes:
        beam_sizes: Beam sizes of the BLEU and length curves.
        exact_sentences: Exact search on this many of the first test sentences (None: all).
        state_budget: Exact search's per-sentence state budget.
    """

    beam_sizes: tuple[int, ...] = DEFAULT_BEAM_SIZES
    exact_sentences: int | None = None
    state_budget: int = DEFAULT_STATE_BUDGET

    def as_dict(self) -> dict:
        """The settings as recorded in `analysis.json`."""
        return {
            "beam_sizes": list(self.beam_sizes),
            "exact_sentences": self.exact_sentences,
            "state_budget": self.state_budget,
        }


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    """One training run of a reproduction.

    Attributes:
        config: The shipped config (`multi30k_softmax`).
        seed: `training.seed`: initial weights, data order and dropout.
        label: How tables name the model (`SCONES α=0.5`).
        overrides: Further `section.key=value` overrides (the tanh run's α).
        steps: `training.steps`, if not the config's own; the run's name then says it.
        corpus: `multi30k` (its files under the data folder), `demo` (bundled), `g2p` (the
            SIGMORPHON 2020 files under the data folder) or `synthetic` (sampled by the plan
            into the reproduction folder, at `temperature`).
        analysed: Whether the run is analysed (beam curve, exact search, calibration); runs
            trained only for the seed spread or on the demo corpus are not.
        variant: What the name adds to the config's (`ls0.04`, `gamma0.5`).
        temperature: The IBM-3 sampling temperature γ of a `synthetic` run's corpus.
    """

    config: str
    seed: int
    label: str
    overrides: tuple[str, ...] = ()
    steps: int | None = None
    corpus: str = "multi30k"
    analysed: bool = True
    variant: str = ""
    temperature: float | None = None

    @property
    def name(self) -> str:
        """The run's folder name: the config's name, its variant, its step budget, its seed.

        `multi30k-softmax-seed1`; `demo-softmax-3000steps-seed1` for a run of the demo config
        (wall-clock bounded) trained 3,000 steps; `g2p-entmax15-ls0.04-seed1` for the variant
        `ls0.04` (label smoothing 0.04, set by the run's overrides) of `g2p_entmax15`.
        """
        stem = self.config.replace("_", "-")
        variant = f"-{self.variant}" if self.variant else ""
        budget = "" if self.steps is None else f"-{self.steps}steps"
        return f"{stem}{variant}{budget}-seed{self.seed}"

    @property
    def test_references(self) -> int:
        """The references of each test source: the synthetic corpora's samples, else one."""
        return SYNTHETIC_REFERENCES if self.corpus == "synthetic" else 1

    def config_overrides(self, data_dir: str, out_dir: Path) -> list[str]:
        """The overrides that make the shipped config this run, in `out_dir/<name>`.

        Data paths are joined as text, not resolved, so the same `--data` always gives the same
        config (a resumed or skipped run compares configs key by key).
        """
        overrides = [
            f"name={self.name}",
            f"output_dir={out_dir / self.name}",
            f"training.seed={self.seed}",
            *self.overrides,
        ]
        if self.steps is not None:
            overrides.append(f"training.steps={self.steps}")
        if self.corpus == "multi30k":
            for split, (source, target) in MULTI30K_FILES.items():
                overrides.append(f"data.{split}_source={data_dir.rstrip('/')}/{source}")
                overrides.append(f"data.{split}_target={data_dir.rstrip('/')}/{target}")
        if self.corpus == "g2p":
            folder = g2p_folder(data_dir)
            for split in ("train", "dev", "test"):
                overrides.append(f"data.{split}_tsv={folder}/{{language}}_{split}.tsv")
        if self.corpus == "synthetic":
            folder = out_dir / SYNTHETIC_FOLDER
            for split in ("train", "dev", "test"):
                files = corpus_files(folder, self.temperature, split)
                overrides.append(f"data.{split}_source={files[0]}")
                overrides.append(f"data.{split}_target={files[1]}")
            further = reference_files(folder, self.temperature, self.test_references)[1:]
            overrides.append(f"data.test_references={json.dumps(list(map(str, further)))}")
        return overrides


def g2p_folder(data_dir: str) -> str:
    """The SIGMORPHON 2020 G2P files' folder: `data_dir` itself, or its `sigmorphon2020-g2p/`.

    `--data ../shared/data` and `--data ../shared/data/sigmorphon2020-g2p` name the same files
    and give the same configs (joined as text, so a resumed run compares equal).
    """
    data_dir = data_dir.rstrip("/")
    if data_dir.endswith(G2P_FOLDER):
        return data_dir
    return f"{data_dir}/{G2P_FOLDER}"


@dataclasses.dataclass(frozen=True)
class Plan:
    """One paper's reproduction.

    Attributes:
        name: `scones`, `entmax`, `moe` or `demo`.
        title: The paper, by authors and year.
        fixed_runs: Runs planned from the start.
        later_runs: Runs planned from finished ones (the tanh run at the α chosen on dev).
        analysis: How much of the analysis its analysed runs get unless told otherwise.
    """

    name: str
    title: str
    fixed_runs: tuple[PlannedRun, ...]
    later_runs: Callable[[Path], tuple[PlannedRun, ...]] = lambda out_dir: ()
    analysis: AnalysisSettings = AnalysisSettings()

    def runs(self, out_dir: Path) -> list[PlannedRun]:
        """The runs known so far: the fixed ones, then those that finished runs decide."""
        return [*self.fixed_runs, *self.later_runs(out_dir)]


def finished_results(out_dir: Path, run: PlannedRun) -> dict | None:
    """The run's `results.json`, or None if it has not finished.

    Raises:
        tfscones.reproduction.run_outputs.RunOutputError: If the file is damaged, naming it.
    """
    return read_json(RunFolder(out_dir / run.name).results, RESULTS)


def scones_run(alpha: float, seed: int = 1) -> PlannedRun:
    """The shipped SCONES config of an α (`multi30k_scones_a0.5`)."""
    return PlannedRun(f"multi30k_scones_a{alpha}", seed, f"SCONES α={alpha}")


def smoothing_run(head: str, smoothing: float) -> PlannedRun:
    """A sparse head with label smoothing ε: the recipe's 0.1 or 0 (the config's `_ls0` twin).

    Args:
        head: `entmax-1.5` or `sparsemax` (`SPARSE_CONFIGS`).
        smoothing: ε, one of `SPARSE_SMOOTHING`.
    """
    config = SPARSE_CONFIGS[head] + ("" if smoothing else "_ls0")
    return PlannedRun(config, 1, f"{head} ε={smoothing:g}")


def smoothing_runs(head: str) -> dict[PlannedRun, float]:
    """The runs of a sparse head that its label smoothing ε is chosen between on dev, with ε."""
    return {smoothing_run(head, smoothing): smoothing for smoothing in SPARSE_SMOOTHING}


def recipe_runs(head: str) -> dict[PlannedRun, str]:
    """The runs a sparse head's recipe is chosen between on dev, each with what sets it apart.

    The `smoothing_runs`, then ε = 0 with each of the head's `SPARSE_VARIANTS` (the config's
    `_ls0_<suffix>` twin), trained for the choice only, not analysed.
    """
    runs = {run: f"ε={smoothing:g}" for run, smoothing in smoothing_runs(head).items()}
    for variant in SPARSE_VARIANTS.get(head, ()):
        config = f"{SPARSE_CONFIGS[head]}_ls0_{variant.suffix}"
        run = PlannedRun(config, 1, f"{head} ε=0 {variant.label}", analysed=False)
        runs[run] = f"ε=0, {variant.change}"
    return runs


@dataclasses.dataclass(frozen=True)
class DevChoice:
    """The run best on dev among those a setting is chosen between.

    Attributes:
        run: The finished run with the best dev BLEU; ties go to the earlier run (the smaller
            α, the recipe's label smoothing).
        final: Whether every run has finished: until then `run` is only the best so far.
    """

    run: PlannedRun
    final: bool


def dev_score(results: dict) -> tuple[str, float]:
    """The metric that chose a run's model and its best dev score (`best_dev_bleu`, ...).

    Args:
        results: A `results.json` as `tfscones.reproduction.run_outputs.RESULTS` reads it,
            which holds one `best_dev_*` figure of a selection metric at least.
    """
    name = next(name for name in METRICS if f"best_dev_{name}" in results)
    return name, results[f"best_dev_{name}"]


def dev_choice(out_dir: Path, runs: Collection[PlannedRun]) -> DevChoice | None:
    """The run with the best dev score among the finished ones; None if none has finished.

    Higher is better for BLEU, lower for PER (`tfscones.evaluation.selection`); ties go to the
    earlier run.
    """
    best, finished = None, 0
    for run in runs:
        results = finished_results(out_dir, run)
        if results is None:
            continue
        finished += 1
        name, score = dev_score(results)
        if best is None or selection_metric(name).is_better(score, best[1]):
            best = (run, score)
    if best is None:
        return None
    return DevChoice(best[0], final=finished == len(runs))


def chosen_on_dev(out_dir: Path, runs: Collection[PlannedRun]) -> PlannedRun | None:
    """The run with the best dev BLEU, or None until every one has finished."""
    choice = dev_choice(out_dir, runs)
    return choice.run if choice and choice.final else None


def judged_on_dev(out_dir: Path, runs: Collection[PlannedRun]) -> PlannedRun | None:
    """The run the claims are judged with: chosen on dev, or until then the best so far."""
    choice = dev_choice(out_dir, runs)
    return choice.run if choice else None


def chosen_alpha(out_dir: Path) -> float | None:
    """The SCONES α with the best dev BLEU (seed 1), or None until every α has finished."""
    alphas = {scones_run(alpha): alpha for alpha in SCONES_ALPHAS}
    return alphas.get(chosen_on_dev(out_dir, list(alphas)))


def tanh_run_at_chosen_alpha(out_dir: Path) -> tuple[PlannedRun, ...]:
    """The tanh head at the α chosen on dev, once the choice can be made."""
    alpha = chosen_alpha(out_dir)
    if alpha is None:
        return ()
    return (PlannedRun("multi30k_tanh", 1, f"tanh α={alpha}", overrides=(f"loss.alpha={alpha}",)),)


def second_seeds_of_best_recipes(out_dir: Path) -> tuple[PlannedRun, ...]:
    """A second seed of each sparse head's run best on dev so far (`judged_on_dev`).

    A run's name says its recipe, so a second seed trained before the choice is final is a
    valid run of that recipe whatever the choice becomes; `reproduce` trains the fixed runs,
    every candidate among them, first, so it only trains the seed of the final choice.
    """
    best = (judged_on_dev(out_dir, recipe_runs(head)) for head in SPARSE_CONFIGS)
    return tuple(
        dataclasses.replace(run, seed=2, analysed=False) for run in best if run is not None
    )


def g2p_run(loss: str, setting: float, seed: int = 1) -> PlannedRun:
    """A G2P run of a loss of `G2P_LOSSES` at label smoothing ε, or SCONES at α.

    Args:
        loss: A key of `G2P_LOSSES`, or `G2P_SCONES`.
        setting: ε for the losses of the paper; α for SCONES.
        seed: `training.seed`.
    """
    if loss == G2P_SCONES:
        overrides, variant, label = (f"loss.alpha={setting:g}",), f"a{setting:g}", f"α={setting:g}"
        config = "g2p_scones"
    else:
        overrides = (f"loss.label_smoothing={setting:g}",)
        variant, label, config = f"ls{setting:g}", f"ε={setting:g}", G2P_LOSSES[loss]
    return PlannedRun(
        config,
        seed,
        f"{loss} {label}",
        overrides=overrides,
        corpus="g2p",
        analysed=False,
        variant=variant,
    )


def g2p_recipe_runs(loss: str) -> dict[PlannedRun, float]:
    """The seed-1 runs a G2P loss's setting (ε, or SCONES's α) is chosen between, with it."""
    settings = G2P_SCONES_ALPHAS if loss == G2P_SCONES else G2P_SMOOTHING
    return {g2p_run(loss, setting): setting for setting in settings}


def g2p_losses() -> tuple[str, ...]:
    """The losses of the G2P plan: the paper's three, then SCONES."""
    return (*G2P_LOSSES, G2P_SCONES)


def g2p_seeds_of_best_recipes(out_dir: Path) -> tuple[PlannedRun, ...]:
    """The further seeds of each G2P loss's recipe best on dev so far (`judged_on_dev`)."""
    best = (judged_on_dev(out_dir, g2p_recipe_runs(loss)) for loss in g2p_losses())
    return tuple(
        dataclasses.replace(run, seed=seed)
        for run in best
        if run is not None
        for seed in G2P_SEEDS[1:]
    )


def confidence_candidates(test_set: str) -> dict[str, tuple[PlannedRun, ...]]:
    """Each head's runs of a confidence test set that dev chooses its measured model between.

    Args:
        test_set: `multi30k` (the scones and entmax plans' seed-1 candidates) or `demo`.
    """
    if test_set == "multi30k":
        return {
            "softmax": (SOFTMAX,),
            "SCONES": tuple(scones_run(alpha) for alpha in SCONES_ALPHAS),
            **{head: tuple(recipe_runs(head)) for head in SPARSE_CONFIGS},
        }
    return {
        head: tuple(
            PlannedRun(config, 1, head, steps=MOE_STEPS, corpus="demo", analysed=False)
            for config in configs
        )
        for head, configs in CONFIDENCE_DEMO_CONFIGS.items()
    }


def confidence_models(out_dir: Path, test_set: str) -> dict[str, PlannedRun | None]:
    """Each head's run chosen on dev for a confidence test set; None until it can be chosen."""
    return {
        head: chosen_on_dev(out_dir, runs) for head, runs in confidence_candidates(test_set).items()
    }


def moe_run(model: str, dropout: float) -> PlannedRun:
    """A model of the moe plan with dropout 0 (the demo's) or 0.1 (the config's `_dropout0.1` twin).

    Args:
        model: `softmax` or `hard-MoE K=5` (`MOE_CONFIGS`).
        dropout: One of `MOE_DROPOUTS`.
    """
    config = MOE_CONFIGS[model] + (f"_dropout{dropout:g}" if dropout else "")
    return PlannedRun(
        config, 1, f"{model} dropout={dropout:g}", steps=MOE_STEPS, corpus="demo", analysed=False
    )


def moe_runs(model: str) -> dict[PlannedRun, float]:
    """The runs of a moe-plan model that its dropout is chosen between on dev, with dropout."""
    return {moe_run(model, dropout): dropout for dropout in MOE_DROPOUTS}


def moe_compared_runs(out_dir: Path) -> tuple[PlannedRun, PlannedRun] | None:
    """The softmax and hard-MoE runs chosen on dev, or None until every run has finished."""
    chosen = [chosen_on_dev(out_dir, moe_runs(model)) for model in MOE_CONFIGS]
    return None if None in chosen else tuple(chosen)


def synthetic_run(head: str, temperature: float, seed: int = 1) -> PlannedRun:
    """A head of `SYNTHETIC_CONFIGS` trained on the corpus sampled at γ = `temperature`."""
    return PlannedRun(
        SYNTHETIC_CONFIGS[head],
        seed,
        f"{head} γ={temperature:g}",
        corpus="synthetic",
        variant=f"gamma{temperature:g}",
        temperature=temperature,
    )


SOFTMAX = PlannedRun("multi30k_softmax", 1, "softmax")
SCONES = Plan(
    name="scones",
    title="Stahlberg & Kumar (2022), SCONES",
    fixed_runs=(
        SOFTMAX,
        *(scones_run(alpha) for alpha in SCONES_ALPHAS),
        PlannedRun("multi30k_softmax", 2, "softmax", analysed=False),
        PlannedRun("multi30k_scones_a0.5", 2, "SCONES α=0.5", analysed=False),
    ),
    later_runs=tanh_run_at_chosen_alpha,
)
ENTMAX = Plan(
    name="entmax",
    title="Peters & Martins (2021), sparse entmax and Fenchel-Young label smoothing",
    fixed_runs=(
        SOFTMAX,
        *(run for head in SPARSE_CONFIGS for run in recipe_runs(head)),
    ),
    later_runs=second_seeds_of_best_recipes,
)
MOE = Plan(
    name="moe",
    title="Shen et al. (2019), mixture models for diverse machine translation",
    fixed_runs=tuple(run for model in MOE_CONFIGS for run in moe_runs(model)),
)
DEMO = Plan(
    name="demo",
    title="The demo's models at fixed step budgets: the BLEU `tfscones demo` should reach",
    fixed_runs=tuple(
        PlannedRun(config, 1, label, steps=steps, corpus="demo", analysed=False)
        for steps in DEMO_STEPS
        for config, label in (("demo_softmax", "softmax"), ("demo_scones_a0.5", "SCONES α=0.5"))
    ),
)
G2P = Plan(
    name="g2p",
    title="Peters & Martins (2021), Table 1: multilingual grapheme-to-phoneme, SIGMORPHON 2020",
    fixed_runs=tuple(run for loss in g2p_losses() for run in g2p_recipe_runs(loss)),
    later_runs=g2p_seeds_of_best_recipes,
)
SYNTHETIC = Plan(
    name="synthetic",
    title="Stahlberg & Kumar (2022), §5: synthetic language pairs of IBM-3 at temperatures γ",
    fixed_runs=(
        *(
            synthetic_run(head, temperature)
            for temperature in SYNTHETIC_TEMPERATURES
            for head in SYNTHETIC_CONFIGS
        ),
        *(synthetic_run(head, SYNTHETIC_SPREAD_TEMPERATURE, 2) for head in SYNTHETIC_CONFIGS),
    ),
    analysis=AnalysisSettings(beam_sizes=(4,), exact_sentences=SYNTHETIC_EXACT_SENTENCES),
)
CONFIDENCE = Plan(
    name="confidence",
    title="Confidence as a quality estimate: how well each head's own score predicts quality",
    fixed_runs=tuple(
        dict.fromkeys(
            run
            for test_set in CONFIDENCE_TEST_SETS
            for runs in confidence_candidates(test_set).values()
            for run in runs
        )
    ),
)
PLANS = {plan.name: plan for plan in (SCONES, ENTMAX, MOE, DEMO, G2P, SYNTHETIC, CONFIDENCE)}
