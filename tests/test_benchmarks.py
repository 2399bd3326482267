"""The benchmark suite's entry point runs end to end (on a tiny configuration, into a temporary folder), so the
scripts cannot rot; their figures are not tested."""

import importlib.util
import subprocess
import sys
from pathlib import Path

from checks import fast_compile_environment

ROOT = Path(__file__).parent.parent


def benchmarks_run():
    """`benchmarks/run.py` as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location("benchmarks_run", ROOT / "benchmarks" / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    return run


def test_benchmark_suite_runs_end_to_end_on_a_tiny_configuration():
    readme = (ROOT / "README.md").read_text()
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--tiny", "--device", "cpu"],
                         capture_output=True, text=True, timeout=1200, env=fast_compile_environment())
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for figure in ("ABA, panda float32 batch 4", "grad(ABA) / ABA", "explicit M^-1", "Lambda^-1, 1 frame(s)",
                   "d qdd/d (q, qd, tau), panda float32",
                   "chain of 4 bodies", "binary tree of 4 bodies"):
        assert figure in out.stdout, figure
    assert (ROOT / "README.md").read_text() == readme


def test_readme_table_of_one_backend_leaves_the_other_backends_table():
    run = benchmarks_run()
    readme = (ROOT / "README.md").read_text()
    for backend in ("cpu", "gpu"):
        assert all(marker in readme for marker in run.markers(backend)), backend
    text = "\n".join(["intro", *run.markers("cpu")[:1], "cpu figures", run.markers("cpu")[1], "between",
                      run.markers("gpu")[0], "old gpu figures", run.markers("gpu")[1], "end"])
    suite = {"date": "2026-11-26", "mode": "quick", "scripts": {}, "machine": {"backend": "gpu", "device": "H200"}}
    new = run.rewrite_readme(text, run.table(suite))
    assert "cpu figures" in new and "old gpu figures" not in new and "gpu backend, H200" in new
    assert new.startswith("intro\n") and new.endswith("end") and "\nbetween\n" in new


def test_suite_file_takes_only_the_results_its_scripts_wrote(tmp_path):
    """A results file left by another run (a GPU's, where this run's script measured nothing) stays out."""
    run = benchmarks_run()
    (tmp_path / "fused-gpu-16core.json").write_text('{"machine": {"backend": "gpu"}, "rows": []}')
    (tmp_path / "chains-gpu-16core.json").write_text('{"machine": {"backend": "gpu"}, "rows": []}')
    before = {stem: run.results_files(tmp_path, stem) for stem in ("fused", "chains")}
    (tmp_path / "chains-cpu-2core.json").write_text('{"machine": {"backend": "cpu"}, "rows": [1]}')
    suite = run.collect("quick", {"fused": (0, 1.0, "fused", before["fused"]),
                                  "chains": (0, 1.0, "chains", before["chains"])}, tmp_path)
    assert suite["scripts"]["fused"]["results"] is None
    assert suite["scripts"]["chains"]["results"]["rows"] == [1] and suite["machine"] == {"backend": "cpu"}


def test_table_of_a_suite_gathered_from_several_runs_carries_its_note():
    run = benchmarks_run()
    suite = {"date": "2026-11-27", "mode": "quick", "scripts": {}, "machine": {"backend": "gpu"}}
    assert "Rows marked" not in run.table(suite)
    table = run.table({**suite, "note": "Rows marked (b) come from a second run."})
    assert "\nRows marked (b) come from a second run.\n\n| figure |" in table
