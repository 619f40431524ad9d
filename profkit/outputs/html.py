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


def _replace(path: Path, write) -> Path:
    path = Path(path)
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
    return _replace(path, lambda tmp: fig.write_html(str(tmp), include_plotlyjs=True, full_html=True,
                                                     config=PLOTLY_CONFIG))


def figure_html(fig, first: bool) -> str:
    """A figure as an HTML fragment; plotly.js inlined with the first figure of a page only."""
    return fig.to_html(full_html=False, include_plotlyjs=first, config=PLOTLY_CONFIG)


def write_page(path, title: str, body: str) -> Path:
    """One HTML page: `body` is trusted markup the caller built with text() around every name."""
    doc = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
           f"<title>{text(title)}</title></head><body style=\"font-family: sans-serif\">{body}</body></html>\n")
    return _replace(path, lambda tmp: tmp.write_text(doc, encoding="utf-8"))
