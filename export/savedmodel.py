"""`python -m export.savedmodel`: the `tfscones export` command (`tfscones.commands.export`)."""

from tfscones.commands.export import main

if __name__ == "__main__":
    main(prog="python -m export.savedmodel")
