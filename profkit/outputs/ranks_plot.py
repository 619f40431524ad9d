"""The per-rank chart of a multi-process run (profkit.analyses.ranks): per step, one stacked bar per
rank of compute alone, communication hidden under compute, exposed communication and idle."""

from __future__ import annotations

from profkit.analyses.ranks import Ranks
from profkit.core.errors import ToolMissing
from profkit.outputs.html import text, write_figure


def figure(r: Ranks):
    """Per step, one stacked bar per rank (the bar is the step's GPU window)."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise ToolMissing("the ranks chart needs plotly: pip install plotly") from None

    xs = [[text(x.step) for x in r.per_rank_step], [f"rank {x.rank}" for x in r.per_rank_step]]
    parts = (
        ("compute only", lambda x: x.compute_ns - x.overlap_ns, "#4C78A8"),
        ("NCCL hidden under compute", lambda x: x.overlap_ns, "#72B7B2"),
        ("NCCL exposed", lambda x: x.exposed_comm_ns, "#F58518"),
        ("idle", lambda x: x.idle_ns, "#BAB0AC"),
    )
    fig = go.Figure()
    for name, f, color in parts:
        ys = [f(x) / 1e3 for x in r.per_rank_step]
        fig.add_bar(
            x=xs,
            y=ys,
            name=name,
            marker_color=color,
            customdata=[[x.wait_ns / 1e3] for x in r.per_rank_step],
            hovertemplate="%{x}<br>" + name + ": %{y:.1f} us<br>waiting for other ranks: %{customdata[0]:.1f} us"
            "<extra></extra>",
        )
    title = f"run {text(r.run)}: GPU time per step and rank"
    if r.slowest_rank is not None:
        n = next(p["slowest_in_steps"] for p in r.per_rank if p["rank"] == r.slowest_rank)
        title += f" (slowest rank: {r.slowest_rank}, in {n} of {len(r.per_step)} steps)"
    fig.update_layout(
        barmode="stack",
        title=title,
        yaxis_title="microseconds (GPU window of the step)",
        legend_orientation="h",
        template="plotly_white",
    )
    return fig


def write_html(fig, path):
    return write_figure(fig, path)
