"""Cold compile times of the simulator's first programs, each in a fresh process, and what importing jaxmb does to
other JAX code in the same process.

    python benchmarks/compile.py            # every figure (a few minutes on a 2-core CPU)
    python benchmarks/compile.py --tiny     # one figure, shortened: proves the script works

Each figure is the wall time of a fresh Python process's first call, from the call to its result (trace, lowering,
XLA compile and one run), with no persistent compilation cache: what a new user's first call costs.

* ``step``: one ``jaxmb.jit(sim.step)`` of the shipped quadruped on its four feet (URDF collision spheres, twelve
  position servos), with each solver; ``step_jax_jit`` the same under plain ``jax.jit`` (XLA's default options);
* ``rollout_64_randomized``: a 1000-step rollout of 64 worlds whose masses are randomized (``vmap`` over scenes);
* ``gradient_100_steps``: the reverse-mode gradient of a 100-step rollout's cost with respect to the servos' ``kp``;
* ``quickstart``: README.md's quickstart block run as a script, to its last line, the whole process (imports
  included); the other figures time the call alone, and give the whole process beside it.

jaxmb's XLA CPU options are its own programs' (`jaxmb.jit`); ``JAXMB_XLA_FLAGS=1`` makes them the process's
(`jaxmb.batching`): the ``xla_flags`` rows time other JAX code (an MJX step of MuJoCo's own model, an optax Adam
update of a small MLP) compiled and run in a process that imported jaxmb with and without ``JAXMB_XLA_FLAGS=1``,
and give the ratio (above 1: faster with jaxmb's options).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent

TARGETS = {"step": 2.0, "rollout_64_randomized": 5.0, "gradient_100_steps": 10.0, "quickstart": 10.0}
"""The seconds each cold figure should stay under on a 2-core CPU."""

QUADRUPED = """
import time
t0 = time.perf_counter()
import jax, jax.numpy as jnp, numpy as np
import jaxmb
from jaxmb import assets, sim
path = assets.path("quadruped.urdf")
model = jaxmb.load_urdf(path, floating_base=True)
feet = sim.urdf_geometry(path, model)
legs = model.joint_names[1:]
scene = sim.make_scene(model, [sim.plane(name="floor")] + feet, pairs_include=[("floor", g.name) for g in feet],
                       actuators=[sim.position(j, kp=60.0, kv=2.0, force_limit=25.0) for j in legs],
                       solver=SOLVER, integrator="euler")
pose = np.array([0.7 if j.endswith("hip_flexion") else -1.4 if j.endswith("knee") else 0.0 for j in legs])
q0 = jaxmb.neutral_configuration(model).at[2].set(0.36).at[7:].set(jnp.asarray(pose))
state = sim.init_state(scene, q0)
ctrl = jnp.asarray(pose)
"""

CHILDREN = {
    "step": QUADRUPED + """
t1 = time.perf_counter()
jax.block_until_ready(JIT(sim.step)(scene, state, ctrl, 0.002))
RESULT = dict(call_s=time.perf_counter() - t1)
""",
    "rollout_64_randomized": QUADRUPED + """
scale = jax.random.uniform(jax.random.PRNGKey(0), (64, model.nb), minval=0.8, maxval=1.2)
scenes = jax.vmap(lambda s: scene.replace(model=scene.model.replace(mass=scene.model.mass * s)))(scale)
states = jax.vmap(lambda s: sim.init_state(s, q0))(scenes)
run = JIT(jax.vmap(lambda sc, st: sim.rollout(sc, st, 0.002, ctrls=jnp.tile(ctrl, (STEPS, 1)))[0]))
t1 = time.perf_counter()
jax.block_until_ready(run(scenes, states))
RESULT = dict(call_s=time.perf_counter() - t1)
""",
    "gradient_100_steps": QUADRUPED + """
def cost(kp):
    sc = scene.replace(actuators=scene.actuators.replace(kp=scene.actuators.kp * kp / 60.0))
    final = sim.rollout(sc, sim.init_state(sc, q0), 0.002, ctrls=jnp.tile(ctrl, (STEPS, 1)))[0]
    return final.q[2]
t1 = time.perf_counter()
jax.block_until_ready(JIT(jax.grad(cost))(60.0))
RESULT = dict(call_s=time.perf_counter() - t1)
""",
}

MJX_STEP = """
import time
t0 = time.perf_counter()
import jax, jax.numpy as jnp
FLAGS_IMPORT
import mujoco
from mujoco import mjx
m = mujoco.MjModel.from_xml_string('''<mujoco><worldbody><geom type="plane" size="5 5 .1"/>
<body pos="0 0 .3"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
<body pos=".5 0 .3"><freejoint/><geom type="sphere" size=".1"/></body></worldbody></mujoco>''')
mx = mjx.put_model(m)
dx = jax.vmap(lambda _: mjx.make_data(mx))(jnp.arange(256))
step = jax.jit(jax.vmap(mjx.step, in_axes=(None, 0)))
dx = step(mx, dx); jax.block_until_ready(dx)
first = time.perf_counter() - t0
t1 = time.perf_counter()
for _ in range(20):
    dx = step(mx, dx)
jax.block_until_ready(dx)
RESULT = dict(first_s=first, per_call_s=(time.perf_counter() - t1) / 20)
"""

OPTAX_STEP = """
import time
t0 = time.perf_counter()
import jax, jax.numpy as jnp
FLAGS_IMPORT
import optax
key = jax.random.PRNGKey(0)
sizes = [64, 256, 256, 8]
params = [(jax.random.normal(k, (a, b)) / a ** 0.5, jnp.zeros(b))
          for k, a, b in zip(jax.random.split(key, 3), sizes[:-1], sizes[1:])]
x, y = jax.random.normal(key, (1024, 64)), jax.random.normal(key, (1024, 8))
def loss(p):
    h = x
    for W, b in p[:-1]:
        h = jnp.tanh(h @ W + b)
    W, b = p[-1]
    return jnp.mean((h @ W + b - y) ** 2)
opt = optax.adam(1e-3)
state = opt.init(params)
@jax.jit
def update(p, s):
    g = jax.grad(loss)(p)
    u, s = opt.update(g, s, p)
    return optax.apply_updates(p, u), s
params, state = update(params, state); jax.block_until_ready(params)
first = time.perf_counter() - t0
t1 = time.perf_counter()
for _ in range(200):
    params, state = update(params, state)
jax.block_until_ready(params)
RESULT = dict(first_s=first, per_call_s=(time.perf_counter() - t1) / 200)
"""


def quickstart_code():
    """README.md's quickstart block (the first ```python block)."""
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)[0]


def run_child(code, env_extra=None):
    """``(seconds, RESULT)``: the wall time of ``code`` in a fresh process (no compilation cache) and the dict it
    leaves in ``RESULT``, if any."""
    wrapped = code + "\nimport json as _json\nprint('RESULT=' + _json.dumps(globals().get('RESULT', {})))\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    env.update(env_extra or {})
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", wrapped], cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if out.returncode:
        raise RuntimeError(f"child failed:\n{out.stderr[-3000:]}")
    line = [l for l in out.stdout.splitlines() if l.startswith("RESULT=")][-1]
    return seconds, json.loads(line[len("RESULT="):])


def cold_rows(tiny):
    rows = []
    cases = [("step", "pgs"), ("step", "newton"), ("step_jax_jit", "newton")] if not tiny else [("step", "pgs")]
    if not tiny:
        cases += [("rollout_64_randomized", "newton"), ("gradient_100_steps", "newton")]
    for name, solver in cases:
        steps = {"rollout_64_randomized": 1000, "gradient_100_steps": 100}.get(name, 1)
        jit = "jax.jit" if name == "step_jax_jit" else "jaxmb.jit"
        code = CHILDREN[name.replace("_jax_jit", "")].replace("SOLVER", repr(solver)).replace("STEPS", str(steps))
        code = code.replace("JIT(", jit + "(")
        process_s, result = run_child(code)
        rows.append(dict(figure=name, solver=solver, seconds=result["call_s"], process_s=process_s,
                         target_s=TARGETS[name.replace("_jax_jit", "")]))
        print(f"  {name} ({solver}): {result['call_s']:.1f} s cold from the call to its result (target "
              f"{rows[-1]['target_s']:.0f} s); {process_s:.1f} s for the whole process", flush=True)
    if not tiny:
        seconds, _ = run_child(quickstart_code())
        rows.append(dict(figure="quickstart", solver=None, seconds=seconds, process_s=seconds,
                         target_s=TARGETS["quickstart"]))
        print(f"  quickstart: {seconds:.1f} s cold (target {TARGETS['quickstart']:.0f} s)", flush=True)
    return rows


def flag_rows():
    """Other JAX code in a process that imported jaxmb, with and without ``JAXMB_XLA_FLAGS=1``."""
    rows = []
    for name, code in (("mjx_step_256", MJX_STEP), ("optax_adam_mlp", OPTAX_STEP)):
        with_jaxmb = run_child(code.replace("FLAGS_IMPORT", "import jaxmb"), {"JAXMB_XLA_FLAGS": "1"})[1]
        without = run_child(code.replace("FLAGS_IMPORT", "import jaxmb"), {"JAXMB_XLA_FLAGS": "0"})[1]
        row = dict(figure=name, per_call_s=with_jaxmb["per_call_s"], per_call_s_without=without["per_call_s"],
                   ratio=without["per_call_s"] / with_jaxmb["per_call_s"], first_s=with_jaxmb["first_s"],
                   first_s_without=without["first_s"])
        rows.append(row)
        print(f"  {name}: {row['per_call_s'] * 1e3:.2f} ms a call with jaxmb's XLA options, "
              f"{row['per_call_s_without'] * 1e3:.2f} ms without: x{row['ratio']:.2f}; first call "
              f"{row['first_s']:.1f} s / {row['first_s_without']:.1f} s", flush=True)
    return rows


def plot(rows, path):
    """Bars of the cold first calls against their targets."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r["figure"] + (f" ({r['solver']})" if r["solver"] else "") for r in rows]
    seconds = [r["seconds"] if r["figure"] != "quickstart" else r["process_s"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 3))
    y = range(len(rows))
    ax.barh(y, seconds, color="tab:blue", label="cold, measured")
    ax.scatter([r["target_s"] for r in rows], y, color="tab:red", marker="|", s=300, label="target")
    ax.set_yticks(list(y), labels)
    ax.set_xlabel("seconds")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="one cold step, no flag study, not saved")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from common import machine, save

    print("== cold compile times, each in a fresh process", flush=True)
    rows = cold_rows(args.tiny)
    flags = []
    if not args.tiny:
        try:
            import mujoco.mjx  # noqa: F401
            flags = flag_rows()
        except ImportError:
            print("  (mujoco-mjx not installed: no flag study)")
    if not (args.tiny or args.no_save):
        path = save("compile", dict(machine=machine(), cold=rows, xla_flags=flags))
        plot(rows, path.with_suffix(".png"))
        print("saved", path)


if __name__ == "__main__":
    main()
