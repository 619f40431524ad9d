"""A small JSON file (capture.json, peaks.json) read whole or refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

from profkit.core.errors import BadInput


def load(path) -> object:
    """The parsed document; BadInput for a file that cannot be read, is not JSON, or nests
    deeper than the parser's recursion allows (a hostile file: 100,000 brackets)."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise BadInput(path, f"cannot read ({e.strerror or e})") from None
    except RecursionError:
        raise BadInput(path, "not JSON profkit reads (nested too deep)") from None
    except ValueError as e:
        raise BadInput(path, f"not JSON ({e})") from None
