"""`python -m training.demo`: the same as `tfscones demo`."""

from tfscones.commands.demo import main

if __name__ == "__main__":
    main(prog="python -m training.demo")
