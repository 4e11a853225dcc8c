"""Experiment configs shipped with the package: `tfscones train --config NAME` loads NAME.yaml."""
