"""profkit mcp: serve a database to a coding agent over the Model Context Protocol (stdio)."""

from __future__ import annotations

import click

from profkit.cli.plumbing import db_option, handled


@click.command("mcp")
@db_option
@handled
def mcp(db):
    """Serve DB to an MCP client over stdin/stdout, read-only: list runs, SQL (the guard of
    `profkit sql`), classify, advise, compare, phases, hotspots. Started by the client, not by
    hand (docs/mcp.md has the client configuration).

    \b
    Example (a client's configuration runs):
      profkit mcp --db /path/to/profkit.db"""
    from profkit.outputs.mcp_server import serve

    serve(db)
