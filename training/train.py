"""`python -m training.train`: the same as `tfscones train`."""

from tfscones.commands.train import main

if __name__ == "__main__":
    main(prog="python -m training.train")
