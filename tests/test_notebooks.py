"""The notebooks and the ``python -m jaxmb`` demo run cleanly, so that neither rots.

The notebooks under ``notebooks/`` are committed with their outputs, printed tables and figures, so that they read
where the repository is browsed: every cell that prints or draws keeps what it printed or drew, each notebook holds
at least one figure, and no cell keeps the timestamps of its run. ``python tests/test_notebooks.py [NAME ...]``
runs the notebooks (all, or those named) in place and stores them so, with the ordinary XLA options; run it after
editing a notebook.

The suite also executes each notebook top to bottom, a copy of it (the committed file is left as it is), in a fresh
``python3`` kernel: a separate process, which the float64 switch of ``conftest.py`` does not reach (a notebook that
wants float64 enables it itself). It must run without errors or Python warnings, and print and draw in the cells
whose stored outputs say so. There the demo and the notebooks run compiled without LLVM's optimizations
(`checks.fast_compile_environment`): their programs are called a few times, so compiling dominates and the cheaper
compile wins. The notebooks of `OPTIMIZED` are the exception: their run time dominates, and it grows several-fold
unoptimized (the operational-space notebook's rollout). Each notebook takes tens of seconds, mostly XLA compilation.
"""

import ast
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
OPTIMIZED = {"03_operational_space.ipynb", "05_simulation.ipynb"}  # notebooks whose run time, not their compile time, dominates
REFRESH = "run `python tests/test_notebooks.py {}` and commit the notebook with its outputs"


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks found under {REPO / 'notebooks'}"


def _prints_or_draws(source):
    """Whether a code cell surely produces output: it calls ``print`` or ``show`` (``plt.show()``) outside the
    functions it defines, or ends in a bare expression other than a call, which IPython displays."""
    tree = ast.parse(source)  # the notebooks hold no IPython magics
    calls, stack = set(), list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue  # not run by defining it
        if isinstance(node, ast.Call):
            calls.add(getattr(node.func, "id", getattr(node.func, "attr", None)))
        stack.extend(ast.iter_child_nodes(node))
    displayed = bool(tree.body) and isinstance(tree.body[-1], ast.Expr) and not isinstance(tree.body[-1].value,
                                                                                           ast.Call)
    return bool(calls & {"print", "show"}) or displayed


def _outputs_kinds(cell):
    """What a code cell's outputs hold: stream names and MIME types, a set (streams arrive in chunks)."""
    return {o.name if o.output_type == "stream" else o.output_type for o in cell.outputs
            if o.output_type in ("stream", "error")} | {m for o in cell.outputs for m in o.get("data", {})}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_with_outputs(path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()]
    refresh = REFRESH.format(path.name)
    counts = [c.execution_count for _, c in code]
    assert counts == list(range(1, len(code) + 1)), \
        f"{path.name}: not run top to bottom in one kernel (execution counts {counts}); {refresh}"
    missing = [i for i, c in code if _prints_or_draws(c.source) and not c.outputs]
    assert not missing, f"{path.name}: cells {missing} print or draw but store no output; {refresh}"
    errors = [i for i, c in code if "error" in _outputs_kinds(c)]
    assert not errors, f"{path.name}: cells {errors} store an error"
    warnings = [i for i, c in code for o in c.outputs
                if o.output_type == "stream" and o.name == "stderr" and PYTHON_WARNING.search(o.text)]
    assert not warnings, f"{path.name}: cells {warnings} store Python warnings"
    assert any("image/png" in _outputs_kinds(c) for _, c in code), f"{path.name}: stores no figure (image/png)"
    timed = [i for i, c in enumerate(nb.cells) if "execution" in c.metadata]
    assert not timed, f"{path.name}: cells {timed} store the timestamps of their run; {refresh}"


def execute(nb, cwd, env):
    """Run the notebook ``nb`` (nbformat, version 4) top to bottom in a fresh ``python3`` kernel started in
    ``cwd`` with the environment ``env``, filling in its outputs; no timestamps in the cells' metadata. Raises
    nbclient's CellExecutionError, with the cell and its traceback, if a cell fails."""
    import nbclient

    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(cwd)}}).execute(env=env)
    return nb


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    stored = nbformat.read(path, as_version=4)
    env = dict(os.environ) if path.name in OPTIMIZED else fast_compile_environment()
    nb = execute(nbformat.read(path, as_version=4), path.parent, env)  # in memory; the file stays as committed
    nbformat.write(nb, tmp_path / path.name)  # the executed copy, to look at when a check below fails
    warnings = [o.text for c in nb.cells if c.cell_type == "code" for o in c.outputs
                if o.output_type == "stream" and o.name == "stderr" and PYTHON_WARNING.search(o.text)]
    assert not warnings, f"{path.name} emits warnings:\n" + "\n".join(warnings)
    stale = [i for i, (run, kept) in enumerate(zip(nb.cells, stored.cells)) if run.cell_type == "code"
             and _outputs_kinds(run) != _outputs_kinds(kept)]
    assert not stale, (f"{path.name}: the stored outputs of cells {stale} differ in kind from those of a run "
                       f"(a cell prints, draws or warns where it did not); {REFRESH.format(path.name)}")


def test_demo_runs():
    run = subprocess.run([sys.executable, "-m", "jaxmb", "--batch", "256", "--worlds", "16"], cwd=REPO,
                         capture_output=True, text=True, timeout=900, env=fast_compile_environment())
    assert run.returncode == 0, f"python -m jaxmb failed:\n{run.stdout}\n{run.stderr}"
    assert not PYTHON_WARNING.search(run.stderr), f"python -m jaxmb emits warnings:\n{run.stderr}"
    match = re.search(r"max \|FD\(q, qd, ID\(q, qd, qdd\)\) - qdd\| = (\S+)", run.stdout)
    assert match, f"no round-trip line in the output:\n{run.stdout}"
    assert float(match.group(1)) < 1e-3  # float32; about 2e-5 on the quadruped
    assert "batch of 256 random states, float32" in run.stdout
    assert "states/s" in run.stdout and "x forward" in run.stdout
    assert "simulation (jaxmb.sim): 16 worlds" in run.stdout and "stopped worlds 0" in run.stdout
    carried = re.search(r"world 0's feet carry \S+ N vertically, (\S+) x its weight", run.stdout)
    assert carried and abs(float(carried.group(1)) - 1.0) < 0.02, run.stdout  # standing after half a second


if __name__ == "__main__":  # python tests/test_notebooks.py [NAME ...]: run the notebooks and store their outputs
    import nbformat

    wanted = [Path(arg).name for arg in sys.argv[1:]]  # a file name, a path or the start of a name ("03")
    chosen = [p for p in NOTEBOOKS if not wanted or any(p.name.startswith(w) for w in wanted)]
    unknown = [w for w in wanted if not any(p.name.startswith(w) for p in NOTEBOOKS)]
    if unknown:
        sys.exit(f"no notebook under notebooks/ matches {unknown}")
    for path in chosen:
        print(f"running {path.relative_to(REPO)}", flush=True)
        nbformat.write(execute(nbformat.read(path, as_version=4), path.parent, dict(os.environ)), path)
