"""The notebooks and the ``python -m jaxmb`` demo run cleanly, so that neither rots.

Each notebook under ``notebooks/`` is executed top to bottom in a fresh ``python3`` kernel (a separate process:
the float64 switch of ``conftest.py`` does not reach it; a notebook that wants float64 enables it itself). The
demo and the notebooks run compiled without LLVM's optimizations (`checks.fast_compile_environment`: 02, 01 and
04 in 64, 43 and 32 s instead of 79, 56 and 46), but for the notebooks of `OPTIMIZED`: the operational-space
notebook's rollout of 1 500 steps ran 2.8x longer unoptimized. Each takes tens of seconds, mostly XLA compilation.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from checks import fast_compile_environment

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 600
PYTHON_WARNING = re.compile(r"\w+Warning: ")
OPTIMIZED = {"03_operational_space.ipynb"}  # notebooks whose run time, not their compile time, dominates


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks found under {REPO / 'notebooks'}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"{path.name}: cells {dirty} have outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    env = dict(os.environ) if path.name in OPTIMIZED else fast_compile_environment()
    client.execute(env=env)  # raises CellExecutionError, with the cell and its traceback, if a cell fails
    warnings = [o.text for c in nb.cells if c.cell_type == "code" for o in c.outputs
                if o.output_type == "stream" and o.name == "stderr" and PYTHON_WARNING.search(o.text)]
    assert not warnings, f"{path.name} emits warnings:\n" + "\n".join(warnings)


def test_demo_runs():
    run = subprocess.run([sys.executable, "-m", "jaxmb", "--batch", "256"], cwd=REPO, capture_output=True,
                         text=True, timeout=900, env=fast_compile_environment())
    assert run.returncode == 0, f"python -m jaxmb failed:\n{run.stdout}\n{run.stderr}"
    assert not PYTHON_WARNING.search(run.stderr), f"python -m jaxmb emits warnings:\n{run.stderr}"
    match = re.search(r"max \|FD\(q, qd, ID\(q, qd, qdd\)\) - qdd\| = (\S+)", run.stdout)
    assert match, f"no round-trip line in the output:\n{run.stdout}"
    assert float(match.group(1)) < 1e-3  # float32; about 2e-5 on the quadruped
    assert "batch of 256 random states, float32" in run.stdout
    assert "states/s" in run.stdout and "x forward" in run.stdout
