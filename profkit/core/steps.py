"""What a step range is called: `step 3`, `ProfilerStep#3`, `iteration 3`, `train_step 3`.

One pattern for capture (`--step N` picks the range), for the phases analysis (steps found
from ranges) and for advise (`step_free`: the same operator in every step is one item).
"""

import re

STEP_RE = re.compile(r"^(?:step|iteration|iter|train_step|train step|ProfilerStep)\s*[#:_ -]*\s*(\d+)$", re.I)


def step_free(path: str) -> str:
    """A path with its step ranges' numbers as `*` (`step 3/forward/attn` -> `step */forward/attn`):
    the same operator in every step is one item, its steps its calls."""
    parts = path.split("/")
    if not any(STEP_RE.match(p.strip()) for p in parts):
        return path
    return "/".join(
        STEP_RE.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + "*", p.strip()) if STEP_RE.match(p.strip()) else p
        for p in parts
    )
