"""Pinocchio as an independent oracle on the real robots of example-robot-data, with fixed and free bases.

Every jaxmb algorithm is evaluated for a few random states (one jitted program per robot and base variant, called
for each state: jaxmb compiles per model topology) and compared with Pinocchio, state by state, to a relative
error of `RTOL` (relative to the norm of Pinocchio's result). The states, Jacobians and forces are converted by
`tests/pinocchio_bridge.py`. Set ``JAXMB_ORACLE_REPORT=1`` (and ``-s``) to print the worst error per algorithm.

Test time is XLA compile time (14 programs of 1-3.5 MB of HLO each), so they are compiled with
`pinocchio_bridge.FAST_COMPILE_OPTIONS` (no LLVM optimization; the same arithmetic).
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxmb
from jaxmb.io.pinocchio import motion_from_pin, pose_from_pin
from pinocchio_bridge import compile_fast, load_pair, merged_frames, run_fast

jax.config.update("jax_enable_x64", True)  # also set in conftest.py; harmless duplicate

pytestmark = pytest.mark.filterwarnings("ignore:.*triangle inequality.*:UserWarning")

RTOL = 1e-9  # relative to the norm of Pinocchio's result, float64, every algorithm

ROBOTS = [
    # arms (kinova: continuous joints; panda: prismatic fingers and a mimic joint)
    "panda", "ur5", "z1", "kinova",
    # quadrupeds
    "go1", "anymal_c", "solo12", "a1",
    # humanoids (talos: mimic joints, loaded as independent joints by both libraries)
    "talos_full_v2", "g1_29dof", "icub",
    # hand
    "allegro",
]
FIXED_BASE = ("panda", "ur5", "z1", "kinova", "allegro")  # arms and the hand; legged robots have a free base
# each robot with its own base, and an arm also with a free one (a mobile manipulator; each case is a compile of its
# own)
CASES = [(robot, robot not in FIXED_BASE) for robot in ROBOTS] + [("panda", True)]
SEEDS = (0, 1, 2)
N_FRAMES = 2  # links merged by fixed joints checked per robot (deepest first), besides bodies and the root link
REFERENCES = {"local": pin.LOCAL, "world_aligned": pin.LOCAL_WORLD_ALIGNED}
OPSPACE_FRAMES = (1, 4)  # Lambda^-1 for the last frame and the last 4 frames of a case (fewer where it has fewer)

WORST: dict = {}  # algorithm -> (worst relative error, case)


# -- jaxmb side: one compiled program per robot variant -------------------------------------------------------------


def _evaluate(model, q, qd, qdd, tau, f_ext, frames):
    out = {
        "mass_matrix": jaxmb.mass_matrix(model, q),
        "inverse_dynamics": jaxmb.inverse_dynamics(model, q, qd, qdd),
        "inverse_dynamics_fext": jaxmb.inverse_dynamics(model, q, qd, qdd, f_ext),
        "forward_dynamics": jaxmb.forward_dynamics(model, q, qd, tau),
        "forward_dynamics_fext": jaxmb.forward_dynamics(model, q, qd, tau, f_ext),
        "gravity_forces": jaxmb.gravity_forces(model, q),
        "bias_forces": jaxmb.bias_forces(model, q, qd),
        "forward_kinematics": jaxmb.forward_kinematics(model, q),
        "frame_poses": jaxmb.frame_poses(model, q),
        "jacobians": jaxmb.jacobians(model, q),
        "bias_accelerations": jaxmb.bias_accelerations(model, q, qd),
        "center_of_mass": jaxmb.center_of_mass(model, q),
        "kinetic_energy": jaxmb.kinetic_energy(model, q, qd),
        "potential_energy": jaxmb.potential_energy(model, q),
        "spatial_momentum": jaxmb.spatial_momentum(model, q, qd),
        "mass_matrix_inverse": jaxmb.mass_matrix_inverse(model, q),
        "centroidal_momentum_matrix": jaxmb.centroidal_momentum_matrix(model, q),
        "interbody_forces": jaxmb.interbody_forces(model, q, qd, tau, f_ext),
        "body_forces": jaxmb.body_forces(model, q, qd, qdd, f_ext),
    }
    for n in OPSPACE_FRAMES:
        out[f"operational_space_compliance_{n}"] = jaxmb.operational_space_compliance(model, q, frames[-n:])
    out["operational_space_compliance_world_aligned"] = jaxmb.operational_space_compliance(
        model, q, frames, reference="world_aligned")
    for ref in REFERENCES:
        out[f"frame_jacobian_{ref}"] = jnp.stack([jaxmb.jacobian(model, q, f, ref) for f in frames])
        out[f"frame_bias_acceleration_{ref}"] = jnp.stack(
            [jaxmb.frame_bias_acceleration(model, q, qd, f, ref) for f in frames])
    return out


_EVALUATE = jax.jit(_evaluate, static_argnames="frames")


def evaluate(model, q, qd, qdd, tau, f_ext, frames):
    """All jaxmb results for a batch of states (leading axis): one program per robot variant, compiled for one
    state and called for each (a program for the batch, through the batching rules of the sweeps, takes longer to
    compile; tests/test_batching.py checks those rules against single states)."""
    states = (q, qd, qdd, tau, f_ext)
    one = compile_fast(_EVALUATE, model, *(x[0] for x in states), frames)
    out = [one(model, *(x[s] for x in states)) for s in range(len(q))]
    return jax.tree.map(lambda *x: np.stack(x), *out)


# -- Pinocchio side ---------------------------------------------------------------------------------------------------


def _pinocchio(pm, br, q, qd, qdd, tau, f_ext, frames):
    d = pm.createData()
    qp, vp, ap, taup = br.q_to_pin(q), br.v_to_pin(qd), br.v_to_pin(qdd), br.tau_to_pin(tau)
    fext = br.body_forces_to_pin(f_ext)
    out = {}
    M = pin.crba(pm, d, qp)
    out["mass_matrix"] = br.matrix_from_pin(np.triu(M) + np.triu(M, 1).T)
    out["inverse_dynamics"] = br.tau_from_pin(pin.rnea(pm, d, qp, vp, ap))
    out["inverse_dynamics_fext"] = br.tau_from_pin(pin.rnea(pm, d, qp, vp, ap, fext))
    out["forward_dynamics"] = br.v_from_pin(pin.aba(pm, d, qp, vp, taup))
    out["forward_dynamics_fext"] = br.v_from_pin(pin.aba(pm, d, qp, vp, taup, fext))
    out["gravity_forces"] = br.tau_from_pin(pin.computeGeneralizedGravity(pm, d, qp))
    out["bias_forces"] = br.tau_from_pin(pin.nonLinearEffects(pm, d, qp, vp))
    out["center_of_mass"] = np.array(pin.centerOfMass(pm, d, qp))
    out["kinetic_energy"] = np.array(pin.computeKineticEnergy(pm, d, qp, vp))
    out["potential_energy"] = np.array(pin.computePotentialEnergy(pm, d, qp))
    hg = pin.computeCentroidalMomentum(pm, d, qp, vp)  # about the centre of mass, world axes, [linear; angular]
    c = np.array(d.com[0])
    out["spatial_momentum"] = np.concatenate([hg.angular + np.cross(c, hg.linear), hg.linear])  # about the origin

    Minv = pin.computeMinverse(pm, d, qp)
    out["mass_matrix_inverse"] = br.matrix_from_pin(np.triu(Minv) + np.triu(Minv, 1).T)
    out["centroidal_momentum_matrix"] = br.jacobian_from_pin(pin.ccrba(pm, d, qp, vp))
    pin.rnea(pm, d, qp, vp, pin.aba(pm, d, qp, vp, taup, fext).copy(), fext)  # the forces of the motion tau makes
    out["interbody_forces"] = br.body_forces_from_pin(d.f)
    pin.rnea(pm, d, qp, vp, ap, fext)
    out["body_forces"] = br.body_forces_from_pin(d.f)

    pin.forwardKinematics(pm, d, qp)
    pin.updateFramePlacements(pm, d)
    out["forward_kinematics"] = br.body_poses_from_pin(d.oMi)
    poses = [pose_from_pin(d.oMf[br.frame_id(f)]) for f in br.model.frame_names]
    out["frame_poses"] = (np.stack([R for R, _ in poses]), np.stack([p for _, p in poses]))
    pin.computeJointJacobians(pm, d, qp)
    out["jacobians"] = np.stack([br.jacobian_from_pin(pin.getJointJacobian(pm, d, int(j), pin.LOCAL))
                                 for j in br.joint_ids])
    for ref, pref in REFERENCES.items():
        out[f"frame_jacobian_{ref}"] = np.stack(
            [br.jacobian_from_pin(pin.getFrameJacobian(pm, d, br.frame_id(f), pref)) for f in frames])

    # Lambda^-1 = J M^-1 J* from Pinocchio's frame Jacobians and CRBA matrix (a backward-stable dense solve)
    for n in OPSPACE_FRAMES:
        J = out["frame_jacobian_local"][-n:].reshape(-1, pm.nv)
        out[f"operational_space_compliance_{n}"] = J @ np.linalg.solve(out["mass_matrix"], J.T)
    J = out["frame_jacobian_world_aligned"].reshape(-1, pm.nv)
    out["operational_space_compliance_world_aligned"] = J @ np.linalg.solve(out["mass_matrix"], J.T)

    # Jdot qd: the accelerations at zero joint accelerations, without gravity (forwardKinematics ignores it)
    pin.forwardKinematics(pm, d, qp, vp, 0 * ap)
    pin.updateFramePlacements(pm, d)
    out["bias_accelerations"] = br.body_motions_from_pin(d.a)
    for ref, pref in REFERENCES.items():
        out[f"frame_bias_acceleration_{ref}"] = np.stack(
            [motion_from_pin(pin.getFrameAcceleration(pm, d, br.frame_id(f), pref)) for f in frames])
    return out


# -- the cases ---------------------------------------------------------------------------------------------------------


def _frames(model, br):
    """Frames for the frame Jacobians: the root link (world-fixed for a fixed base), the deepest links merged by
    fixed joints (end effectors, feet, hands), and the last body."""
    depth = model.topology.depth
    merged = sorted(merged_frames(model), key=lambda f: (-depth[model.frame_body[model.frame_index(f)]], f))
    world_fixed = [f for f, b in zip(model.frame_names, model.frame_body) if b < 0]
    root_link = world_fixed[0] if world_fixed else model.body_names[0]
    names = [root_link] + merged[:N_FRAMES] + [model.body_names[-1]]
    return tuple(dict.fromkeys(names))


class Case:
    def __init__(self, robot, floating):
        self.id = f"{robot}-{'free' if floating else 'fixed'}"
        self.model, self.pm, self.br = load_pair(robot, floating)
        model = self.model
        self.frames = _frames(model, self.br)
        keys = jnp.stack([jax.random.PRNGKey(s) for s in SEEDS])
        q = run_fast(jax.vmap(jaxmb.random_configuration, in_axes=(None, 0)), model, keys)
        rng = np.random.default_rng(len(robot) + 100 * floating)
        n = len(SEEDS)
        qd, qdd, tau = (rng.standard_normal((n, model.nv)) for _ in range(3))
        f_ext = rng.standard_normal((n, model.nb, 6))
        self.states = [np.asarray(q), qd, qdd, tau, f_ext]
        out = evaluate(model, q, jnp.asarray(qd), jnp.asarray(qdd), jnp.asarray(tau), jnp.asarray(f_ext),
                       self.frames)
        self.jaxmb = jax.tree.map(np.asarray, out)
        self.pin = [_pinocchio(self.pm, self.br, *(x[s] for x in self.states), self.frames) for s in range(n)]


@pytest.fixture(scope="module", params=CASES, ids=[f"{r}-{'free' if f else 'fixed'}" for r, f in CASES])
def case(request):
    yield Case(*request.param)
    jax.clear_caches()  # each case compiles a large program; see tests/conftest.py


@pytest.fixture(scope="module", autouse=True)
def _report(request):
    yield
    if os.environ.get("JAXMB_ORACLE_REPORT"):
        print("\nworst relative error vs Pinocchio, per algorithm:")
        for name, (err, where) in sorted(WORST.items()):
            print(f"  {name:40s} {err:9.2e}  ({where})")


def _rel(x, y):
    x, y = np.asarray(x, float), np.asarray(y, float)
    assert x.shape == y.shape, (x.shape, y.shape)
    scale = np.linalg.norm(y)
    return np.linalg.norm(x - y) / (scale if scale > 0 else 1.0)


def check(case, name, part=None):
    """Compare jaxmb's and Pinocchio's ``name`` (``part`` 0/1 of a pose) in every state, to `RTOL`."""
    errors = []
    for s in range(len(SEEDS)):
        x = jax.tree.map(lambda a: a[s], case.jaxmb[name])
        y = case.pin[s][name]
        if part is not None:
            x, y = x[part], y[part]
        errors.append(_rel(x, y))
    key = name if part is None else f"{name}[{'Rp'[part]}]"
    worst = max(errors)
    if worst > WORST.get(key, (-1.0, None))[0]:
        WORST[key] = (worst, case.id)
    assert worst <= RTOL, f"{case.id}: {key} differs from Pinocchio by {worst:.3e} (relative), per state {errors}"


# -- tests -------------------------------------------------------------------------------------------------------------


def test_structure_matches(case):
    """Same joints (the bridge checks kinds and names), and the random states are nontrivial."""
    model, pm = case.model, case.pm
    assert (model.nv, model.nb) == (pm.nv, pm.njoints - 1)
    assert model.nq == pm.nq - sum(1 for k in case.br.layouts if k == "unbounded")  # (cos, sin) pairs
    assert np.linalg.norm(case.pin[0]["gravity_forces"]) > 0
    assert np.linalg.norm(case.pin[0]["bias_accelerations"]) > 0


def test_mass_matrix(case):
    check(case, "mass_matrix")


def test_inverse_dynamics(case):
    check(case, "inverse_dynamics")


def test_inverse_dynamics_external_forces(case):
    check(case, "inverse_dynamics_fext")


def test_forward_dynamics(case):
    check(case, "forward_dynamics")


def test_forward_dynamics_external_forces(case):
    check(case, "forward_dynamics_fext")


def test_gravity_forces(case):
    check(case, "gravity_forces")


def test_bias_forces(case):
    check(case, "bias_forces")


@pytest.mark.parametrize("part", [0, 1], ids=["R", "p"])
def test_forward_kinematics(case, part):
    check(case, "forward_kinematics", part)


@pytest.mark.parametrize("part", [0, 1], ids=["R", "p"])
def test_frame_poses(case, part):
    """Every frame (bodies, links merged by fixed joints, the root link) against Pinocchio's ``oMf``."""
    check(case, "frame_poses", part)


def test_jacobians(case):
    check(case, "jacobians")


@pytest.mark.parametrize("reference", list(REFERENCES))
def test_frame_jacobian(case, reference):
    if merged_frames(case.model):
        assert set(case.frames) & set(merged_frames(case.model))
    check(case, f"frame_jacobian_{reference}")


def test_center_of_mass(case):
    check(case, "center_of_mass")


def test_kinetic_energy(case):
    check(case, "kinetic_energy")


def test_potential_energy(case):
    check(case, "potential_energy")


def test_bias_accelerations(case):
    check(case, "bias_accelerations")


@pytest.mark.parametrize("reference", list(REFERENCES))
def test_frame_bias_acceleration(case, reference):
    check(case, f"frame_bias_acceleration_{reference}")


def test_spatial_momentum(case):
    check(case, "spatial_momentum")


def test_mass_matrix_inverse(case):
    """M^-1 agrees with Pinocchio's computeMinverse to RTOL, or where M is ill-conditioned to the accuracy any
    inverse can have, kappa(M) * 1e-15 (icub's M reaches kappa = 3e9, and then computeMinverse is the less
    accurate of the two); and jaxmb's inverse is a backward-stable inverse of Pinocchio's M."""
    for s in range(len(SEEDS)):
        M = case.pin[s]["mass_matrix"]
        X, Y = case.jaxmb["mass_matrix_inverse"][s], case.pin[s]["mass_matrix_inverse"]
        kappa = np.linalg.cond(M)
        assert _rel(X, Y) <= max(RTOL, kappa * 1e-15), f"{case.id}: {_rel(X, Y):.2e} at kappa {kappa:.1e}"
        residual = np.linalg.norm(M @ X - np.eye(len(M))) / np.sqrt(len(M))
        assert residual <= max(RTOL, kappa * 1e-15), f"{case.id}: |M X - I| = {residual:.2e} at kappa {kappa:.1e}"


def test_centroidal_momentum_matrix(case):
    check(case, "centroidal_momentum_matrix")


@pytest.mark.parametrize("name", [f"{n}_frames" for n in OPSPACE_FRAMES] + ["world_aligned"])
def test_operational_space_compliance(case, name):
    """Lambda^-1 along the frames' paths (jaxmb.dynamics.compliance) against J M^-1 J* from Pinocchio's frame
    Jacobians and mass matrix, for the last task frame and the last 4 of the case (frame axes), and for all of them
    with world axes."""
    check(case, f"operational_space_compliance_{name.removesuffix('_frames')}")


def test_interbody_forces_from_forward_dynamics(case):
    check(case, "interbody_forces")


def test_body_forces_from_inverse_dynamics(case):
    check(case, "body_forces")
