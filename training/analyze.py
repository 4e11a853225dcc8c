"""`python -m training.analyze`: the same as `tfscones analyze`."""

from tfscones.commands.analyze import main

if __name__ == "__main__":
    main(prog="python -m training.analyze")
