"""The benchmark suite's entry point runs end to end (on a tiny configuration, into a temporary folder), so the
scripts cannot rot; their figures are not tested."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_benchmark_suite_runs_end_to_end_on_a_tiny_configuration():
    readme = (ROOT / "README.md").read_text()
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--tiny", "--device", "cpu"],
                         capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for figure in ("ABA, panda float32 batch 4", "grad(ABA) / ABA", "explicit M^-1", "Lambda^-1, 1 frame(s)",
                   "d qdd/d (q, qd, tau), panda float32",
                   "chain of 4 bodies", "binary tree of 4 bodies"):
        assert figure in out.stdout, figure
    assert (ROOT / "README.md").read_text() == readme
