"""`python -m training.reproduce`: the same as `tfscones reproduce`."""

from tfscones.commands.reproduce import main

if __name__ == "__main__":
    main(prog="python -m training.reproduce")
