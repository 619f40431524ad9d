"""What a step range is called: `step 3`, `ProfilerStep#3`, `iteration 3`, `train_step 3`.

One pattern for capture (`--step N` picks the range) and for the phases analysis (steps found
from ranges).
"""

import re

STEP_RE = re.compile(r"^(?:step|iteration|iter|train_step|train step|ProfilerStep)\s*[#:_ -]*\s*(\d+)$", re.I)
