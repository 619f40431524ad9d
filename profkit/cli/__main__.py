from profkit.cli import cli

cli()
