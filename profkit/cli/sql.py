"""profkit sql: a query on a read-only connection, streamed as a table, JSON or CSV."""

from __future__ import annotations

import sys

import click

from profkit.cli.plumbing import db_option, fail, handled, on_main_thread, out


@click.command()
@click.argument("query")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV with a header row.")
@click.option(
    "--timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0),
    metavar="S",
    help="Stop the query after S seconds (0: no limit).",
)
@click.option(
    "--memory",
    default=2048,
    show_default=True,
    type=click.IntRange(min=16),
    metavar="MB",
    help="Working memory for sorts, DISTINCT, GROUP BY and temporary results (never temp files).",
)
@handled
def sql(query, db, as_json, as_csv, timeout, memory):
    """Run QUERY on a read-only connection (views: runs, kernels, counters, classifications,
    rules, advice, tuning, bench; docs/schema.md). Rows stream to the output as they come;
    Ctrl-C stops the query within a second.

    \b
    Examples:
      profkit sql "SELECT short_name, count(*) FROM kernels GROUP BY 1 ORDER BY 2 DESC LIMIT 5"
      profkit sql --csv "SELECT * FROM classifications WHERE label = 'dram'" > dram.csv"""
    import signal

    from profkit.outputs.records import write_csv, write_json
    from profkit.outputs.tables import pages
    from profkit.store.query import Query, QueryStopped

    stopped: list[int] = []
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    # SQLite does not return to Python during a statement, and an exception raised in its
    # progress callback is swallowed: a signal only marks the query to be stopped, and the
    # query's progress check (every ~1 ms of work) ends it
    previous = {sig: signal.getsignal(sig) for sig in signals} if on_main_thread() else {}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: stopped.append(signum))
    try:
        with Query(db, query, timeout=timeout or None, stop=lambda: bool(stopped), memory_mb=memory) as r:
            if as_json:
                write_json(sys.stdout, r.columns, r.rows())
            elif as_csv:
                write_csv(sys.stdout, r.columns, r.rows())
            else:
                # 15 significant digits: a value rounded to one decimal shows whole (1168080.5, not 1.16808e+06)
                for t in pages(r.columns, r.rows(), floats="{:.15g}"):
                    out.print(t)
    except QueryStopped:
        sys.stdout.flush()
        fail(
            "query stopped (Ctrl-C)" if stopped[0] == signal.SIGINT else f"query stopped (signal {stopped[0]})",
            128 + stopped[0],
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
