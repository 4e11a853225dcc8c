"""Speed and memory benchmarks; each module prints a table (`python -m benchmarks.NAME`)."""
