"""Training support: the runner, experiment configs, schedules, callbacks, averaging, strategies.

`runner` has the library calls the `tfscones` command makes (`train`, `evaluate`, `translate`,
`score`, `export`, `analyze`); `config` reads experiment YAML (shipped configs by name);
`schedules`, `callbacks`, `averaging` and `distribution` are what a training loop of your own
would reuse.
"""
