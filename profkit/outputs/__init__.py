"""Outputs: what the analyses' results become for people. CLI tables (names as plain text),
self-contained plotly HTML, figures. Nothing here computes a number the analyses did not."""
