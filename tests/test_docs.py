"""Every ```python block of README.md and of docs/*.md runs, and prints what its comments say, so that the docs do
not rot.

A page's blocks run in order in one namespace: a later block uses what the earlier ones defined, as a reader
pasting them one after the other into one interpreter would. Each page runs in a fresh Python process
(``python tests/test_docs.py PAGE``), in a temporary directory (the files a page writes land there), with JAX's
defaults: float32, as the README's quickstart is written and as a user's interpreter starts (the float64 switch of
``conftest.py`` does not reach the process; a page that wants float64 enables it itself). Its programs compile
without LLVM's optimizations (`checks.fast_compile_environment`): a page calls each of them a few times, so the
cheaper compile wins, and no arithmetic changes.

What a page must hold to pass:

* Its code fences are well formed: each ``` fence is closed by a line of backticks alone, so no block swallows
  the prose after it.
* Every ```python block runs without an exception. A block that cannot run (a signature, a shell command) is not
  a ```python block: it is ```text or ```console. A block that is Python but must not run says so and why in the
  comment ``<!-- no-run: reason -->`` on the line before its fence; the reason is required.
* A top-level ``print(...)`` whose line ends in a comment prints that comment: the printed text equals it, or,
  where the comment holds ``...``, starts with its text before the first ``...``
  (``print(model.joint_names)  # ('root', 'FL_hip_abduction', ...)``).
* No `DeprecationWarning` comes from the page's own code (an API the docs show that JAX or jaxmb deprecated).

A page whose blocks import an optional package that is not installed (mujoco, pinocchio, viser, ...) is skipped,
naming it. A page without ```python blocks only has its fences checked, in this process.
"""

import ast
import contextlib
import io
import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^( *)(`{3,})\s*([^`]*)$")  # indentation, backticks, info string
NO_RUN = re.compile(r"^\s*<!--\s*no-run:(.*?)-->\s*$")
PAGE_TIMEOUT_S = 600
MISSING_PACKAGE_EXIT = 3  # the runner's exit status when an optional package is missing
PAGE_MODULE = "jaxmb_docs_page"  # the __name__ of a page's namespace, which the DeprecationWarning filter names


class Block:
    """A fenced code block: its info string (``python``, ``text``, ...), the line of its opening fence (1-based),
    its source dedented by the fence's indentation, and the reason of a ``no-run`` marker, or None."""

    def __init__(self, info, line, source, no_run):
        self.info, self.line, self.source, self.no_run = info, line, source, no_run


def blocks(path):
    """The fenced code blocks of the markdown file ``path``, in order. Raises ``ValueError`` naming the line of a
    fence that is never closed, of a ``no-run`` marker without a reason, or of one before no ```python fence."""
    lines = Path(path).read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, ticks, info = len(opening.group(1)), opening.group(2), opening.group(3).strip()
        body, j = [], i + 1
        while j < len(lines) and not re.fullmatch(r" *" + ticks + r"`*\s*", lines[j]):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        if j == len(lines):
            raise ValueError(f"{path}:{i + 1}: the fence ({ticks}{info}) is never closed by a line of {ticks} alone")
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = NO_RUN.match(lines[k]) if k >= 0 else None
        if marker and not marker.group(1).strip():
            raise ValueError(f"{path}:{k + 1}: a no-run marker names no reason")
        if marker and info != "python":
            raise ValueError(f"{path}:{k + 1}: a no-run marker before a ```{info} block (only python blocks run)")
        found.append(Block(info, i + 1, "\n".join(body) + "\n", marker.group(1).strip() if marker else None))
        i = j + 1
    return found


def runnable(path):
    """The ```python blocks of ``path`` that run: all but those marked no-run."""
    return [b for b in blocks(path) if b.info == "python" and b.no_run is None]


def _expected_output(statement, source_lines):
    """The comment that ends the line of a top-level one-line ``print(...)`` statement, or None."""
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
            and getattr(statement.value.func, "id", None) == "print" and statement.lineno == statement.end_lineno):
        return None
    rest = source_lines[statement.lineno - 1][statement.end_col_offset:]
    comment = re.match(r"\s*#\s?(.*)$", rest)
    return comment.group(1).strip() if comment else None


def _matches(printed, expected):
    head = expected.split("...")[0]
    return printed.startswith(head.rstrip()) if "..." in expected else printed == expected


def run_page(path):
    """Run the ```python blocks of ``path`` in order in one namespace, statement by statement, so that a failure's
    traceback names the page and its line; check each commented top-level ``print``'s output."""
    path = Path(path).resolve()
    warnings.filterwarnings("error", category=DeprecationWarning, module=PAGE_MODULE)
    namespace = {"__name__": PAGE_MODULE}
    for block in runnable(path):
        tree = ast.parse(block.source, filename=str(path))
        ast.increment_lineno(tree, block.line)  # line numbers of the page, not of the block
        source_lines = [""] * block.line + block.source.splitlines()
        for statement in tree.body:
            expected = _expected_output(statement, source_lines)
            code = compile(ast.Module([statement], type_ignores=[]), str(path), "exec")
            try:
                if expected is None:
                    exec(code, namespace)
                    continue
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    exec(code, namespace)
            except ImportError as e:  # jaxmb's own ImportError of an optional package carries the missing module
                missing = e if isinstance(e, ModuleNotFoundError) else e.__cause__
                if isinstance(missing, ModuleNotFoundError) and (missing.name or "jaxmb").split(".")[0] != "jaxmb":
                    print(f"{path.name}:{statement.lineno}: the optional package {missing.name!r} is not installed")
                    sys.exit(MISSING_PACKAGE_EXIT)
                raise
            printed = out.getvalue().strip()
            print(printed)
            if not _matches(printed, expected):
                sys.exit(f"{path.name}:{statement.lineno}: printed\n    {printed}\nwhere its comment says\n"
                         f"    {expected}")


@pytest.mark.parametrize("path", PAGES, ids=[p.name for p in PAGES])
def test_page_runs_as_written(path, tmp_path):
    from checks import fast_compile_environment

    if not runnable(path):  # blocks() raises for a broken fence or marker
        return
    env = fast_compile_environment()
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    start = time.perf_counter()
    run = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(path)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=PAGE_TIMEOUT_S)
    seconds = time.perf_counter() - start
    if run.returncode == MISSING_PACKAGE_EXIT:
        pytest.skip(run.stdout.strip().splitlines()[-1])
    assert run.returncode == 0, (f"{path.relative_to(REPO)} failed after {seconds:.0f} s:\n{run.stdout[-4000:]}\n"
                                 f"{run.stderr[-8000:]}")


def layout_files(path):
    """The package files that the tables of docs/layout.md list: a first cell's `jaxmb/...py`, or a bare
    `name.py` in a section whose heading names its folder (`jaxmb/sim/`)."""
    listed, folder = set(), None
    for line in Path(path).read_text().splitlines():
        if line.startswith("#"):
            heading = re.search(r"`(jaxmb/[\w/]*/)`", line)
            folder = heading.group(1) if heading else None
        elif line.startswith("|"):
            for name in re.findall(r"`([\w/.]+\.py)`", line.split("|")[1]):
                listed.add(name if name.startswith("jaxmb/") else f"{folder or ''}{name}")
    return listed


def test_the_layout_lists_every_module_of_the_package():
    package = {p.relative_to(REPO).as_posix() for p in (REPO / "jaxmb").rglob("*.py")}
    listed = layout_files(REPO / "docs" / "layout.md")
    assert not package - listed, f"docs/layout.md does not list {sorted(package - listed)}"
    assert not listed - package, f"docs/layout.md lists files the package lacks: {sorted(listed - package)}"


def test_the_pages_are_found():
    assert (REPO / "README.md") in PAGES and len(PAGES) > 10, PAGES
    assert any(runnable(p) for p in PAGES)


def test_broken_fences_and_markers_are_refused(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\nx = 1\n``` prose glued to the fence\n\nmore prose\n")
    with pytest.raises(ValueError, match="never closed"):
        blocks(page)
    page.write_text("<!-- no-run: -->\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match="no reason"):
        blocks(page)
    page.write_text("  ```python\n  x = 1\n  ```\n<!-- no-run: needs a robot -->\n\n```python\ny = x\n```\n"
                    "````text\n```python\n````\n")
    first, second, third = blocks(page)
    assert (first.source, first.no_run, second.no_run, second.line) == ("x = 1\n", None, "needs a robot", 6)
    assert (third.info, third.source) == ("text", "```python\n")
    assert [b.source for b in runnable(page)] == ["x = 1\n"]


def test_a_page_runs_in_order_and_fails_on_a_wrong_print_or_a_deprecated_call(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text("```python\nx = [1, 2]\n```\n\nprose\n\n```python\nprint(x)  # [1, 2]\n```\n")
    with warnings.catch_warnings():
        run_page(page)
    assert capsys.readouterr().out == "[1, 2]\n"
    page.write_text("```python\nprint(3)  # 4\n```\n")
    with warnings.catch_warnings(), pytest.raises(SystemExit, match="where its comment says"):
        run_page(page)
    page.write_text("```python\nimport warnings\nwarnings.warn('old', DeprecationWarning)\n```\n")
    with warnings.catch_warnings(), pytest.raises(DeprecationWarning, match="old"):
        run_page(page)


def test_a_print_is_checked_against_its_comment():
    assert _matches("Model('q', nb=13)", "Model('q', nb=13)")
    assert not _matches("Model('q', nb=12)", "Model('q', nb=13)")
    assert _matches("('root', 'FL_hip_abduction', 'FL_hip')", "('root', 'FL_hip_abduction', ...)")
    assert not _matches("('root', 'FR_hip')", "('root', 'FL_hip_abduction', ...)")
    statement = ast.parse("print(x)  # 3").body[0]
    assert _expected_output(statement, ["print(x)  # 3"]) == "3"
    assert _expected_output(ast.parse("print(x)").body[0], ["print(x)"]) is None


if __name__ == "__main__":  # python tests/test_docs.py PAGE: run one page's blocks (what the test does per page)
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/test_docs.py PAGE.md")
    run_page(sys.argv[1])
