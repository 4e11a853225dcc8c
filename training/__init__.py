"""The training program, its configs, the demo and the translate command."""
