"""The benchmark suite's entry point runs end to end (on a tiny configuration, into a temporary folder), so the
scripts cannot rot; the READMEs' tables are what `benchmarks/run.py` generates from the results files. The figures
themselves are not tested."""

import importlib.util
import json
import re
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
    benchmarks_readme = (ROOT / "benchmarks" / "README.md").read_text()
    findings = (ROOT / "benchmarks" / "findings.md").read_text()
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--tiny", "--device", "cpu"],
                         capture_output=True, text=True, timeout=1200, env=fast_compile_environment())
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for figure in ("ABA, panda float32 batch 4", "grad(ABA) / ABA", "explicit M^-1", "Lambda^-1, 1 frame(s)",
                   "d qdd/d (q, qd, tau), panda float32",
                   "chain of 4 bodies", "binary tree of 4 bodies"):
        assert figure in out.stdout, figure
    assert (ROOT / "README.md").read_text() == readme
    assert (ROOT / "benchmarks" / "README.md").read_text() == benchmarks_readme
    assert (ROOT / "benchmarks" / "findings.md").read_text() == findings


def test_readme_table_of_one_backend_leaves_the_other_backends_table():
    run = benchmarks_run()
    for path in (ROOT / "README.md", ROOT / "benchmarks" / "README.md"):
        text = path.read_text()
        for backend in ("cpu", "gpu"):
            assert all(marker in text for marker in run.markers(backend)), (path, backend)
    text = "\n".join(["intro", *run.markers("cpu")[:1], "cpu figures", run.markers("cpu")[1], "between",
                      run.markers("gpu")[0], "old gpu figures", run.markers("gpu")[1], "end"])
    suite = {"date": "2026-11-26", "mode": "quick", "scripts": {}, "machine": {"backend": "gpu", "device": "H200"}}
    for block, says in ((run.table(suite), "gpu backend, H200"), (run.summary(suite), "one H200")):
        new = run.rewrite_readme(text, block)
        assert "cpu figures" in new and "old gpu figures" not in new and says in new
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
    assert run.GATHERED not in run.table(suite)
    table = run.table({**suite, "note": "Rows marked (b) come from a second run."})
    assert f"\n{run.GATHERED}\n\n| figure |" in table
    assert "more than one run" in run.summary({**suite, "note": "Rows marked (b) come from a second run."})


def test_committed_tables_are_generated_from_the_committed_results():
    """Both READMEs' tables, and findings.md's, are what `run.py --tables` writes from benchmarks/results/: nobody
    edits them by hand."""
    run = benchmarks_run()
    readme, benchmarks_readme = (ROOT / "README.md").read_text(), (ROOT / "benchmarks" / "README.md").read_text()
    assert run.rewrite_tables(readme, benchmarks_readme) == (readme, benchmarks_readme)
    findings = (ROOT / "benchmarks" / "findings.md").read_text()
    assert run.rewrite_script_tables(findings) == findings
    assert re.findall(r"<!-- results:([\w.-]+):begin -->", benchmarks_readme), "benchmarks/README.md has no tables"


def test_benchmarks_readme_tables_are_regenerated_from_a_suite_file(tmp_path):
    """A suite file rewrites its backend's tables in both READMEs, and a per-script file its table in
    benchmarks/README.md; the other backend's tables stay."""
    run = benchmarks_run()
    aba = {"robot": "talos_full_v2", "algorithm": "aba", "dtype": "float32", "batch": 4096, "states_per_s": 2.5e5,
           "compile_s": 2.0, "ratio_vs_pinocchio": 1.5}
    machine = {"backend": "cpu", "cpu": "Test CPU", "cores": 8, "jax": "0.0"}
    suite = {"date": "2030-01-01", "mode": "quick", "machine": machine,
             "scripts": {"dynamics": {"exit": 0, "seconds": 1.0, "results": {"machine": machine, "results": [aba]}}}}
    (tmp_path / "cpu-8core-2030-01-01.json").write_text(json.dumps(suite))
    (tmp_path / "dynamics-cpu-8core.json").write_text(json.dumps({"machine": machine, "results": [aba]}))
    cpu, gpu, grid = run.markers("cpu"), run.markers("gpu"), run.script_markers("dynamics-cpu-8core")
    readme = "\n".join(["top", cpu[0], "old", cpu[1], gpu[0], "gpu rows", gpu[1]])
    benchmarks_readme = "\n".join(["top", cpu[0], "old", cpu[1], grid[0], "old grid", grid[1], gpu[0], "gpu rows",
                                    gpu[1]])
    readme, benchmarks_readme = run.rewrite_tables(readme, benchmarks_readme, results_dir=tmp_path)
    assert "old" not in readme and "gpu rows" in readme and "Test CPU, 8 cores" in readme
    assert "| Forward dynamics (ABA), talos_full_v2 float32, batch 4096 | 2.50e5 states/s | 1.5x Pinocchio" in readme
    assert "old" not in benchmarks_readme and "gpu rows" in benchmarks_readme
    assert "| ABA, talos_full_v2 float32 batch 4096 | 4 us/state, compile 2.0 s | 1.5x Pinocchio parallel |" in \
        benchmarks_readme
    assert "| ABA, one device, batch 4096 | 1.5 |" in benchmarks_readme


def test_top_level_readme_carries_no_figures_that_go_stale():
    """The top-level README's generated rows name the machine, not the date, and give throughputs, not times."""
    stale = re.compile(r"us/state|ns per|[0-9]x (faster|slower)|20[0-9]{2}-[0-9]{2}-[0-9]{2}")
    for doc in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        assert not stale.search(doc.read_text()), doc
