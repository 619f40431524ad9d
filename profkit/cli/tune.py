"""profkit tune: autotune a user's @triton.jit kernel against its reference."""

from __future__ import annotations

import json

import click

from profkit.cli.plumbing import PATH, db_option, handled, out, progress_bar
from profkit.outputs.tables import plain


@click.command()
@click.argument("kernel", metavar="MODULE:KERNEL")
@click.option(
    "--shape",
    "shapes",
    multiple=True,
    required=True,
    metavar="NAME=VALUE,...",
    help="A problem size handed to your inputs() (repeatable), e.g. --shape n=16777216.",
)
@click.option(
    "--space",
    "space_file",
    default=None,
    type=PATH,
    help="Configurations: JSON/YAML {param: [candidates]} or a list of configs (default: from the kernel's signature).",
)
@click.option(
    "--launch",
    "launch_fn",
    default="launch",
    show_default=True,
    help="Your launcher: launch(inputs, config) -> output.",
)
@click.option(
    "--inputs", "inputs_fn", default="inputs", show_default=True, help="Your input builder: inputs(shape, device)."
)
@click.option(
    "--reference",
    "reference_fn",
    default="reference",
    show_default=True,
    help="Your reference: reference(inputs) -> expected output.",
)
@click.option(
    "--budget",
    "budget_s",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Stop trying new configs after this long (resume later).",
)
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print every trial as JSON.")
@handled
def tune(kernel, shapes, space_file, launch_fn, inputs_fn, reference_fn, budget_s, db, as_json):
    """Autotune your @triton.jit kernel: every configuration checked against your reference,
    timed with the lab's harness, every trial and the chosen one kept per shape and GPU (the
    `tuning` view); a second run reuses what is done.

    \b
    Example:
      profkit tune docs/examples/vector_add.py:add_kernel --shape n=16777216 --budget 120
    """
    from profkit.capture import tune as t

    target = t.load(kernel, launch_fn, inputs_fn, reference_fn)
    configs = t.read_space(space_file) if space_file else t.expand(t.default_space(target.kernel))
    sizes = [t.parse_shape(s) for s in shapes]
    with progress_bar() as bar:
        task = bar.add_task("tune", total=len(sizes) * len(configs))

        def progress(done, total, what):
            bar.update(task, completed=done, description=plain(f"tune {what}"[:60]))

        results = t.tune(db, target, sizes, configs, budget_s, progress)
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "shape": r.shape,
                        "best": r.best and r.best.__dict__,
                        "stopped": r.stopped,
                        "trials": [x.__dict__ for x in r.trials],
                    }
                    for r in results
                ],
                indent=2,
                default=str,
            )
        )
        return
    for r in results:
        new = sum(1 for x in r.trials if not x.reused)
        bad = [x for x in r.trials if not x.ok]
        out.print(
            f"{plain(target.spec)} {json.dumps(r.shape)}: {len(r.trials)} configs ({new} tried now, "
            f"{len(r.trials) - new} from earlier runs), {len(bad)} failed or wrong"
        )
        if r.best:
            out.print(f"  chosen: {json.dumps(r.best.config)}: {r.best.ms:.4f} ms (rel. error {r.best.rel_err:.1e})")
        else:
            out.print("  no configuration gave a correct result")
        if r.stopped:
            out.print(f"  stopped: {plain(r.stopped)}")
    out.print("every trial: profkit sql \"SELECT * FROM tuning WHERE kernel = '" + plain(target.spec) + "'\"")
