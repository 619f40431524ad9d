"""`python -m profkit.cli ...` (the tests and benchmarks start the CLI so)."""

from profkit.cli import cli

cli()
