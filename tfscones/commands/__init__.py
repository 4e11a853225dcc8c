"""The subcommands of the `tfscones` console command (`tfscones.cli`), one module each.

A module parses its command line and makes library calls; `main(argv, prog)` runs it. The
programs `python -m training.train`, `training.translate`, ... and `export.savedmodel` call the
same `main`.
"""

INTERRUPTED = 130
"""The exit status of a command ended by Ctrl-C (128 + SIGINT), as shells report it."""
