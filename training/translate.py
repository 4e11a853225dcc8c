"""`python -m training.translate`: the same as `tfscones translate`."""

from tfscones.commands.translate import main

if __name__ == "__main__":
    main(prog="python -m training.translate")
