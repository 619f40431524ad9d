"""profkit fleet ranks|kernels|classify|advise DIR: the analyses of a many-rank run kept as a
Parquet export (profkit export --parquet), run through DuckDB, embedded, with a memory limit."""

from __future__ import annotations

import json

import click

from profkit.cli.plumbing import PATH, handled, out
from profkit.core.errors import ProfkitError
from profkit.outputs.tables import plain, table


def _common(fn):
    fn = click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")(fn)
    fn = click.option(
        "--memory-limit",
        default="1GB",
        show_default=True,
        metavar="SIZE",
        help="DuckDB's memory limit (it spills to disk beyond it).",
    )(fn)
    fn = click.option("--run", default=None, help="Only this run (default: every run).")(fn)
    return click.argument("directory", type=PATH)(fn)


def _engine(directory, memory_limit):
    from profkit.analyses import fleet as fl

    try:
        return fl.open_dataset(directory, fl.DuckDB(memory_limit=memory_limit))
    except ProfkitError:
        raise
    except Exception as e:  # duckdb.Error: a bad memory limit, an unreadable file
        raise ProfkitError(f"DuckDB: {' '.join(str(e).split())}") from None


def _us(rows):
    return [
        {
            (k[:-3] + "_us" if k.endswith("_ns") else k): (v / 1e3 if k.endswith("_ns") and v is not None else v)
            for k, v in r.items()
        }
        for r in rows
    ]


def _build() -> click.Group:
    """The group with its subcommands, none of them a module attribute: the CLI registers every
    command it finds at the top of a module, and `fleet classify` is not `profkit classify`."""

    @click.group()
    def fleet():
        """Analyses over a Parquet export (DIR of `profkit export --parquet`), through DuckDB.

        \b
        Example:
          profkit fleet ranks export/"""

    @fleet.command("ranks")
    @_common
    @handled
    def ranks_cmd(directory, run, memory_limit, as_json):
        """Per rank: compute, NCCL, hidden, idle and wait over its steps; the straggler of each run."""
        from profkit.analyses import fleet as fl

        e = _engine(directory, memory_limit)
        try:
            f = fl.ranks(e, run)
        finally:
            e.close()
        if as_json:
            click.echo(
                json.dumps(
                    {"per_step": f.per_step, "per_rank": f.per_rank, "slowest_rank": f.slowest_rank, "notes": f.notes},
                    indent=2,
                )
            )
            return
        for r in f.runs:
            out.print(table(_us([x for x in f.per_rank if x["run"] == r]), f"run {r}: GPU time per rank (us)"))
            slow = f.slowest_rank[r]
            if slow is not None:
                n = next(x["slowest_in_steps"] for x in f.per_rank if x["run"] == r and x["rank"] == slow)
                steps = sum(1 for x in f.per_step if x["run"] == r)
                out.print(f"run {plain(r)}: slowest rank {slow} (the others waited for it in {n} of {steps} steps)")
        for note in f.notes:
            out.print(f"note: {plain(note)}")

    @fleet.command("kernels")
    @_common
    @click.option("--top", default=20, show_default=True, help="Kernels per run.")
    @handled
    def kernels_cmd(directory, run, memory_limit, as_json, top):
        """The kernels by total GPU time over every rank."""
        from profkit.analyses import fleet as fl

        e = _engine(directory, memory_limit)
        try:
            rows = fl.kernels(e, run, top)
        finally:
            e.close()
        click.echo(json.dumps(rows, indent=2)) if as_json else out.print(table(_us(rows), "kernels by GPU time (us)"))

    @fleet.command("classify")
    @_common
    @handled
    def classify_cmd(directory, run, memory_limit, as_json):
        """Timeline-level labels per rank (communication, launch_overhead, unknown: no counters)."""
        from profkit.analyses import fleet as fl

        e = _engine(directory, memory_limit)
        try:
            rows = fl.classify(e, run)
        finally:
            e.close()
        click.echo(json.dumps(rows, indent=2)) if as_json else out.print(table(_us(rows), "labels per rank (us)"))

    @fleet.command("advise")
    @_common
    @handled
    def advise_cmd(directory, run, memory_limit, as_json):
        """Per rank: where its step time went and what to fix first."""
        from profkit.analyses import fleet as fl

        e = _engine(directory, memory_limit)
        try:
            rows = fl.advise(e, run)
        finally:
            e.close()
        if as_json:
            click.echo(json.dumps(rows, indent=2))
            return
        out.print(table(_us([{k: v for k, v in r.items() if k != "first_fix"} for r in rows]), "per-rank summary (us)"))
        for r in rows:
            if r["first_fix"]:
                out.print(
                    f"run {plain(r['run'])} rank {r['rank']}: {r['share']:.0%} of its step time: {r['first_fix']}"
                )

    return fleet


fleet = _build()
