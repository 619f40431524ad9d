"""`profkit gate` and `profkit baseline`: a run against a named baseline, with exit codes a CI job
acts on (0 pass or improvement, 1 regression, 3 undecided, 2 bad usage or input)."""

from __future__ import annotations

import json
import sqlite3
from functools import wraps

import click

from profkit.cli.plumbing import PATH, db_option, fail, out, resolve_run
from profkit.core.errors import BadArgument, ProfkitError
from profkit.core.names import as_text
from profkit.outputs.tables import plain
from profkit.outputs.tables import table as _table
from profkit.store.store import Store


def usage_errors(fn):
    """Every error is one line and exit 2 here: 1 and 3 are the gate's verdicts (the codes other
    commands give some errors, e.g. 3 for a missing tool, would read as one)."""

    @wraps(fn)
    def inner(*args, **kwargs):
        kwargs = {k: as_text(v) if isinstance(v, str) else v for k, v in kwargs.items()}
        try:
            return fn(*args, **kwargs)
        except ProfkitError as e:
            fail(str(e), 2)
        except sqlite3.Error as e:
            fail(f"SQLite: {e}", 2)
        except OSError as e:
            fail(f"{type(e).__name__}: {e}", 2)
        except KeyboardInterrupt:
            fail("interrupted", 130)

    return inner


def parse_percent(text: str) -> float:
    """'3%', '3', '0.5 %' -> 0.03, 0.03, 0.005 (a number is percent)."""
    t = text.strip().rstrip("%").strip()
    try:
        v = float(t) / 100.0
    except ValueError:
        raise BadArgument(f"--max-regression {text!r}: a percentage, e.g. 3%") from None
    if not 0 < v < 1:
        raise BadArgument(f"--max-regression {text!r}: between 0 and 100 %")
    return v


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--against", "baseline", required=True, metavar="NAME", help="Baseline to gate against.")
@click.option("--run", default=None, help="Run to gate (default: the newest).")
@db_option
@click.option(
    "--max-regression",
    default="3%",
    show_default=True,
    metavar="PCT",
    help="Slow-down a range may show before it is a regression.",
)
@click.option(
    "--by",
    type=click.Choice(["gpu", "host"]),
    default="gpu",
    show_default=True,
    help="GPU time per call, or host time per call (a change to the launcher).",
)
@click.option(
    "--range",
    "pattern",
    default=None,
    metavar="PATTERN",
    help="Only these NVTX ranges: a glob over the path, else a path, a path above, or one part.",
)
@click.option(
    "--allow",
    default=None,
    metavar="FACT,...",
    help="Compare despite these differences: gpu, driver, clocks, tools, shape, variants.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--md", "md_file", default=None, type=PATH, help="Write the markdown (a pull-request comment) here; - for stdout."
)
@click.option("--rerun", is_flag=True, help="Re-capture `-- COMMAND` (timeline only) until every range is decided.")
@click.option(
    "--budget-runs",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="--rerun: at most this many re-captures.",
)
@click.option(
    "--budget-s",
    type=click.FloatRange(min=0),
    default=None,
    metavar="S",
    help="--rerun: no new re-capture after this many seconds.",
)
@click.option(
    "--out",
    "out_dir",
    default="profiles",
    show_default=True,
    type=PATH,
    help="--rerun: where the re-captures' reports go.",
)
@click.option("--tracer", type=click.Choice(["auto", "nsys", "cupti"]), default="auto", show_default=True)
@click.option("--nsys-path", "nsys_path", default=None, help="Path to nsys (else $NSYS, else PATH).")
@click.argument("command", nargs=-1)
@usage_errors
def gate(
    baseline,
    run,
    db,
    max_regression,
    by,
    pattern,
    allow,
    as_json,
    md_file,
    rerun,
    budget_runs,
    budget_s,
    out_dir,
    tracer,
    nsys_path,
    command,
):
    """Gate a run against baseline NAME: per NVTX range pass, regression, improvement or undecided.

    Exit 0 pass or improvement, 1 regression, 3 undecided, 2 bad usage or input (docs/gate.md).

    \b
    Examples:
      profkit gate --against main --run pr-123 --md comment.md
      profkit gate --against main --run pr-123 --rerun -- python3 bench.py"""
    from profkit.analyses import gate as g
    from profkit.outputs.gate_md import markdown, text_lines
    from profkit.store import baselines

    threshold = parse_percent(max_regression)
    allowed = g.parse_allow(allow)
    if command and not rerun:
        raise BadArgument(f"unexpected {' '.join(command)!r}: a COMMAND goes with --rerun (--rerun -- COMMAND)")
    if rerun and not command:
        raise BadArgument("--rerun needs the benchmark to re-capture: --rerun -- COMMAND (or a lab workload name)")
    run = resolve_run(db, run)
    with Store(db, readonly=True) as s:
        base = baselines.load(s, baseline)
        if run not in s.runs():
            raise BadArgument(f"no run {run!r} in {db}")
    kw = {"threshold": threshold, "by": by, "pattern": pattern, "allow": allowed}
    if rerun:
        from profkit.capture.rerun import recapturer

        once = recapturer(
            list(command),
            db,
            run,
            out_dir,
            tracer=tracer,
            nsys=nsys_path,
            note=lambda t: click.echo(f"profkit: {plain(t)}", err=True),
        )
        result = g.rerun_loop(
            lambda: Store(db, readonly=True), base, run, once, budget_runs=budget_runs, budget_s=budget_s, **kw
        )
    else:
        with Store(db, readonly=True) as s:
            result = g.gate_runs(s, base, [run], **kw)
    if md_file is not None:
        text = markdown(result)
        if str(md_file) == "-":
            click.echo(text)
        else:
            md_file.write_text(text, encoding="utf-8")
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    elif str(md_file) != "-":
        for line in text_lines(result):
            click.echo(plain(line))
    raise SystemExit(result.exit_code)


def _baseline_group() -> click.Group:
    """The `baseline` group, its subcommands built here: the module holds one command object per
    top-level command (gate, baseline), so a registration of every command a module defines
    finds no `save` or `export` of its own."""

    @click.group()
    def baseline():
        """Named baselines for profkit gate: save, list, show, rm, export, import.

        \b
        Examples:
          profkit baseline save main --run bench-main
          profkit baseline export main baselines/main.json
          profkit baseline import baselines/main.json --name base"""

    @baseline.command("save")
    @click.argument("name")
    @click.option("--run", default=None, help="Run to keep (default: the newest).")
    @click.option("--replace", is_flag=True, help="Write over a baseline of that name.")
    @db_option
    @usage_errors
    def save(name, run, replace, db):
        """Keep RUN's per-call samples and comparability facts as baseline NAME."""
        from profkit.analyses.gate import snapshot
        from profkit.store import baselines

        baselines.check_name(name)
        run = resolve_run(db, run)
        with Store(db, create=False) as s:
            if run not in s.runs():
                raise BadArgument(f"no run {run!r} in {db}; runs: {', '.join(s.runs()) or 'none'}")
            b = snapshot(s, run, name)
            baselines.save(s, b, replace)
        summ = b.summary()
        click.echo(
            plain(
                f"baseline {name}: run {run}, {summ['ranges']} range{'s' if summ['ranges'] != 1 else ''}, "
                f"{summ['calls']} calls a range, "
                f"{summ['gpu'] or 'GPU not recorded'}"
            )
        )

    @baseline.command("list")
    @db_option
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
    @usage_errors
    def list_(db, as_json):
        """The baselines in the database."""
        from profkit.store import baselines

        with Store(db, readonly=True) as s:
            rows = baselines.listing(s)
        if as_json:
            click.echo(json.dumps(rows, indent=2))
        elif not rows:
            click.echo("no baselines (profkit baseline save NAME --run RUN)")
        else:
            out.print(_table(rows, "baselines"))

    @baseline.command("show")
    @click.argument("name")
    @db_option
    @click.option("--json", "as_json", is_flag=True, help="Print the baseline file's JSON.")
    @usage_errors
    def show(name, db, as_json):
        """Baseline NAME: its facts, and per range the calls and median time."""
        import statistics

        from profkit.store import baselines

        with Store(db, readonly=True) as s:
            b = baselines.load(s, name)
        if as_json:
            click.echo(json.dumps(baselines.to_json(b), indent=2))
            return
        click.echo(plain(f"baseline {b.name}: run {b.run}, saved {b.created_at}"))
        for k, v in b.facts.items():
            click.echo(plain(f"  {k}: {v if v is not None else 'not recorded'}"))
        out.print(
            _table(
                [
                    {
                        "range": r.path,
                        "calls": len(r.gpu_us),
                        "median us": statistics.median(r.gpu_us),
                        "host us": statistics.median(r.host_us) if r.host_us else None,
                        "kernels": len(r.kernels),
                        "label": r.label,
                    }
                    for r in b.ranges
                ],
                f"ranges of baseline {b.name}",
            )
        )

    @baseline.command("rm")
    @click.argument("name")
    @db_option
    @usage_errors
    def rm(name, db):
        """Delete baseline NAME."""
        from profkit.store import baselines

        with Store(db, create=False) as s:
            baselines.remove(s, name)
        click.echo(plain(f"baseline {name} removed"))

    @baseline.command("export")
    @click.argument("name")
    @click.argument("file", type=PATH)
    @db_option
    @usage_errors
    def export(name, file, db):
        """Write baseline NAME to FILE (JSON a repository can commit)."""
        from profkit.store import baselines

        with Store(db, readonly=True) as s:
            p = baselines.export(s, name, file)
        click.echo(plain(f"baseline {name} -> {p} ({p.stat().st_size:,} bytes)"))

    @baseline.command("import")
    @click.argument("file", type=PATH)
    @click.option("--name", default=None, help="Keep it under this name (default: the file's).")
    @click.option("--replace", is_flag=True, help="Write over a baseline of that name.")
    @db_option
    @usage_errors
    def import_(file, name, replace, db):
        """Load a baseline file written by `baseline export`."""
        from profkit.store import baselines

        b = baselines.read(file)  # checked before the database is opened or made
        with Store(db) as s:
            b = baselines.import_file(s, file, name, replace)
        click.echo(plain(f"baseline {b.name} <- {file} (run {b.run}, {len(b.ranges)} ranges)"))

    return baseline


baseline = _baseline_group()
