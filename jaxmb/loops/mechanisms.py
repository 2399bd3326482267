"""Mechanisms with geared rotors and closed loops (Chignoli et al. 2023, sec. VI): builders of
`LoopModel`s and of their armature approximations.

A rotor is a body on a revolute joint whose angle is a fixed combination of link angles (a gear, a belt, a
differential), one coupling row per rotor:

    q_rotor = sum_j n_j q_j                                              (Chignoli et al. 2023, sec. VI)

``exact=True`` embeds the couplings with `close_loops`, the link coordinates independent (one cluster per group
of coupled joints). ``exact=False`` gives a plain `jaxmb.Model` of the same links: each rotor becomes a fixed
body on its parent (its mass and inertia stay there) and its reflected inertia goes on the joints it follows,
diagonally,

    armature_j = sum_r J_r n_rj^2                                        (J_r: rotor inertia about its spin axis)

which drops the cross terms ``J_r n_ri n_rj`` of a rotor that follows several joints (the belt's ankle rotor) and
the coupling ``J_r n_rj axis_r . omega_parent`` of a rotor riding on a moving link. It is exact for rotors on a
fixed base that each follow one joint (a geared pendulum), and for the bevel differential here, whose two equal
rotors' cross terms cancel.

The approximate model's coordinates are the exact model's independent ones, in the same order, so
``loops.forward_dynamics(lm, q, yd, tau)`` and ``jaxmb.forward_dynamics(approx, q[lm.y_q_index], yd, tau)``
compare entry by entry. `reference_configuration` gives each mechanism's documented starting pose. Units: SI
(kg, m, kg m^2, rad); gravity -9.81 m/s^2 along world z.
"""

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb import joints
from jaxmb.configuration import neutral_configuration
from jaxmb.loops.constraints import coupling, linear_coupling, loop_closure
from jaxmb.loops.model import LoopModel, close_loops
from jaxmb.loops.position import solve_configuration
from jaxmb.model import ModelBuilder

Y, X = (0.0, 1.0, 0.0), (1.0, 0.0, 0.0)
ARMATURE_SUFFIX = "_armature"


@dataclass(frozen=True)
class Rotor:
    """A motor rotor: ``mass`` (kg), moments of inertia about its centre, ``J_axial`` about the spin axis and
    ``J_transverse`` across it (kg m^2)."""

    mass: float
    J_axial: float
    J_transverse: float

    def inertia(self, axis):
        """(3, 3) about the centre, in a frame where the spin axis is ``axis`` (unit)."""
        a = np.asarray(axis, float)
        return self.J_transverse * np.eye(3) + (self.J_axial - self.J_transverse) * np.outer(a, a)


class Link(NamedTuple):
    """A body on a joint (``name`` names both); ``position`` of the joint frame in the parent (no rotation)."""

    name: str
    parent: str | None
    joint: joints.Joint
    position: tuple
    mass: float
    com: tuple
    inertia: np.ndarray


class Geared(NamedTuple):
    """A rotor body ``name`` spinning about ``axis`` at ``position`` on ``parent``: ``q = sum ratios[j] q_j``."""

    name: str
    parent: str | None
    axis: tuple
    position: tuple
    rotor: Rotor
    ratios: dict


def rod_inertia(mass, length, radius):
    """(3, 3) of a solid cylinder along z about its centre."""
    t = mass * (3 * radius**2 + length**2) / 12
    return np.diag([t, t, mass * radius**2 / 2])


def box_inertia(mass, sx, sy, sz):
    """(3, 3) of a solid box with sides ``sx, sy, sz`` about its centre."""
    return mass / 12 * np.diag([sy**2 + sz**2, sx**2 + sz**2, sx**2 + sy**2])


def _geared_model(name, links, rotors, exact, frames=None):
    """The exact `LoopModel` of ``links`` driven by ``rotors`` (one coupling per rotor, link joints independent),
    or the armature model (module docstring); ``frames``: {name: (body, position)}."""
    armature = {link.name: 0.0 for link in links}
    for r in rotors:
        for j, n in r.ratios.items():
            armature[j] += r.rotor.J_axial * n**2  # diagonal reflected inertia
    b = ModelBuilder(name if exact else name + ARMATURE_SUFFIX)
    for link in links:
        b.add_body(link.name, link.parent, link.joint, placement=(np.eye(3), link.position), mass=link.mass,
                   com=link.com, inertia=link.inertia, armature=None if exact else armature[link.name])
    for r in rotors:
        b.add_body(r.name, r.parent, joints.revolute(r.axis) if exact else joints.fixed(),
                   placement=(np.eye(3), r.position), mass=r.rotor.mass, inertia=r.rotor.inertia(r.axis))
    for frame, (body, position) in (frames or {}).items():
        b.add_frame(frame, body, (np.eye(3), position))
    tree = b.build()
    if not exact:
        return tree
    constraints = []
    for r in rotors:
        (joint, n), *more = r.ratios.items()
        if more:  # q_rotor - sum_j n_j q_j = 0
            constraints.append(linear_coupling([r.name, *r.ratios], [[1.0, *(-n for n in r.ratios.values())]]))
        else:
            constraints.append(coupling(r.name, joint, n))
    driven = [link.name for link in links if any(link.name in r.ratios for r in rotors)]
    return close_loops(tree, constraints, independent=driven, name=name)


# -- 1. geared pendulum chain ---------------------------------------------------------------------------------

CHAIN_LINK = dict(mass=1.0, length=0.30, radius=0.02)
CHAIN_ROTOR = Rotor(mass=0.25, J_axial=7.8e-5, J_transverse=4.7e-5)


def geared_pendulum_chain(n=3, gear=10.0, exact=True):
    """``n`` links in series, revolute about y, hanging along -z; joint ``link{i}``'s rotor ``rotor{i}`` sits on
    the previous link (the world for the first) and turns at ``gear`` times the joint.

    ==========================  ======================================================================
    link i (``link{i}``)        1.0 kg rod, 0.30 m long, 0.02 m radius, com 0.15 m below its joint
    joint i                     at the distal end of link i-1 (0.30 m below its joint), axis y
    rotor i (``rotor{i}``)      0.25 kg, J_axial 7.8e-5, J_transverse 4.7e-5 kg m^2, axis y, 0.04 m
                                beside joint i along +y; q_rotor_i = gear * q_link_i
    gear                        10 (reflected inertia 100 * 7.8e-5 = 7.8e-3 kg m^2 per joint, a quarter
                                of a link's 0.030 kg m^2 about its joint)
    ==========================  ======================================================================
    Reference: every link at 0.4 rad.
    """
    m, L, r = CHAIN_LINK["mass"], CHAIN_LINK["length"], CHAIN_LINK["radius"]
    links, rotors = [], []
    for i in range(1, n + 1):
        parent, z = (None, 0.0) if i == 1 else (f"link{i - 1}", -L)
        links.append(Link(f"link{i}", parent, joints.revolute(Y), (0.0, 0.0, z), m, (0.0, 0.0, -L / 2),
                          rod_inertia(m, L, r)))
        rotors.append(Geared(f"rotor{i}", parent, Y, (0.0, 0.04, z), CHAIN_ROTOR, {f"link{i}": float(gear)}))
    return _geared_model("geared_pendulum_chain", links, rotors, exact)


# -- 2. four-bar leg ------------------------------------------------------------------------------------------

FOUR_BAR = dict(l_driver=0.18, l_support=0.175, support_pivot=(0.05, 0.0, 0.0), lever=(0.04, 0.0, 0.045),
                l_shank=0.28)


def four_bar_leg(independent="driver", exact=True):
    """A planar four-bar leg in the x-z plane (revolute joints about y) under a trunk on a vertical slider: the
    ``driver`` (thigh) and the ``support`` (push rod) hang from the trunk, the
    ``coupler`` (shank) from the driver's end; a lever on the shank meets the push rod's end (a planar loop
    closure, 2 rows). Frames ``knee``, ``rod_end``, ``lever`` and ``foot`` mark the linkage's points.

    ==========================  ======================================================================
    trunk (``slider``)          2.5 kg box 0.20 x 0.10 x 0.08 m, prismatic along z
    driver                      0.35 kg rod 0.18 m, pivot at the trunk origin
    support                     0.08 kg rod 0.175 m, pivot 0.05 m forward (+x) of the driver's
    coupler                     0.25 kg rod, knee at the driver's end; lever point (0.04, 0, 0.045) m,
                                foot 0.28 m below the knee (coupler frame)
    ==========================  ======================================================================
    Ground 0.05 m, driver 0.18, lever 0.060, rod 0.175: a Grashof double crank (0.05 + 0.18 < 0.060 +
    0.175), so there is no dead point on the assembly branch used here. ``independent``: which loop joint
    stays independent, ``"driver"``, ``"support"`` or ``"coupler"``; y = (slider, that joint). Only the exact
    model exists (no rotors). Reference: slider 0, driver 0.2 rad (support 0.1471, coupler 0.5893 rad).
    """
    if not exact:
        raise ValueError("four_bar_leg has no rotors, hence no armature approximation; use exact=True")
    if independent not in ("driver", "support", "coupler"):
        raise ValueError(f"independent must be 'driver', 'support' or 'coupler', got {independent!r}")
    p = FOUR_BAR
    b = ModelBuilder("four_bar_leg")
    b.add_body("trunk", None, joints.prismatic((0.0, 0.0, 1.0)), joint_name="slider", mass=2.5,
               inertia=box_inertia(2.5, 0.20, 0.10, 0.08))
    b.add_body("driver", "trunk", joints.revolute(Y), mass=0.35, com=(0.0, 0.0, -p["l_driver"] / 2),
               inertia=rod_inertia(0.35, p["l_driver"], 0.012))
    b.add_body("support", "trunk", joints.revolute(Y), placement=(np.eye(3), p["support_pivot"]), mass=0.08,
               com=(0.0, 0.0, -p["l_support"] / 2), inertia=rod_inertia(0.08, p["l_support"], 0.006))
    b.add_body("coupler", "driver", joints.revolute(Y), placement=(np.eye(3), (0.0, 0.0, -p["l_driver"])),
               mass=0.25, com=(0.0, 0.0, -0.12), inertia=rod_inertia(0.25, p["l_shank"], 0.01))
    b.add_frame("knee", "coupler")
    b.add_frame("lever", "coupler", (np.eye(3), p["lever"]))
    b.add_frame("rod_end", "support", (np.eye(3), (0.0, 0.0, -p["l_support"])))
    b.add_frame("foot", "coupler", (np.eye(3), (0.0, 0.0, -p["l_shank"])))
    tree = b.build()
    closure = loop_closure("lever", "rod_end", kind="planar", axis=Y)
    return close_loops(tree, [closure], independent=[independent], q_reference=_four_bar_pose(tree))


def _four_bar_pose(tree):
    return _pose(tree, {"slider": 0.0, "driver": 0.2, "support": 0.1471, "coupler": 0.5893})


# -- 3. belt leg ----------------------------------------------------------------------------------------------

BELT_ROTOR = Rotor(mass=0.15, J_axial=1.4e-4, J_transverse=8.0e-5)


def belt_leg(exact=True, hip_gear=6.0, knee_gear=12.0):
    """A humanoid-like leg on a fixed hip: thigh (``hip`` pitch), shank (``knee``), foot (``ankle``), all about y,
    with a parallel-belt knee-ankle transmission whose rotors both sit on the thigh:

        q_rotor_hip = 6 q_hip,   q_rotor_knee = 12 q_knee,   q_rotor_ankle = 12 (q_knee + q_ankle)

    (a 6:1 gearbox then a 2:1 belt; the ankle belt runs over the knee, hence its sum). The ankle rotor is a
    `linear_coupling` over three joints; knee and ankle links with their two rotors make one cluster.

    ==========================  ======================================================================
    thigh (``hip``)             2.2 kg rod 0.30 m, radius 0.04, com 0.11 m below the hip
    shank (``knee``)            0.8 kg rod 0.30 m, radius 0.025, com 0.13 m below the knee
    foot (``ankle``)            0.35 kg box 0.20 x 0.08 x 0.05 m, com (0.03, 0, -0.04) m from the ankle;
                                frames ``heel`` (-0.07, 0, -0.05) and ``toe`` (0.13, 0, -0.05) m
    rotors                      0.15 kg, J_axial 1.4e-4, J_transverse 8.0e-5 kg m^2, axes y:
                                ``rotor_hip`` on the world at (0, 0.07, 0); ``rotor_knee`` and
                                ``rotor_ankle`` on the thigh at (0, +-0.06, -0.05)
    ==========================  ======================================================================
    Armature model: knee 144 (J + J) = 0.0403, ankle 144 J = 0.0202, hip 36 J kg m^2 (the ankle rotor's
    cross term 144 J between knee and ankle is dropped). Reference: hip -0.3, knee 0.6, ankle -0.3 rad.
    """
    L = 0.30
    links = [
        Link("hip", None, joints.revolute(Y), (0.0, 0.0, 0.0), 2.2, (0.0, 0.0, -0.11), rod_inertia(2.2, L, 0.04)),
        Link("knee", "hip", joints.revolute(Y), (0.0, 0.0, -L), 0.8, (0.0, 0.0, -0.13), rod_inertia(0.8, L, 0.025)),
        Link("ankle", "knee", joints.revolute(Y), (0.0, 0.0, -L), 0.35, (0.03, 0.0, -0.04),
             box_inertia(0.35, 0.20, 0.08, 0.05)),
    ]
    n = float(knee_gear)
    rotors = [
        Geared("rotor_hip", None, Y, (0.0, 0.07, 0.0), BELT_ROTOR, {"hip": float(hip_gear)}),
        Geared("rotor_knee", "hip", Y, (0.0, 0.06, -0.05), BELT_ROTOR, {"knee": n}),
        Geared("rotor_ankle", "hip", Y, (0.0, -0.06, -0.05), BELT_ROTOR, {"knee": n, "ankle": n}),
    ]
    frames = {"heel": ("ankle", (-0.07, 0.0, -0.05)), "toe": ("ankle", (0.13, 0.0, -0.05))}
    return _geared_model("belt_leg", links, rotors, exact, frames)


# -- 4. bevel differential ------------------------------------------------------------------------------------

DIFF_ROTOR = Rotor(mass=0.10, J_axial=6.0e-5, J_transverse=3.5e-5)


def bevel_differential(exact=True, gear=6.0):
    """Two rotors on a fixed base drive a ``pitch`` yoke (about y) and a ``roll`` link (about x, on the yoke)
    through a ``gear``:1 gearbox and an ideal bevel differential (Chignoli et al. 2023, sec. VI, the simple variant):

        [q_pitch, q_roll] = 1/(2N) [[1, 1], [1, -1]] [q_rotor1, q_rotor2],  i.e.  q_rotor1,2 = N (q_pitch +- q_roll)

    The independent coordinates are the two link angles (so that the armature model has the same ones); the
    rotors are dependent, each a `linear_coupling` row. Constraints act on 1-dof joints only, so the two
    link joints are separate revolute joints, not one universal joint.

    ==========================  ======================================================================
    yoke (``pitch``)            0.2 kg, inertia diag(2e-4, 1.5e-4, 2e-4) kg m^2, at the origin
    output (``roll``)           0.8 kg, com 0.08 m below the axes, rod 0.2 m, radius 0.03
    rotors                      0.10 kg, J_axial 6.0e-5, J_transverse 3.5e-5 kg m^2, axes y, on the
                                world at (0, +-0.05, 0); N = 6
    ==========================  ======================================================================
    Armature model: 2 N^2 J = 4.32e-3 kg m^2 on each link joint; the exact reflected inertia is
    N^2 [[J1 + J2, J1 - J2], [J1 - J2, J1 + J2]], whose off-diagonal vanishes for the equal rotors here, and
    the rotors sit on the fixed base: the two models coincide. Reference: pitch 0.3, roll -0.2 rad.
    """
    links = [
        Link("pitch", None, joints.revolute(Y), (0.0, 0.0, 0.0), 0.2, (0.0, 0.0, 0.0), np.diag([2e-4, 1.5e-4, 2e-4])),
        Link("roll", "pitch", joints.revolute(X), (0.0, 0.0, 0.0), 0.8, (0.0, 0.0, -0.08), rod_inertia(0.8, 0.2, 0.03)),
    ]
    n = float(gear)
    rotors = [
        Geared("rotor1", None, Y, (0.0, 0.05, 0.0), DIFF_ROTOR, {"pitch": n, "roll": n}),
        Geared("rotor2", None, Y, (0.0, -0.05, 0.0), DIFF_ROTOR, {"pitch": n, "roll": -n}),
    ]
    return _geared_model("bevel_differential", links, rotors, exact)


# -- 5. quadruped with rotors ---------------------------------------------------------------------------------

LEGS = {"FL": (1, 1), "FR": (1, -1), "HL": (-1, 1), "HR": (-1, -1)}  # (fore/hind, left/right) signs
QUADRUPED_ROTOR = Rotor(mass=0.07, J_axial=6.0e-5, J_transverse=3.2e-5)


def quadruped_with_rotors(exact=True, gears=(6.0, 6.0, 9.0)):
    """A 12-dof quadruped on a free base (joint ``trunk``): per leg ``{leg}_abd`` (about x), ``{leg}_hip``
    and ``{leg}_knee`` (about y), legs FL, FR, HL, HR; every joint has a geared rotor on its parent link,
    ``{joint}_rotor``, turning at ``gears`` = (abduction, hip, knee) times the joint. The abduction and hip
    rotors are coaxial with their joints; the knee rotor sits on the thigh at the hip, coaxial with the hip
    axis, and drives the knee through its 9:1 transmission.

    ==========================  ======================================================================
    trunk                       8.0 kg box 0.40 x 0.20 x 0.10 m; hips at (+-0.19, +-0.05, 0) m
    abduction link              0.5 kg, com (0, +-0.04, 0) m, inertia diag(4e-4, 5e-4, 4e-4) kg m^2
    thigh (``_hip``)            0.65 kg rod 0.21 m, radius 0.02, com 0.03 m below the hip (the knee
                                motor sits at the hip); hip axis (0, +-0.07, 0) m from the abduction axis
    shank (``_knee``)           0.12 kg rod 0.20 m, radius 0.01, com 0.10 m below the knee; frame
                                ``{leg}_foot`` 0.20 m below the knee
    rotors                      0.07 kg, J_axial 6.0e-5, J_transverse 3.2e-5 kg m^2; abduction rotor on
                                the trunk 0.05 m inboard of the hip, hip rotor on the abduction link at
                                (0, +-0.04, 0), knee rotor on the thigh at (0, -+0.03, 0)
    gears                       6, 6, 9: armature 2.16e-3, 2.16e-3, 4.86e-3 kg m^2
    ==========================  ======================================================================
    Reference: trunk at 0.30 m, level; abduction 0, hip -0.8, knee 1.6 rad (feet under the hips).
    """
    links = [Link("trunk", None, joints.free(), (0.0, 0.0, 0.0), 8.0, (0.0, 0.0, 0.0),
                  box_inertia(8.0, 0.40, 0.20, 0.10))]
    rotors = []
    n_abd, n_hip, n_knee = map(float, gears)
    for leg, (fx, sy) in LEGS.items():
        abd, hip, knee = f"{leg}_abd", f"{leg}_hip", f"{leg}_knee"
        links += [
            Link(abd, "trunk", joints.revolute(X), (0.19 * fx, 0.05 * sy, 0.0), 0.5, (0.0, 0.04 * sy, 0.0),
                 np.diag([4e-4, 5e-4, 4e-4])),
            Link(hip, abd, joints.revolute(Y), (0.0, 0.07 * sy, 0.0), 0.65, (0.0, 0.0, -0.03),
                 rod_inertia(0.65, 0.21, 0.02)),
            Link(knee, hip, joints.revolute(Y), (0.0, 0.0, -0.21), 0.12, (0.0, 0.0, -0.10),
                 rod_inertia(0.12, 0.20, 0.01)),
        ]
        rotors += [
            Geared(abd + "_rotor", "trunk", X, (0.14 * fx, 0.05 * sy, 0.0), QUADRUPED_ROTOR, {abd: n_abd}),
            Geared(hip + "_rotor", abd, Y, (0.0, 0.04 * sy, 0.0), QUADRUPED_ROTOR, {hip: n_hip}),
            Geared(knee + "_rotor", hip, Y, (0.0, -0.03 * sy, 0.0), QUADRUPED_ROTOR, {knee: n_knee}),
        ]
    frames = {f"{leg}_foot": (f"{leg}_knee", (0.0, 0.0, -0.20)) for leg in LEGS}
    return _geared_model("quadruped_with_rotors", links, rotors, exact, frames)


# -- reference configurations ---------------------------------------------------------------------------------


def _pose(tree, values):
    """The neutral configuration with ``values`` {joint name: coordinates} written in."""
    q = neutral_configuration(tree)
    for joint, value in values.items():
        if joint in tree.joint_names:
            body = tree.joint_names.index(joint)
            i = int(tree.topology.q_offset[body])
            q = q.at[i : i + int(tree.topology.nq_body[body])].set(jnp.atleast_1d(jnp.asarray(value, q.dtype)))
    return q


def _quadruped_pose(tree):
    values = {"trunk": [0.0, 0.0, 0.30, 1.0, 0.0, 0.0, 0.0]}
    for leg in LEGS:
        values.update({f"{leg}_abd": 0.0, f"{leg}_hip": -0.8, f"{leg}_knee": 1.6})
    return _pose(tree, values)


POSES = {
    "geared_pendulum_chain": lambda tree: _pose(tree, {j: 0.4 for j in tree.joint_names if j.startswith("link")}),
    "four_bar_leg": _four_bar_pose,
    "belt_leg": lambda tree: _pose(tree, {"hip": -0.3, "knee": 0.6, "ankle": -0.3}),
    "bevel_differential": lambda tree: _pose(tree, {"pitch": 0.3, "roll": -0.2}),
    "quadruped_with_rotors": _quadruped_pose,
}


_solve = jax.jit(solve_configuration, static_argnums=3)


def reference_configuration(model, iterations=3):
    """The documented reference pose of a mechanism of this module (start it at rest there, ``yd = 0``).

    For a `LoopModel`, the consistent spanning configuration (nq,) (rotors and dependent loop joints solved by
    `solve_configuration`); for an armature model, its configuration, equal to the former's independent
    coordinates ``q[lm.y_q_index]``.
    """
    tree = model.tree if isinstance(model, LoopModel) else model
    q = POSES[tree.name.removesuffix(ARMATURE_SUFFIX)](tree)
    if not isinstance(model, LoopModel):
        return q
    return _solve(model, q[jnp.asarray(model.y_q_index)], q, iterations).q
