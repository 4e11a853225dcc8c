"""`python -m training.temperature_table`: the same as `tfscones temperature-table`."""

from tfscones.commands.temperature_table import main

if __name__ == "__main__":
    main(prog="python -m training.temperature_table")
