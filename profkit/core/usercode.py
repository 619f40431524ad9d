"""A user's own Python code named on the command line: a dotted module, or a .py file by path
(`profkit tune FILE:KERNEL`, `profkit bench FILE:WORKLOAD`). Its import errors are one line."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from profkit.core.errors import BadArgument


def load_module(name: str):
    if name.endswith(".py") or "/" in name:
        path = Path(name)
        if not path.is_file():
            raise BadArgument(f"{name}: no such file")
        spec = importlib.util.spec_from_file_location(f"_profkit_user_{path.stem}", path)
        if spec is None or spec.loader is None:  # a suffix Python does not load
            raise BadArgument(f"{name}: not a Python file")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses and pickling look their module up by name
        try:
            spec.loader.exec_module(mod)
        except Exception as e:  # the user's file: its error, one line
            raise BadArgument(f"{name}: importing it failed: {type(e).__name__}: {e}") from None
        return mod
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise BadArgument(f"no module {name!r} ({e})") from None
