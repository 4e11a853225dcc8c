"""`python -m training.diversity`: the same as `tfscones diversity`."""

from tfscones.commands.diversity import main

if __name__ == "__main__":
    main(prog="python -m training.diversity")
