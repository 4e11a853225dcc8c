"""The `tfscones` command: one installed program, a subcommand per job.

    tfscones train --config demo_softmax training.max_minutes=5
    tfscones translate --run runs/demo-softmax --search beam < sentences.de
    tfscones export --run runs/demo-softmax --out exports/demo/1
    tfscones analyze | diversity | synthetic | reproduce | report | demo ...

Each subcommand parses its arguments and makes library calls (`tfscones.training.runner`,
`tfscones.serving`, `tfscones.evaluation`); `tfscones SUBCOMMAND --help` lists its options.
TensorFlow is imported without its native start-up log lines. Ctrl-C ends any subcommand with
one line on stderr and exit status 130 (`INTERRUPTED`), even while TensorFlow is still being
imported; a subcommand that can say more (where training's backup is, that an export wrote
nothing) says it first.
"""

from __future__ import annotations

import importlib
import os
import sys

from tfscones.commands import INTERRUPTED
from tfscones.native_logs import import_tensorflow_quietly

SUBCOMMANDS = {
    "train": ("train", "train one experiment from a config"),
    "translate": ("translate", "translate a text file with a trained model"),
    "score": ("score", "the confidence of given translations under a trained model"),
    "export": ("export", "export a trained model as a TF Serving SavedModel, or for CTranslate2"),
    "analyze": ("analyze", "model and search errors of trained models, as a report"),
    "diversity": ("diversity", "diversity of K translations (Hard-MoE against baselines)"),
    "synthetic": ("synthetic", "IBM-3 synthetic language pairs at temperatures"),
    "reproduce": ("reproduce", "train, evaluate and analyse one paper's runs, by steps and seed"),
    "report": ("report", "write the results page from reproduction folders"),
    "demo": ("demo", "train softmax and SCONES on the bundled corpus, translate, export"),
}


def usage() -> str:
    """The top-level help: the subcommands and what each does."""
    width = max(len(name) for name in SUBCOMMANDS)
    lines = [f"  {name:<{width}}  {about}" for name, (_, about) in SUBCOMMANDS.items()]
    return "usage: tfscones SUBCOMMAND [--help] ...\n\nsubcommands:\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `tfscones` console command."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return
    name, *rest = argv
    if name not in SUBCOMMANDS:
        raise SystemExit(f"tfscones: unknown subcommand {name!r}\n\n{usage()}")
    try:
        import_tensorflow_quietly()
        module = importlib.import_module(f"tfscones.commands.{SUBCOMMANDS[name][0]}")
        module.main(rest, prog=f"tfscones {name}")
    except KeyboardInterrupt:
        print(f"tfscones {name}: interrupted", file=sys.stderr)
        raise SystemExit(INTERRUPTED) from None
    except BrokenPipeError:
        # The reader of our output left (`tfscones ... | head`): end quietly, as `cat` does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(1) from None
