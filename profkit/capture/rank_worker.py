"""Run one worker of a multi-process job under a profiler, named by its rank.

    python -m profkit.capture.rank_worker --prefix '["nsys", "profile", "-o", "out/run.rank{rank}"]' [--ranks 0] -- CMD...

A launcher (torchrun --no-python, mpirun, srun) starts this in place of each worker. It reads
the rank the launcher gave the process (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID),
puts `{rank}` into the profiler's arguments, forces NVLink multicast off, and replaces itself
with PROFILER ARGS... CMD (or CMD alone on a rank not in --ranks). `profkit capture --ranks`
builds this for torchrun; with another launcher put it before the worker command yourself.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from profkit.capture.session import SAFE_ENV

RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")


def rank_from_env(env=None) -> int | None:
    env = os.environ if env is None else env
    for k in RANK_VARS:
        if env.get(k, "").strip().isdigit():
            return int(env[k])
    return None


def worker_argv(prefix: list[str], cmd: list[str], rank: int, ranks: set[int] | None = None) -> list[str]:
    if ranks is not None and rank not in ranks:
        return list(cmd)
    return [a.replace("{rank}", str(rank)) for a in prefix] + list(cmd)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        print("profkit.capture.rank_worker: usage: --prefix JSON [--ranks 0,1] -- COMMAND...", file=sys.stderr)
        return 2
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="python -m profkit.capture.rank_worker")
    p.add_argument("--prefix", required=True, help="JSON list: the profiler's arguments; {rank} is replaced")
    p.add_argument("--ranks", default=None, help="comma-separated ranks to profile (default: all)")
    a = p.parse_args(argv[:cut])
    cmd = argv[cut + 1 :]
    rank = rank_from_env()
    if rank is None or not cmd:
        print(
            f"profkit.capture.rank_worker: {'no command' if cmd == [] else 'no rank in the environment (' + ', '.join(RANK_VARS) + ')'}",
            file=sys.stderr,
        )
        return 2
    ranks = {int(r) for r in a.ranks.split(",") if r.strip()} if a.ranks else None
    args = worker_argv(json.loads(a.prefix), cmd, rank, ranks)
    os.environ.update(SAFE_ENV)
    try:
        os.execvp(args[0], args)
    except OSError as e:
        print(f"profkit.capture.rank_worker: rank {rank}: cannot run {args[0]}: {e}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
