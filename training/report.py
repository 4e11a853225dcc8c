"""`python -m training.report`: the same as `tfscones report`."""

from tfscones.commands.report import main

if __name__ == "__main__":
    main(prog="python -m training.report")
