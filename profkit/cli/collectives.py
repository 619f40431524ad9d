"""profkit collectives: per NCCL kernel, the collective, its size and bandwidth; per rank and
step, the time spent waiting for the last rank to arrive."""

from __future__ import annotations

import json

import click

from profkit.cli.plumbing import PATH, db_option, handled, out, resolve_run
from profkit.outputs.tables import plain, table


def _us(rows):
    return [
        {
            (k[:-3] + "_us" if k.endswith("_ns") else k): (v / 1e3 if k.endswith("_ns") and v is not None else v)
            for k, v in r.items()
        }
        for r in rows
    ]


@click.command()
@db_option
@click.option("--run", default=None, help="Run (default: the newest).")
@click.option(
    "--peaks",
    "peaks_file",
    default=None,
    type=PATH,
    help="Measured peaks (JSON); a record with ceiling 'nvlink' or 'link' rates the bus bandwidth.",
)
@click.option("--kernels", "each", is_flag=True, help="Also one row per NCCL kernel.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole analysis as JSON.")
@handled
def collectives(db, run, peaks_file, each, as_json):
    """NCCL collectives: kind, algorithm, protocol, size, bus bandwidth; waits per rank and step.

    \b
    Example:
      profkit collectives --run ddp-2gpu-slow"""
    from profkit.analyses import collectives as co
    from profkit.model import peaks as pk
    from profkit.store.store import Store

    run = resolve_run(db, run)
    measured = pk.read(peaks_file) if peaks_file else None
    with Store(db, readonly=True) as s:
        r = co.analyse(s, run, measured)
    if as_json:
        click.echo(json.dumps(r.as_dict(), indent=2))
        return
    out.print(table(_us(r.summary), f"run {r.run}: NCCL collectives (us, GB/s)"))
    if r.waits:
        out.print(table(_us(r.waits), "waiting for the last rank, per rank and step (us)"))
    if each:
        cols = (
            "rank",
            "step",
            "collective",
            "algorithm",
            "protocol",
            "dtype",
            "duration_ns",
            "bytes",
            "busbw_gbps",
            "busbw_pct_of_peak",
            "wait_ns",
        )
        out.print(table(_us([{c: k[c] for c in cols} for k in r.kernels]), "NCCL kernels"))
    for note in r.notes:
        out.print(f"note: {plain(note)}")
