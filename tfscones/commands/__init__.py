"""The subcommands of the `tfscones` console command (`tfscones.cli`), one module each.

A module parses its command line and makes library calls; `main(argv, prog)` runs it. The
programs `python -m training.train`, `training.translate`, ... and `export.savedmodel` call the
same `main`.
"""
