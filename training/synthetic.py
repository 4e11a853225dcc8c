"""`python -m training.synthetic`: the same as `tfscones synthetic`."""

from tfscones.commands.synthetic import main

if __name__ == "__main__":
    main(prog="python -m training.synthetic")
