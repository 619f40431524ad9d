"""Nsight Systems report of the `.qdrep` era (the extension before `.nsys-rep`, nsys < 2021.4;
the same "NVIDIA Tegra Profiler Report" container). Current nsys still exports it (2025.3.1
exported a public 2021 `.qdrep` on our H100 host), so it goes through the same export step as
`.nsys-rep` (parsers/nsys_rep.py) and, without nsys, gets the same one line."""

from __future__ import annotations

from pathlib import Path

from profkit.core.rows import Parsed

from . import nsys_rep

FORMAT = "nsys-qdrep"
SUFFIXES = (".qdrep",)  # file name endings it reads (lower case)
ROLE = "timeline"  # timeline | counters
SOURCE = "nsys"  # the tool whose launches it yields (launch.source)
PREFERENCE = 30  # after the export (10) and the newer report (20): the same capture, more work
SNIFF_ORDER = 10  # lower is asked first: the most specific recognisers first
DESCRIPTION = "Nsight Systems report .qdrep (needs nsys)"


def sniff(path: Path, head: bytes) -> bool:
    return path.suffix.lower() == ".qdrep"


def parse(path: Path) -> Parsed:
    return nsys_rep.parse_report(path, FORMAT)
