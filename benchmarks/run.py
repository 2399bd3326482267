"""The whole benchmark suite in one command: every script, one results file, the tables of both READMEs regenerated.

    python benchmarks/run.py --quick                 # about 10 minutes on a 2-core CPU
    python benchmarks/run.py --device gpu --large    # on a GPU machine: the full grids, batches up to 262144
    python benchmarks/run.py --tiny                  # seconds; proves the entry point works (run by the tests)
    python benchmarks/run.py --device gpu --quick --only loops,derivatives   # part of a suite, merged into the day's file
    python benchmarks/run.py --tables                # run nothing: regenerate every table from results/*.json
    python benchmarks/run.py --readme-from FILE      # run nothing: the tables of one saved suite file

Runs `dynamics.py`, `operators.py`, `opspace.py`, `derivatives.py`, `chains.py`, `loops.py`, `fused.py` (on a GPU;
elsewhere it measures nothing), `sim.py` (with MJX and MuJoCo C where installed) and, where MuJoCo MJX and
jaxsim are installed (jaxsim with sdformat's ``gz`` or ``ign`` on PATH), `mjx_peer.py` and `jaxsim_peer.py`, each in
its own process (one compile cache each, as a user's first call sees it), with the same backend. Each writes its
own ``results/<script>-<backend>-<cores>core.json`` and plot; this script then gathers them into
``results/<backend>-<cores>core-<date>.json`` with the machine (a *suite file*) and regenerates the tables:

* in the top-level README.md, between the ``benchmarks:<backend>:begin`` and ``benchmarks:<backend>:end`` markers,
  a few headline rows of that backend's latest suite file (`summary`), with the machine named;
* in benchmarks/README.md, between the same markers, every headline row of that suite file (`table`), and between
  ``results:<stem>:begin`` / ``results:<stem>:end`` markers the table of the per-script file
  ``results/<stem>.json`` (`script_table`).

``--tables`` regenerates all of them from the committed results files; ``--readme-from FILE`` writes the tables of one
saved suite file's backend (one fetched from a GPU machine, say). ``--tiny`` runs every script on a tiny
configuration into a temporary folder and leaves the committed results and both READMEs alone.
"""

import argparse
import datetime
import re
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
README = HERE.parent / "README.md"  # the headline rows of each backend (`summary`)
BENCHMARKS_README = HERE / "README.md"  # every headline row (`table`) and the per-script tables (`script_table`)
FINDINGS = HERE / "findings.md"  # the per-script tables of the figures that findings.md explains (`script_table`)
RESULTS = HERE / "results"


def markers(backend):
    """The README's markers around the table of one backend's latest run (one table per backend)."""
    return f"<!-- benchmarks:{backend}:begin -->", f"<!-- benchmarks:{backend}:end -->"


def script_markers(stem):
    """benchmarks/README.md's markers around the table of one per-script results file, ``results/<stem>.json``."""
    return f"<!-- results:{stem}:begin -->", f"<!-- results:{stem}:end -->"


# script -> arguments for --tiny, --quick and the full suite
SCRIPTS = {
    "dynamics": {"tiny": ["--robots", "panda", "--batches", "4", "--dtypes", "float32", "--algorithms", "aba",
                          "--grad-batch", "4"], "quick": ["--quick"], "full": []},
    "operators": {"tiny": ["--quick", "--batch", "4", "--robots", "panda"], "quick": ["--quick"], "full": []},
    "opspace": {"tiny": ["--quick", "--batch", "4", "--frames", "1"], "quick": ["--quick"], "full": []},
    "derivatives": {"tiny": ["--quick", "--batch", "4", "--robots", "panda"], "quick": ["--quick"], "full": []},
    "chains": {"tiny": ["--sizes", "4", "--batch", "4", "--per-level-max", "4"],
               "quick": ["--quick", "--per-level-max", "8"], "full": []},
    "loops": {"tiny": ["--tiny"], "quick": ["--quick"], "full": []},
    "fused": {"tiny": ["--quick", "--batches", "4"], "quick": ["--quick"], "full": []},
    "mjx_peer": {"tiny": ["--batches", "4"], "quick": ["--batches", "1024", "4096"], "full": []},
    "jaxsim_peer": {"tiny": ["--batches", "4"], "quick": ["--batches", "1024", "4096"], "full": []},
    "sim": {"tiny": ["--tiny"], "quick": ["--quick"], "full": []},
    "models": {"tiny": ["--tiny"], "quick": ["--quick"], "full": []},
    "hamiltonian": {"tiny": ["--tiny"], "quick": ["--quick"], "full": []},
    "partitioning": {"tiny": ["--tiny"], "quick": ["--quick"], "full": []},
    "sensitivity": {"tiny": ["--tiny"], "quick": ["--quick"], "full": []},
    "compile": {"tiny": ["--tiny"], "quick": [], "full": []},
    "envs": {"tiny": ["--tiny"], "quick": ["--no-ppo"], "full": []},
    "sysid": {"tiny": ["--tiny"], "quick": ["--quick"], "full": []},
    "trajopt": {"tiny": ["--tiny"], "quick": ["--quick"], "full": []},
}


def result_stem(name, argv):
    """The name a script saves its results under (`common.save`)."""
    if name in ("dynamics", "derivatives"):  # a quick run keeps the full grid's file
        return f"{name}-quick" if "--quick" in argv else name
    return {"mjx_peer": "mjx", "jaxsim_peer": "jaxsim"}.get(name, name)


def has_module(name):
    """Whether `name` imports; a dotted name whose parent package is absent is simply absent."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def run_scripts(mode, device, large, results_dir, only=None):
    """Run each script (those named in ``only``, if given); returns {script: (returncode, seconds, results stem,
    the modification times of the results files of that stem before the script ran)}."""
    env = dict(os.environ, JAXMB_RESULTS_DIR=str(results_dir))
    if device:
        env["JAX_PLATFORMS"] = {"cpu": "cpu", "gpu": "cuda"}[device]
    status = {}
    for name, args in SCRIPTS.items():
        if only and name not in only:
            continue
        if name == "mjx_peer" and not has_module("mujoco.mjx"):
            print(f"== {name}: skipped (mujoco-mjx is not installed)", flush=True)
            continue
        if name == "jaxsim_peer" and not has_module("jaxsim"):
            print(f"== {name}: skipped (jaxsim is not installed)", flush=True)
            continue
        if name == "jaxsim_peer" and not (shutil.which("gz") or shutil.which("ign")):
            print(f"== {name}: skipped (jaxsim reads a URDF through sdformat's gz or ign executable, and neither is "
                  f"on PATH)", flush=True)
            continue
        argv = list(args[mode])
        if large and name == "dynamics":
            argv.append("--large")
        if large and name in ("mjx_peer", "jaxsim_peer"):
            argv = ["--batches", "4096", "65536"]
        if large and name == "sim":
            argv = ["--gpu"]
        print(f"== {name} {' '.join(argv)}", flush=True)
        stem = result_stem(name, argv)
        before = results_files(results_dir, stem)
        t0 = datetime.datetime.now()
        rc = subprocess.call([sys.executable, str(HERE / f"{name}.py"), *argv], cwd=HERE, env=env)
        status[name] = (rc, (datetime.datetime.now() - t0).total_seconds(), stem, before)
        print(f"== {name}: exit {rc} after {status[name][1]:.0f} s", flush=True)
    return status


def results_files(results_dir, stem):
    """``{path: modification time in ns}`` of the results files a script saves under ``stem``, one per machine."""
    return {p: p.stat().st_mtime_ns for p in Path(results_dir).glob(f"{stem}-*core.json")}


def collect(mode, status, results_dir):
    """Every script's results file of this run, with the machine, as one document: a file the script did not write
    or rewrite is another run's (a GPU's results, say, where this run's script measured nothing)."""
    suite = {"date": datetime.date.today().isoformat(), "mode": mode, "scripts": {}}
    for name, (rc, seconds, stem, before) in status.items():
        written = [(t, p) for p, t in results_files(results_dir, stem).items() if before.get(p) != t]
        found = [p for _, p in sorted(written)]
        payload = json.loads(found[-1].read_text()) if found and rc == 0 else None
        if payload:
            suite.setdefault("machine", payload.get("machine"))
        suite["scripts"][name] = {"exit": rc, "seconds": seconds, "results": payload}
    return suite


def _fmt(x, unit=""):
    if x is None:
        return "-"
    return f"{x:.3g}{unit}"


def _sharded_row(figure, devices, per_state_s, ratio, peer):
    """The row of a figure measured with the batch split over the devices (`jaxmb.sharded_vmap`)."""
    return (f"{figure}, `sharded_vmap` over {devices} CPU devices", f"{per_state_s * 1e6:.3g} us/state",
            f"{_fmt(ratio, 'x')} {peer}")


def _dynamics_rows(res):
    rows = []
    for r in res.get("results", []):
        chunked = f" (in chunks of {r['chunk']}: {{}})" if "chunk" in r else ""
        if r["algorithm"] == "grad_aba":
            sharded = (f"; {_fmt(r['sharded_cost_vs_forward'], 'x')} sharded over {r['devices']} devices"
                       if "devices" in r else "")
            rows.append((f"grad(ABA) / ABA, {r['robot']} {r['dtype']} batch {r['batch']}",
                         _fmt(r["cost_vs_forward"], "x") + chunked.format(_fmt(r.get("chunked_cost_vs_forward"), "x"))
                         + sharded, f"compile {r['compile_s']:.1f} s"))
        elif r["batch"] == max(x["batch"] for x in res["results"] if (x["algorithm"], x["robot"], x["dtype"])
                               == (r["algorithm"], r["robot"], r["dtype"])):
            peer = "Pinocchio parallel" if r["algorithm"] != "crba" else "Pinocchio loop"
            us = (f"{1e6 / r['states_per_s']:.3g} us/state"
                  + chunked.format(f"{1e6 / r['chunked_states_per_s']:.3g}" if chunked else ""))
            figure = f"{r['algorithm'].upper()}, {r['robot']} {r['dtype']} batch {r['batch']}"
            rows.append((figure, f"{us}, compile {r['compile_s']:.1f} s",
                         f"{_fmt(r['ratio_vs_pinocchio'], 'x')}"
                         + chunked.format(_fmt(r.get("chunked_ratio_vs_pinocchio"), "x")) + f" {peer}"))
            if "devices" in r:
                ideal = "" if r["algorithm"] != "crba" else f" on {r['devices']} cores (ideal scaling)"
                rows.append(_sharded_row(figure, r["devices"], 1 / r["sharded_states_per_s"],
                                         r.get("sharded_ratio_vs_pinocchio"), peer + ideal))
    return rows


def _operators_rows(res):
    rows = []
    for robot, figures_by_dtype in res.get("robots", {}).items():
        for dtype, figures in figures_by_dtype.items():
            for key, label, peer, on_cores in (("minv_factors", "explicit M^-1", "computeMinverse loop", True),
                                               ("minv_times", "M^-1 x", "abaInParallel", False),
                                               ("jacobian", "Jacobian of the deepest body", "computeFrameJacobian loop",
                                                False),
                                               ("centroidal_matrix", "centroidal momentum matrix", "ccrba loop",
                                                False)):
                f = (figures or {}).get(key)
                if f:
                    figure = f"{label}, {robot} {dtype}"
                    rows.append((figure, f"{f['per_state_s'] * 1e6:.3g} us/state",
                                 f"{_fmt(f.get('ratio_vs_peer'), 'x')} Pinocchio {peer}"))
                    if "devices" in f:
                        rows.append(_sharded_row(figure, f["devices"], f["sharded_per_state_s"],
                                                 f["sharded_ratio_vs_peer"], f"Pinocchio {peer}"
                                                 + (f" on {f['devices']} cores (ideal scaling)" if on_cores else "")))
    return rows


def _opspace_rows(res):
    rows = []
    for r in res.get("results", []):
        if r["route"] == "walk":
            figure = f"Lambda^-1, {r['frames']} frame(s), {r['robot']} {r['dtype']}"
            rows.append((figure, f"{r['s_per_state'] * 1e6:.3g} us/state",
                         f"{_fmt(r.get('ratio_vs_pinocchio_delassus'), 'x')} Pinocchio computeDelassusMatrix"))
            if "devices" in r:
                rows.append(_sharded_row(figure, r["devices"], r["sharded_s_per_state"],
                                         r["sharded_ratio_vs_pinocchio_delassus"],
                                         f"Pinocchio computeDelassusMatrix on {r['devices']} cores (ideal scaling)"))
    return rows


def _derivatives_rows(res):
    rows = []
    for robot, figures_by_dtype in res.get("robots", {}).items():
        for dtype, figures in figures_by_dtype.items():
            for key, label, peer in (("rnea_derivatives", "d tau/d (q, qd, qdd)", "computeRNEADerivatives"),
                                     ("aba_derivatives", "d qdd/d (q, qd, tau)", "computeABADerivatives")):
                f = (figures or {}).get(key)
                if f:
                    by_autodiff = figures[key.split("_")[0] + "_jacfwd"]["per_state_s"]
                    figure = f"{label}, {robot} {dtype}"
                    rows.append((figure, f"{f['per_state_s'] * 1e6:.3g} us/state "
                                 f"({by_autodiff / f['per_state_s']:.3g}x faster than jacfwd)",
                                 f"{_fmt(f.get('ratio_vs_peer'), 'x')} Pinocchio {peer} loop"))
    return rows


def _chains_rows(res):
    largest = max((r["bodies"] for r in res.get("results", [])), default=None)
    rows = []
    for r in res.get("results", []):
        if r["bodies"] == largest:
            figure = f"ABA, {r['shape'].replace('_', ' ')} of {r['bodies']} bodies"
            rows.append((figure, f"{1e6 / r['states_per_s']:.3g} us/state, compile {r['compile_s']:.1f} s",
                         f"{_fmt(r['ratio_vs_pinocchio'], 'x')} Pinocchio parallel"))
            if "devices" in r:
                rows.append(_sharded_row(figure, r["devices"], 1 / r["sharded_states_per_s"],
                                         r["sharded_ratio_vs_pinocchio"], "Pinocchio parallel"))
    return rows


def _loops_rows(res):
    rows = []
    for r in res.get("mechanisms", []):
        figure = f"closed loops, {r['mechanism']} float64 batch {res['batch']}"
        rows.append((figure, f"{r['embedded']:.3g} us/state embedded"
                     + (f" (gradient {r['embedded_grad_over_forward']:.2f}x)" if "embedded_grad_over_forward" in r
                        else "") + f"; projected {r['projected']:.3g}, Lagrange {r['lagrange']:.3g}",
                     f"{_fmt(r.get('embedded_vs_pinocchio'), 'x')} Pinocchio KKT forwardDynamics loop"))
    return rows


def _mjx_rows(res):
    largest = max((r["batch"] for r in res.get("results", [])), default=None)
    return [(f"ABA vs MJX forward, {r['robot']} {r['dtype']} batch {r['batch']}",
             f"{r['jaxmb_states_per_s']:.3g} states/s", f"{_fmt(r['ratio_jaxmb_vs_mjx'], 'x')} MJX")
            for r in res.get("results", []) if r["batch"] == largest]


def _fused_rows(res):
    return [(f"ABA by the fused GPU kernels, {r['robot']} {'free' if r['floating_base'] else 'fixed'} base "
             f"{r['dtype']} batch {r['batch']}", f"{r['fused_states_per_s']:.3g} states/s",
             f"{_fmt(r['ratio_fused_vs_sweeps'], 'x')} the sweeps on the same GPU")
            for r in res.get("results", [])]


def _jaxsim_rows(res):
    largest = max((r["batch"] for r in res.get("results", [])), default=None)
    return [(f"ABA vs jaxsim forward_dynamics_aba, {r['robot']} {r['dtype']} batch {r['batch']}",
             f"{r['jaxmb_states_per_s']:.3g} states/s", f"{_fmt(r['ratio_jaxmb_vs_jaxsim'], 'x')} jaxsim")
            for r in res.get("results", []) if r["batch"] == largest]


def _sim_rows(res):
    rows = []
    for name in dict.fromkeys(r["scenario"] for r in res.get("results", [])):
        r = _largest(res["results"], scenario=name)
        against = ", ".join(f"{_fmt(r[f'ratio_jaxmb_vs_{key}'], 'x')} {peer}" for key, peer in (
            ("mjx", "MJX `step`"), ("mujoco_c", f"MuJoCo C on {r.get('mujoco_c_threads')} threads"))
            if f"ratio_jaxmb_vs_{key}" in r) or "-"
        rows.append((f"simulator steps, {name} {r['dtype']} batch {r['batch']}",
                     f"{_rate(r['jaxmb_steps_per_s'])} steps/s, compile {r['jaxmb_compile_s']:.0f} s", against))
    for name in dict.fromkeys(r["scenario"] for r in res.get("sharded") or []):
        r = _largest(res["sharded"], scenario=name)
        rows.append((f"simulator steps, {name} {r['dtype']} batch {r['batch']}, `sharded_vmap` over {r['devices']} CPU "
                     "devices", f"{_rate(r['jaxmb_steps_per_s'])} steps/s",
                     f"{_fmt(r['ratio_jaxmb_vs_mujoco_c'], 'x')} MuJoCo C on {r['mujoco_c_threads']} threads"))
    for g in res.get("gradient", []):
        rows.append((f"gradient through a {g['steps']}-step rollout / the rollout, {g['scenario']} batch {g['batch']}",
                     _fmt(g["cost_vs_forward"], "x"), f"compile {g['gradient_compile_s']:.0f} s"))
    return rows


HEADLINES = {"dynamics": _dynamics_rows, "operators": _operators_rows, "opspace": _opspace_rows,
             "derivatives": _derivatives_rows, "chains": _chains_rows, "loops": _loops_rows, "fused": _fused_rows,
             "mjx_peer": _mjx_rows, "jaxsim_peer": _jaxsim_rows, "sim": _sim_rows}


def headline(suite):
    """Markdown rows (figure, jaxmb, against the peer) of the suite's main results."""
    return [row for name, rows_of in HEADLINES.items()
            for row in rows_of((suite["scripts"].get(name) or {}).get("results") or {})]


def table(suite):
    m = suite.get("machine") or {}
    begin, end = markers(m.get("backend"))
    lines = [begin, "",
             f"Latest `benchmarks/run.py --{suite['mode']}` ({suite['date']}; {m.get('cpu', '?')}, "
             f"{m.get('cores', '?')} cores, {m.get('backend', '?')} backend, {m.get('device', '?')}, "
             f"jax {m.get('jax', '?')}). Ratios are jaxmb's speed over the peer's, both measured in the same run "
             "(above 1: jaxmb is faster).", ""]
    if suite.get("note"):  # a document gathered from more than one run says which rows come from which
        lines += [GATHERED, ""]
    lines += ["| figure | jaxmb | against the peer |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in headline(suite)]
    failed = [n for n, s in suite["scripts"].items() if s["exit"]]
    if failed:
        lines += ["", f"Scripts that failed in this run: {', '.join(failed)}."]
    return "\n".join(lines + ["", end])


GATHERED = ("This suite file gathers rows from more than one run on this kind of machine; its `note` says which "
            "row comes from which. A peer's figure is always from the same run as the jaxmb figure it divides.")


def _rate(states_per_s):
    """``3.40e5`` for 340 000 states per second."""
    mantissa, exponent = f"{states_per_s:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _largest(rows, **match):
    """The row of largest batch among those whose fields equal ``match``; None if there is none."""
    rows = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    return max(rows, key=lambda r: r["batch"]) if rows else None


def _summary_rows(suite):
    """A handful of headline rows (figure, jaxmb, against the peer) for the top-level README: the forward and
    inverse dynamics against Pinocchio's parallel calls, the gradient's cost, MJX and jaxsim, the GPU kernels."""
    def results(name):
        return ((suite["scripts"].get(name) or {}).get("results") or {}).get("results", [])

    rows = []
    dynamics = results("dynamics")
    for algorithm, label, peer in (("aba", "Forward dynamics (ABA)", "`abaInParallel`"),
                                   ("rnea", "Inverse dynamics (RNEA)", "`rneaInParallel`")):
        r = _largest(dynamics, algorithm=algorithm, dtype="float32") or _largest(dynamics, algorithm=algorithm)
        if r:
            jaxmb, against = f"{_rate(r['states_per_s'])} states/s", f"{_fmt(r['ratio_vs_pinocchio'], 'x')} Pinocchio {peer}"
            if "devices" in r:
                jaxmb += f"; {_rate(r['sharded_states_per_s'])} split over {r['devices']} CPU devices"
                against += f"; {_fmt(r.get('sharded_ratio_vs_pinocchio'), 'x')} split"
            rows.append((f"{label}, {r['robot']} {r['dtype']}, batch {r['batch']}", jaxmb, against))
            if r.get("plain_jit_states_per_s"):
                rows.append((f"{label} written with plain `jax.jit(jax.vmap(...))` under `JAXMB_XLA_FLAGS=1`, the model closed over",
                             f"{_rate(r['plain_jit_states_per_s'])} states/s",
                             f"{_fmt(r.get('plain_jit_ratio_vs_pinocchio'), 'x')} Pinocchio {peer}"))
    grads = [r for r in dynamics if r["algorithm"] == "grad_aba"]
    r = next((g for g in grads if g["dtype"] == "float32"), grads[0] if grads else None)
    if r:
        rows.append((f"Gradient of the forward dynamics, {r['robot']} {r['dtype']}, batch {r['batch']}",
                     f"{_fmt(r['cost_vs_forward'], 'x')} the cost of a forward call", "-"))
    for name, peer, key in (("mjx_peer", "MJX `forward`", "mjx"), ("jaxsim_peer", "jaxsim `forward_dynamics_aba`",
                                                                  "jaxsim")):
        r = _largest(results(name))
        if r:
            rows.append((f"Forward dynamics against {peer}, {r['robot']} {r['dtype']}, batch {r['batch']}",
                         f"{_rate(r['jaxmb_states_per_s'])} states/s", f"{_fmt(r[f'ratio_jaxmb_vs_{key}'], 'x')} {peer}"))
    r = _largest(results("sim"), scenario="quadruped_trot")
    if r and "ratio_jaxmb_vs_mjx" in r:
        jaxmb, against = f"{_rate(r['jaxmb_steps_per_s'])} steps/s", f"{_fmt(r['ratio_jaxmb_vs_mjx'], 'x')} MJX `step`"
        if "ratio_jaxmb_vs_mujoco_c" in r:
            against += f"; {_fmt(r['ratio_jaxmb_vs_mujoco_c'], 'x')} MuJoCo C on {r['mujoco_c_threads']} threads"
        split = _largest(((suite["scripts"].get("sim") or {}).get("results") or {}).get("sharded") or [],
                         scenario="quadruped_trot")
        if split:
            at = f" at batch {split['batch']}" if split["batch"] != r["batch"] else ""
            jaxmb += f"; {_rate(split['jaxmb_steps_per_s'])} split over {split['devices']} CPU devices{at}"
            against += f"; {_fmt(split['ratio_jaxmb_vs_mujoco_c'], 'x')} split{at}"
        rows.append((f"Simulator steps, quadruped trotting on four contacts, {r['dtype']}, batch {r['batch']}", jaxmb,
                     against))
    split = [r for r in ((suite["scripts"].get("sim") or {}).get("results") or {}).get("sharded") or []
             if r["scenario"] == "talos" and "newton_steps_per_s" in r]
    if split:
        r = max(split, key=lambda r: r["ratio_newton_vs_mujoco_c"])
        rows.append((f"Simulator steps, humanoid (talos) on feet and hands, `solver=\"newton\"`, {r['dtype']}, batch "
                     f"{r['batch']} split over {r['devices']} CPU devices", f"{_rate(r['newton_steps_per_s'])} steps/s",
                     f"{_fmt(r['ratio_newton_vs_mujoco_c'], 'x')} MuJoCo C on {r['mujoco_c_threads']} threads"))
    fused = [r for r in results("fused") if r["dtype"] == "float32" and r["floating_base"]]
    if fused:
        r = max(fused, key=lambda r: r["fused_states_per_s"])
        rows.append((f"Forward dynamics by the fused GPU kernels, {r['robot']} free base {r['dtype']}, batch {r['batch']}",
                     f"{_rate(r['fused_states_per_s'])} states/s",
                     f"{_fmt(r['ratio_fused_vs_sweeps'], 'x')} the level-scheduled sweeps on the same GPU"))
    return rows


def machine_words(m):
    """The machine a suite ran on, in words: the GPU, or the CPU and its cores."""
    if m.get("backend") == "gpu":
        return (f"one {m.get('device', 'GPU')}, with Pinocchio on the host's {m.get('cores', '?')} cores "
                f"({m.get('cpu', '?')}); jax {m.get('jax', '?')}")
    return f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores; jax {m.get('jax', '?')}"


def summary(suite):
    """The top-level README's block of one backend: the machine and a handful of headline rows. No date and no
    time per state, only throughputs and ratios: the block names the machine the figures hold for."""
    m = suite.get("machine") or {}
    begin, end = markers(m.get("backend"))
    lines = [begin, "", f"**{str(m.get('backend', '?')).upper()}**: {machine_words(m)}; `benchmarks/run.py "
             f"--{suite['mode']}`. Ratios are jaxmb's speed over the peer's, measured in the same run (above 1: "
             "jaxmb is faster)." + (" Rows gathered from more than one run on this kind of machine." if
                                    suite.get("note") else ""), "",
             "| figure | jaxmb | against the peer |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in _summary_rows(suite)]
    return "\n".join(lines + ["", end])


def _dynamics_grid(res):
    """Ratios to Pinocchio at each robot's largest batch: one row per algorithm and way of batching."""
    rows_in = res.get("results", [])
    columns = sorted({(r["robot"], r["dtype"]) for r in rows_in}, key=lambda c: (c[0] != "panda", c[0], c[1]))
    label = {"aba": "ABA", "rnea": "RNEA", "crba": "CRBA (to its loop)"}
    lines = ["| ratio to Pinocchio | " + " | ".join(f"{robot} f{dtype[-2:]}" for robot, dtype in columns) + " |",
             "|---|" + "---|" * len(columns)]

    def cells(fmt):
        return " | ".join(fmt(robot, dtype) for robot, dtype in columns)

    for algorithm in ("aba", "rnea", "crba"):
        def at(robot, dtype):
            return _largest(rows_in, algorithm=algorithm, robot=robot, dtype=dtype) or {}

        def one(robot, dtype):
            r = at(robot, dtype)
            if not r:
                return "-"
            return _fmt(r["ratio_vs_pinocchio"]) + (f" ({_fmt(r['chunked_ratio_vs_pinocchio'])})"
                                                    if "chunked_ratio_vs_pinocchio" in r else "")

        batch = max((at(*c).get("batch", 0) for c in columns), default=0)
        lines.append(f"| {label[algorithm]}, one device, batch {batch} | {cells(one)} |")
        if any("plain_jit_ratio_vs_pinocchio" in at(*c) for c in columns):
            lines.append(f"| {label[algorithm]}, plain `jax.jit` | "
                         f"{cells(lambda robot, dtype: _fmt(at(robot, dtype).get('plain_jit_ratio_vs_pinocchio')))} |")
        if any("devices" in at(*c) for c in columns):
            lines.append(f"| {label[algorithm]}, split over the cores | "
                         f"{cells(lambda robot, dtype: _fmt(at(robot, dtype).get('sharded_ratio_vs_pinocchio')))} |")
    for key, text in (("temp_bytes", "ABA scratch memory per call"), ("compile_s", "ABA compile time")):
        def value(robot, dtype):
            r = _largest(rows_in, algorithm="aba", robot=robot, dtype=dtype) or {}
            if key not in r:
                return "-"
            return f"{r[key] / 1e6:.1f} MB" if key == "temp_bytes" else f"{r[key]:.1f} s"
        lines.append(f"| {text} | {cells(value)} |")

    def grad(robot, dtype):
        r = next((g for g in rows_in if (g["algorithm"], g["robot"], g["dtype"]) == ("grad_aba", robot, dtype)), None)
        if not r:
            return "-"
        return _fmt(r["cost_vs_forward"], "x") + (f" ({_fmt(r['chunked_cost_vs_forward'], 'x')})"
                                                  if "chunked_cost_vs_forward" in r else "")
    lines.append(f"| grad(ABA) / ABA | {cells(grad)} |")
    return lines


def _fused_table(res):
    lines = ["| base, dtype, batch | fused kernels | sweeps | gain | compile (kernels / sweeps) | difference |",
             "|---|---|---|---|---|---|"]
    for r in res.get("results", []):
        lines.append(f"| {'free' if r['floating_base'] else 'fixed'}, {r['dtype']}, {r['batch']} | "
                     f"{_rate(r['fused_states_per_s'])} states/s | {_rate(r['sweeps_states_per_s'])} | "
                     f"{_fmt(r['ratio_fused_vs_sweeps'], 'x')} | {r['fused_compile_s']:.1f} / {r['sweeps_compile_s']:.1f} s"
                     f" | {r['relative_error']:.1e} |")
    return lines


def _loops_table(res):
    lines = [f"| mechanism (float64, batch {res.get('batch')}) | clusters | embedded us/state | gradient / forward | "
             "projected | Lagrange | Pinocchio KKT | embedded vs Pinocchio |", "|---|---|---|---|---|---|---|---|"]
    for r in res.get("mechanisms", []):
        lines.append(f"| {r['mechanism']} | {r.get('clusters', '-')} | {r['embedded']:.3g} | "
                     f"{_fmt(r.get('embedded_grad_over_forward'), 'x')} | {r['projected']:.3g} | {r['lagrange']:.3g} | "
                     f"{_fmt(r.get('pinocchio_kkt'))} | {_fmt(r.get('embedded_vs_pinocchio'), 'x')} |")
    return lines


def _chains_table(res):
    lines = ["| shape | bodies | ABA us/state | compile | vs `abaInParallel` | split over the cores | "
             "divide and conquer / ABA |", "|---|---|---|---|---|---|---|"]
    for r in res.get("results", []):
        lines.append(f"| {r['shape'].replace('_', ' ')} | {r['bodies']} | {1e6 / r['states_per_s']:.3g} | "
                     f"{r['compile_s']:.1f} s | {_fmt(r.get('ratio_vs_pinocchio'), 'x')} | "
                     f"{_fmt(r.get('sharded_ratio_vs_pinocchio'), 'x')} | {_fmt(r.get('dc_vs_level_schedule'), 'x')} |")
    return lines


def _peer_table(key, peer):
    def rows(res):
        lines = [f"| robot, dtype, batch | jaxmb | {peer} | jaxmb / {peer} |", "|---|---|---|---|"]
        for r in res.get("results", []):
            lines.append(f"| {r['robot']}, {r['dtype']}, {r['batch']} | {_rate(r['jaxmb_states_per_s'])} states/s | "
                         f"{_rate(r[f'{key}_states_per_s'])} | {_fmt(r[f'ratio_jaxmb_vs_{key}'], 'x')} |")
        return lines
    return rows


def _sim_table(res):
    """Steps/s against batch of each scenario and its peers; the gradient's cost, reverse mode's memory and the
    solver's error against its iteration count."""
    lines = ["| scenario, batch | jaxmb steps/s | MJX | MuJoCo C | jaxmb / MJX | jaxmb / MuJoCo C | compile jaxmb / "
             "MJX |", "|---|---|---|---|---|---|---|"]
    for r in res.get("results", []):
        def rate(key):
            return _rate(r[key]) if key in r else "-"
        solver = "" if r.get("solver", "pgs") == "pgs" else f" (`solver=\"{r['solver']}\"`)"
        lines.append(f"| {r['scenario']}{solver}, {r['batch']} | {rate('jaxmb_steps_per_s')} | {rate('mjx_steps_per_s')} | "
                     f"{rate('mujoco_c_steps_per_s')} | {_fmt(r.get('ratio_jaxmb_vs_mjx'), 'x')} | "
                     f"{_fmt(r.get('ratio_jaxmb_vs_mujoco_c'), 'x')} | {r['jaxmb_compile_s']:.0f} / "
                     + (f"{r['mjx_compile_s']:.0f} s |" if "mjx_compile_s" in r else "- s |"))
    if res.get("sharded"):
        lines += ["", "| scenario, batch, over one CPU device per core | jaxmb steps/s | MuJoCo C | jaxmb / MuJoCo C | "
                  "compile jaxmb | `solver=\"newton\"` steps/s | newton / MuJoCo C |", "|---|---|---|---|---|---|---|"]
    for r in res.get("sharded") or []:
        newton = "| - | - |" if "newton_steps_per_s" not in r else (
            f"| {_rate(r['newton_steps_per_s'])} | {_fmt(r['ratio_newton_vs_mujoco_c'], 'x')} |")
        lines.append(f"| {r['scenario']}, {r['batch']}, {r['devices']} devices | {_rate(r['jaxmb_steps_per_s'])} | "
                     f"{_rate(r['mujoco_c_steps_per_s'])} | {_fmt(r['ratio_jaxmb_vs_mujoco_c'], 'x')} | "
                     f"{r['jaxmb_compile_s']:.0f} s " + newton)
    if res.get("solvers"):
        lines += ["", "| scenario, batch, one device | Gauss-Seidel steps/s | Newton steps/s | Newton / Gauss-Seidel | "
                  "Newton on pyramids | pyramids / elliptic | MuJoCo C | compile Gauss-Seidel / Newton |",
                  "|---|---|---|---|---|---|---|---|"]
    for r in res.get("solvers") or []:
        pyramids = ("| - | - |" if "pyramidal_steps_per_s" not in r else
                    f"| {_rate(r['pyramidal_steps_per_s'])} | {_fmt(r['ratio_pyramidal_vs_newton'], 'x')} |")
        lines.append(f"| {r['scenario']}, {r['batch']} | {_rate(r['pgs_steps_per_s'])} | "
                     f"{_rate(r['newton_steps_per_s'])} | {_fmt(r['ratio_newton_vs_pgs'], 'x')} " + pyramids +
                     f" {_rate(r['mujoco_c_steps_per_s'])} | {r['pgs_compile_s']:.0f} / {r['newton_compile_s']:.0f} s |")
    if res.get("gradient") or res.get("memory"):
        lines += ["", "| reverse mode (jaxmb) | figure | compile |", "|---|---|---|"]
    for g in res.get("gradient", []):
        lines.append(f"| gradient / rollout, {g['scenario']}, batch {g['batch']}, {g['steps']} steps | "
                     f"{_fmt(g['cost_vs_forward'], 'x')} | {g['gradient_compile_s']:.0f} s |")
    for m in res.get("memory", []):
        for key, label in (("checkpoint", "with"), ("no_checkpoint", "without")):
            if m.get(f"{key}_temp_bytes") is not None:
                lines.append(f"| scratch memory of the gradient through {m['steps']} steps {label} checkpoint, "
                             f"{m['scenario']}, one world | {m[f'{key}_temp_bytes'] / 1e6:.3g} MB | "
                             f"{m[f'{key}_compile_s']:.0f} s |")
    solver = res.get("solver", [])
    if solver:
        ks = solver[0]["iterations"]
        lines += ["", "| relative error after k sweeps | " + " | ".join(f"k = {k}" for k in ks) + " |",
                  "|---|" + "---|" * len(ks)]
        for s in solver:
            for key, label in (("cold", "zero warm start"), ("warm", "previous step's impulses")):
                for what, name in (("", "contact forces"), ("net_", "net contact force")):
                    if f"{what}{key}" in s:
                        lines.append(f"| {s['scenario']}, {name}, {label} | "
                                     + " | ".join(f"{e:.1e}" for e in s[f"{what}{key}"]) + " |")
    return lines


def _models_table(res):
    """Load time of each zoo robot: first load in the process, best repeat, and the peer's repeat."""
    lines = ["| robot, source, nv | jaxmb first load | repeat | peer (repeat) | peer / jaxmb |", "|---|---|---|---|---|"]
    for r in res.get("results", []):
        lines.append(f"| {r['robot']}, {r['source']}, {r['nv']} | {r['first_s'] * 1e3:.3g} ms | "
                     f"{r['repeat_s'] * 1e3:.3g} ms | {r['peer']} {r['peer_repeat_s'] * 1e3:.3g} ms | "
                     f"{_fmt(r['peer_over_jaxmb'], 'x')} |")
    return lines


def _hamiltonian_table(res):
    """Cost of the Hamiltonian recursion against the ABA per shape, then the long-horizon energy error of each
    integrator at equal evaluations of the dynamics."""
    lines = ["| shape, bodies (batch) | hamiltonian_dynamics us/state | forward_dynamics us/state | time ratio | "
             "XLA flop ratio |", "|---|---|---|---|---|"]
    for r in res.get("cost", []):
        lines.append(f"| {r['shape']}, {r['bodies']} ({r['batch']}) | {r['hamiltonian_us_per_state']:.3g} | "
                     f"{r['forward_us_per_state']:.3g} | {_fmt(r['time_ratio'], 'x')} | {_fmt(r['flop_ratio'], 'x')} |")
    energy = res.get("energy", {})
    if energy.get("runs"):
        lines += ["", f"| double pendulum over {energy['horizon_s']:g} s | dt | relative energy error, first tenth | "
                      "last tenth | max |", "|---|---|---|---|---|"]
        for name, r in energy["runs"].items():
            lines.append(f"| {name.replace('_', ' ')} ({r['evaluations_per_step']} evaluations a step) | {r['dt']:g} | "
                         f"{r['first_tenth_mean']:.2e} | {r['last_tenth_mean']:.2e} | {r['max']:.2e} |")
    return lines


def _partitioning_table(res):
    """Forward dynamics per state of each model unpartitioned, partitioned, and partitioned with the state maps."""
    lines = ["| model (dtype, batch) | route | bodies | us/state | compile | vs unpartitioned |", "|---|---|---|---|---|---|"]
    for r in res.get("rows", []):
        lines.append(f"| {r['model']} ({r['dtype']}, {r['batch']}) | {r['route']} | {r['nb']} | "
                     f"{r['s_per_state'] * 1e6:.3g} | {r['compile_s']:.1f} s | {_fmt(r['vs_unpartitioned'], 'x')} |")
    return lines


def _sensitivity_table(res):
    """``log det M`` and its gradient per state, by each route, against autodiff through the sweep."""
    rows = res.get("results", [])
    base = next((r["s_per_state"] for r in rows if r["route"] == "grad_autodiff"), None)
    lines = ["| robot (dtype, batch) | route | us/state | compile | vs jax.grad through the sweep |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['robot']} ({r['dtype']}, {r['batch']}) | {r['route'].replace('_', ' ')} | "
                     f"{r['s_per_state'] * 1e6:.3g} | {r['compile_s']:.1f} s | "
                     f"{_fmt(r['s_per_state'] / base, 'x') if base else '-'} |")
    return lines


def _compile_table(res):
    """Cold first calls against their targets, and other JAX code's speed with and without jaxmb's XLA options."""
    lines = ["| first call, cold | solver | seconds (the call) | whole process | target |", "|---|---|---|---|---|"]
    for r in res.get("cold", []):
        call = f"{r['seconds']:.1f} s" if r["figure"] != "quickstart" else "-"
        whole = r.get("process_s", r["seconds"])
        lines.append(f"| {r['figure']} | {r['solver'] or '-'} | {call} | {whole:.1f} s | {r['target_s']:.0f} s |")
    if res.get("xla_flags"):
        lines += ["", "| other JAX code in the process | a call with jaxmb's XLA options | without | with / without "
                  "(above 1: faster with) | first call with / without |", "|---|---|---|---|---|"]
    for r in res.get("xla_flags") or []:
        lines.append(f"| {r['figure']} | {r['per_call_s'] * 1e3:.2f} ms | {r['per_call_s_without'] * 1e3:.2f} ms | "
                     f"{r['ratio']:.2f}x | {r['first_s']:.1f} / {r['first_s_without']:.1f} s |")
    return lines


def _envs_table(res):
    """Env steps per second of each environment at each batch, its compile times, and the PPO run's end."""
    rows = res.get("throughput", [])
    batches = sorted({r["batch"] for r in rows})
    names = list(dict.fromkeys(r["env"] for r in rows))
    compiles = {r["env"]: r for r in res.get("compile", [])}
    lines = ["| env steps/s | " + " | ".join(f"batch {b}" for b in batches) + " | compile reset / batched step |",
             "|---|" + "---|" * (len(batches) + 1)]
    for name in names:
        rate = {r["batch"]: r["env_steps_per_s"] for r in rows if r["env"] == name}
        c = compiles.get(name)
        compiled = f"{c['reset_s']:.1f} / {c['step_s']:.1f} s (batch {c['batch']})" if c else "-"
        lines.append(f"| {name} | " + " | ".join(_rate(rate[b]) if b in rate else "-" for b in batches)
                     + f" | {compiled} |")
    ppo = res.get("ppo")
    if ppo:
        lines += ["", f"PPO (brax) on cartpole balance: evaluation reward {ppo['rewards'][-1]:.0f} after "
                      f"{ppo['steps'][-1]:.2e} env steps, {ppo['seconds']:.0f} s including compiles."]
    return lines



def _seconds(s):
    """``37.9 ms`` below a second, ``2.37 s`` above."""
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def _trajopt_table(res):
    """Each trajopt problem's compile seconds and solve time, with Crocoddyl's where the run had the peer."""
    lines = ["| trajopt problem | compile | solve | iterations | Crocoddyl | jaxmb / Crocoddyl (above 1: faster) |",
             "|---|---|---|---|---|---|"]
    for r in res.get("results", []):
        if "per_step_s" in r:
            solve, its = f"{r['per_step_s'] * 1e3:.1f} ms a control step", f"{r['mean_iterations']:.1f} a solve"
        elif "cost_over_fddp" in r:
            solve = f"{r['solve_s']:.2f} s"
            its = f"{r['updates']} updates: cost {r['cost_over_fddp']:.3g}x FDDP's, gap {r['gaps']:.0e}"
        else:
            solve = _seconds(r["solve_s"])
            its = str(r.get("iterations", r.get("max_iterations", "-")))
        croc = _seconds(r["crocoddyl_s"]) if "crocoddyl_s" in r else "-"
        ratio = _fmt(r["crocoddyl_s"] / r["solve_s"], "x") if "crocoddyl_s" in r else "-"
        lines.append(f"| {r['problem']} | {r['compile_s']:.1f} s | {solve} | {its} | {croc} | {ratio} |")
    return lines


def _sysid_table(res):
    """The regressor against Pinocchio's, the Panda's identification, the box fit, and the arm's armatures
    against ``mujoco.sysid``."""
    lines = ["| identification | jaxmb | peer | jaxmb / peer (above 1: faster) |", "|---|---|---|---|"]
    for r in res.get("regressor", []):
        lines.append(f"| regressor, {r['robot']}, batch {r['batch']} (compile {r['compile_s']:.1f} s) | "
                     f"{_rate(r['jaxmb_states_per_s'])} states/s | {_rate(r['pinocchio_loop_states_per_s'])} states/s"
                     f" (Pinocchio `computeJointTorqueRegressor`, a loop) | {_fmt(r['ratio'], 'x')} |")
    p = res.get("panda_identification")
    if p:
        lines.append(f"| Panda from {p['samples']} samples, 1 % noise: {p['n_base']} base parameters | error "
                     f"{p['base_error_norm_relative']:.1e} relative, held-out rms / noise "
                     f"{p['held_out_rms_over_noise_max']:.3f}; physical fit {_seconds(p['physical_fit_s'])} | - | - |")
    for r in res.get("box_fit", []):
        lines.append(f"| box friction and mass through `jaxmb.sim`, {r['method']} shooting, {r['steps']} steps "
                     f"(compile {r['compile_s']:.1f} s) | {_seconds(r['fit_s'])}, {r['iterations']} iterations, error "
                     f"{max(abs(e) for e in r['relative_error']):.1e} | - | - |")
    arm = res.get("mujoco_sysid")
    if arm:
        one, many = arm["one"], arm["batch"]
        lines.append(f"| arm's 5 armatures from {one['steps']} steps, one fit (compile {one['jaxmb_compile_s']:.1f} s)"
                     f" | {_seconds(one['jaxmb_s'])}, {one['jaxmb_iterations']} iterations, error "
                     f"{one['jaxmb_max_relative_error']:.1e} | `mujoco.sysid` {_seconds(one['mujoco_sysid_s'])}, "
                     f"{one['mujoco_sysid_iterations']} iterations "
                     f"({one['mujoco_sysid_residual_calls']} residual calls), error "
                     f"{one['mujoco_sysid_max_relative_error']:.1e} | {_fmt(one['ratio'], 'x')} |")
        lines.append(f"| the same, {many['batch']} recordings (one `vmap`; compile {many['jaxmb_compile_s']:.1f} s) | "
                     f"{_seconds(many['jaxmb_s'])}, error {many['jaxmb_max_relative_error']:.1e} | `mujoco.sysid` one "
                     f"after another {_seconds(many['mujoco_sysid_s'])}, error "
                     f"{many['mujoco_sysid_max_relative_error']:.1e} | {_fmt(many['ratio'], 'x')} |")
        lines.append(f"| jaxmb's scene of the arm against MuJoCo's rollout | largest state difference "
                     f"{one['jaxmb_follows_mujoco_max_abs']:.1e} | - | - |")
    return lines


SCRIPT_TABLES = {"compile": _compile_table, "dynamics": _dynamics_grid, "fused": _fused_table, "loops": _loops_table, "chains": _chains_table,
                 "mjx": _peer_table("mjx", "MJX"), "jaxsim": _peer_table("jaxsim", "jaxsim"),
                 "sim": _sim_table, "models": _models_table, "hamiltonian": _hamiltonian_table,
                 "partitioning": _partitioning_table, "sensitivity": _sensitivity_table, "envs": _envs_table,
                 "trajopt": _trajopt_table, "sysid": _sysid_table}


def script_table(stem, res):
    """The table of one per-script results file ``results/<stem>.json``, between its markers, with its machine."""
    begin, end = script_markers(stem)
    m = res.get("machine") or {}
    rows = SCRIPT_TABLES[stem.split("-")[0]](res)
    return "\n".join([begin, "", f"`results/{stem}.json`: {machine_words(m)}.", "", *rows, "", end])


def latest_suite(results_dir, backend):
    """The newest suite file of a backend in ``results_dir`` (by the date in its name), or None."""
    found = sorted(Path(results_dir).glob(f"{backend}-*core-*.json"),
                   key=lambda p: (p.stem.rsplit("core-", 1)[-1], p.name))
    return json.loads(found[-1].read_text()) if found else None


def rewrite_tables(readme, benchmarks_readme, suite=None, results_dir=RESULTS):
    """Both READMEs' texts with their generated tables rewritten: a backend's blocks from ``suite`` if given (its
    backend only), else from each backend's latest suite file; the per-script tables from ``results_dir``. A table
    whose results file is absent stays as it is."""
    suites = [suite] if suite else [s for s in (latest_suite(results_dir, b) for b in ("cpu", "gpu")) if s]
    for s in suites:
        backend = (s.get("machine") or {}).get("backend")
        if markers(backend)[0] in readme:
            readme = rewrite_readme(readme, summary(s))
        if markers(backend)[0] in benchmarks_readme:
            benchmarks_readme = rewrite_readme(benchmarks_readme, table(s))
    return readme, rewrite_script_tables(benchmarks_readme, results_dir)


def rewrite_script_tables(text, results_dir=RESULTS):
    """``text`` with each per-script table between ``results:<stem>`` markers rewritten from
    ``results_dir/<stem>.json``; a table whose results file is absent stays as it is."""
    for stem in re.findall(r"<!-- results:([\w.-]+):begin -->", text):
        path = Path(results_dir) / f"{stem}.json"
        if path.exists():
            text = rewrite_readme(text, script_table(stem, json.loads(path.read_text())))
    return text


def write_tables(suite=None):
    """Rewrite the generated tables of README.md, benchmarks/README.md and benchmarks/findings.md in place."""
    readme, benchmarks_readme = rewrite_tables(README.read_text(), BENCHMARKS_README.read_text(), suite)
    README.write_text(readme)
    BENCHMARKS_README.write_text(benchmarks_readme)
    FINDINGS.write_text(rewrite_script_tables(FINDINGS.read_text()))


def rewrite_readme(text, block):
    """``text`` with the table of ``block``'s backend replaced by ``block``; the other backends' tables stay."""
    begin, end = block.splitlines()[0], block.splitlines()[-1]
    if begin in text and end in text:
        return text[: text.index(begin)] + block + text[text.index(end) + len(end) :]
    raise SystemExit(f"no {begin} ... {end} markers to rewrite")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="the quick suite (under 10 minutes on 2 CPU cores)")
    size.add_argument("--tiny", action="store_true", help="seconds, into a temporary folder; READMEs untouched")
    ap.add_argument("--device", choices=["cpu", "gpu"], default=None, help="JAX backend (default: JAX's choice)")
    ap.add_argument("--large", action="store_true",
                    help="dynamics.py adds batches 65536 and 262144, the peers run 4096 and 65536 (GPU)")
    ap.add_argument("--no-readme", action="store_true", help="do not rewrite the READMEs' tables")
    ap.add_argument("--readme-from", type=Path, default=None, metavar="RESULTS_JSON",
                    help="run nothing: rewrite both READMEs' tables of a saved suite file's backend (one fetched from "
                         "a GPU machine, say)")
    ap.add_argument("--tables", action="store_true",
                    help="run nothing: regenerate every table of both READMEs from the results files")
    ap.add_argument("--only", type=lambda s: s.split(","), default=None, metavar="NAME,...",
                    help=f"run only these scripts ({', '.join(SCRIPTS)}) and merge them into today's results file "
                         "for this machine, if there is one (a suite split over several calls of a machine)")
    args = ap.parse_args()
    if args.readme_from:
        write_tables(json.loads(args.readme_from.read_text()))
        print(f"wrote the tables of {args.readme_from} in {README} and {BENCHMARKS_README}")
        return
    if args.tables:
        write_tables()
        print(f"regenerated the tables of {README} and {BENCHMARKS_README} from {RESULTS}")
        return
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    with tempfile.TemporaryDirectory() as tmp:
        results_dir = Path(tmp) if args.tiny else RESULTS
        unknown = set(args.only or ()) - set(SCRIPTS)
        if unknown:
            ap.error(f"--only: no such script {', '.join(sorted(unknown))} (scripts: {', '.join(SCRIPTS)})")
        status = run_scripts(mode, args.device, args.large, results_dir, args.only)
        suite = collect(mode, status, results_dir)
        m = suite.get("machine") or {"backend": "unknown", "cores": os.cpu_count()}
        path = results_dir / f"{m['backend']}-{m['cores']}core-{suite['date']}.json"
        if args.only and path.exists():
            earlier = json.loads(path.read_text())
            suite = dict(earlier, scripts=earlier["scripts"] | suite["scripts"])
        path.write_text(json.dumps(suite, indent=1))
        print(table(suite))
        print(summary(suite))
        if not (args.tiny or args.no_readme):
            write_tables(suite)
            print(f"wrote {path} and the tables of {README} and {BENCHMARKS_README}")
    failed = [n for n, (rc, *_) in status.items() if rc]
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
