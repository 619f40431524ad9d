"""The DDP training-step workload under torchrun on the CPU (gloo, 2 processes): both ways of
averaging gradients leave the ranks with the same weights, the straggler option runs."""
import os
import re
import shutil
import subprocess
import sys

import pytest

TORCHRUN = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")


@pytest.mark.slow
@pytest.mark.skipif(not TORCHRUN, reason="torchrun not installed")
@pytest.mark.parametrize("comm,port", [("ddp", "29531"), ("manual", "29532")])
def test_two_ranks_stay_in_sync(comm, port, tmp_path):
    p = subprocess.run([TORCHRUN, "--nproc-per-node", "2", "--master-port", port, "-m", "profkit.kernels.ddp_step",
                        "--steps", "2", "--warmup", "1", "--layers", "2", "--hidden", "32", "--tokens", "8",
                        "--comm", comm, "--slow-rank", "1", "--slow-matmuls", "2"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = sorted(re.findall(r"rank \d/\d .*?params_in_sync=\w+", p.stdout))
    assert len(lines) == 2 and all("params_in_sync=True" in l and f" {comm} " in l for l in lines)
    assert "slow=False" in lines[0] and "slow=True" in lines[1]
