"""`python -m tfscones`: the same as the `tfscones` command (`tfscones.cli`)."""

from tfscones.cli import main

if __name__ == "__main__":
    main()
