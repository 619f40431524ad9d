"""Self-contained HTML files: plotly.js inline (no CDN, works offline), written to a temp
name and moved into place, so a file under the final name is never half-written."""

from __future__ import annotations

import html
import os
from pathlib import Path

PLOTLY_CONFIG = {"displaylogo": False}


def text(s) -> str:
    """Any name or message as HTML text: never markup."""
    return html.escape("" if s is None else str(s), quote=True)


def check_output(path) -> None:
    """Refuse to write an HTML page over anything but an HTML page (or an empty file): `-o
    profkit.db` would destroy the database being read, `-o report.nsys.sqlite` a report."""
    from profkit.core.errors import BadArgument

    path = Path(path)
    if not os.path.lexists(path):
        return
    if not path.is_file():
        raise BadArgument(f"{path}: exists and is not a regular file, not an HTML page: name an .html file to write")
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError as e:
        raise BadArgument(f"{path}: cannot read what is there ({e.strerror or e})") from None
    start = head.lstrip().lower()
    if not head or start.startswith((b"<!doctype html", b"<html")):
        return
    what = "a SQLite database (a profkit database or a report)" if head.startswith(b"SQLite format 3\0") else "a file"
    raise BadArgument(
        f"{path}: exists and is {what}, not an HTML page: profkit replaces only an HTML page; name another file"
    )


def _replace(path: Path, write) -> Path:
    path = Path(path)
    check_output(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    try:
        write(tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_figure(fig, path) -> Path:
    """One plotly figure as one self-contained HTML file."""
    return _replace(
        path, lambda tmp: fig.write_html(str(tmp), include_plotlyjs=True, full_html=True, config=PLOTLY_CONFIG)
    )


def figure_html(fig, first: bool) -> str:
    """A figure (a plotly Figure, or its plain {data, layout} dict) as an HTML fragment;
    plotly.js inlined with the first figure of a page only. A dict is serialised as it is,
    its template named in layout.template expanded as a Figure would: building a Figure
    validates every property, which took most of the main job's page (~50 ms a figure)."""
    if isinstance(fig, dict):
        import plotly.io as pio

        layout = dict(fig.get("layout") or {})
        name = layout.get("template", pio.templates.default)
        if isinstance(name, str):
            layout["template"] = _template(name)
        return pio.to_html(
            {**fig, "layout": layout}, full_html=False, include_plotlyjs=first, config=PLOTLY_CONFIG, validate=False
        )
    return fig.to_html(full_html=False, include_plotlyjs=first, config=PLOTLY_CONFIG)


_templates: dict = {}


def _template(name: str) -> dict:
    """A named plotly template as the dict a Figure's layout.template becomes (built once)."""
    if name not in _templates:
        import plotly.io as pio

        _templates[name] = pio.templates[name].to_plotly_json()
    return _templates[name]


def write_page(path, title: str, body: str) -> Path:
    """One HTML page: `body` is trusted markup the caller built with text() around every name."""
    doc = (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f'<title>{text(title)}</title></head><body style="font-family: sans-serif">{body}</body></html>\n'
    )
    return _replace(path, lambda tmp: tmp.write_text(doc, encoding="utf-8"))
