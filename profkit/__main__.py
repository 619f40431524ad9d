"""`python -m profkit ...`: the CLI where the `profkit` script is not on PATH."""

from profkit.cli import cli

cli(prog_name="profkit")
