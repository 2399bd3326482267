"""URDF with closed loops: a spanning tree (read by `jaxmb.io.urdf`) and the constraints that close it, loaded as
a `jaxmb.loops.LoopModel`.

The ``<link>`` and ``<joint>`` elements must form a tree, the spanning tree; the tree loader ignores the elements
below, so a file that uses them still loads there as its spanning tree.

``<loop name="N" type="revolute|planar|ball|weld">``
    A cut joint, `jaxmb.loops.loop_closure`. Its children ``<link1 link="A" xyz=".." rpy=".."/>`` and
    ``<link2 link="B" xyz=".." rpy=".."/>`` (both required; ``xyz`` and ``rpy`` default to 0) place, on links
    A and B, the two frames that coincide when the loop is closed. A link merged into its parent by a fixed
    joint is a frame of the model and can be used. The optional ``<axis xyz=".."/>`` (default ``0 0 1``) is the
    hinge axis in those frames. A ``revolute`` loop has 5 rows, ``ball`` 3 and ``weld`` 6. A ``planar`` loop
    has 2: the origins meet in the plane normal to the axis. Use ``planar`` for a loop whose hinges are all
    parallel to the axis. Its other rows vanish identically, so ``revolute`` would make it over-constrained.
``<coupling name="N" joint="J" reference="R" ratio="r" offset="c"/>``
    ``q_J = r q_R + c``, `jaxmb.loops.coupling`: a gear or a geared rotor. ``ratio`` is required and
    ``offset`` defaults to 0. With several references, given as children, it is
    ``q_J = a q_R1 + b q_R2 + c``, `jaxmb.loops.linear_coupling` (a belt)::

        <coupling name="N" joint="J" offset="c">
          <reference joint="R1" ratio="a"/>
          <reference joint="R2" ratio="b"/>
        </coupling>

    All joints named must be 1-dof (revolute, continuous, prismatic). When the independent coordinates are
    chosen automatically, the driven joint ``J`` is made dependent first.
``<independent joints="j1 j2"/>``
    Optional, at most once: the joints whose coordinates stay independent in the loop clusters, as for
    `jaxmb.loops.close_loops`. Leave out joints that are in no loop. The ``independent`` argument overrides
    this element. Without either, the coordinates are chosen automatically.

With ``mimic=True``, each URDF ``<mimic joint="R" multiplier="r" offset="c"/>`` of a joint J becomes the coupling
``q_J = r q_R + c`` (multiplier 1 and offset 0 by default). By default, mimic joints load as independent
joints, as in the tree loader.

After building the model, the loader checks that the loops close. From the independent coordinates of
``q_reference`` (default: the neutral configuration), 50 Newton steps of `jaxmb.loops.solve_configuration`
must bring the residual below 1e-8 (float64). A file whose joint origins are placed so that the loops are closed
at zero angles needs no ``q_reference``.

Example: a four-bar linkage (crank, coupler and rocker turning about y), driven by a motor geared 5:1 to the
crank. At zero angles the crank points up from (0, 0, 0) to (0, 0, 0.1), the rocker up from (0.2, 0, 0) to
(0.2, 0, 0.12), and the coupler runs from the crank's tip to the rocker's tip::

    <robot name="four_bar">
      <link name="base"/>
      <link name="crank"><inertial><origin xyz="0 0 0.05"/><mass value="0.1"/>
        <inertia ixx="1e-4" iyy="1e-4" izz="1e-5" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <link name="coupler"><inertial><origin xyz="0.1 0 0.01"/><mass value="0.2"/>
        <inertia ixx="1e-5" iyy="7e-4" izz="7e-4" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <link name="rocker"><inertial><origin xyz="0 0 0.06"/><mass value="0.1"/>
        <inertia ixx="1.2e-4" iyy="1.2e-4" izz="1e-5" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <link name="motor"><inertial><mass value="0.05"/>
        <inertia ixx="1e-5" iyy="2e-5" izz="1e-5" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <joint name="crank" type="revolute"><parent link="base"/><child link="crank"/>
        <axis xyz="0 1 0"/></joint>
      <joint name="coupler" type="revolute"><parent link="crank"/><child link="coupler"/>
        <origin xyz="0 0 0.1"/><axis xyz="0 1 0"/></joint>
      <joint name="rocker" type="revolute"><parent link="base"/><child link="rocker"/>
        <origin xyz="0.2 0 0"/><axis xyz="0 1 0"/></joint>
      <joint name="motor" type="continuous"><parent link="base"/><child link="motor"/>
        <origin xyz="0 -0.05 0"/><axis xyz="0 1 0"/></joint>

      <loop name="closure" type="planar">
        <link1 link="coupler" xyz="0.2 0 0.02"/>
        <link2 link="rocker" xyz="0 0 0.12"/>
        <axis xyz="0 1 0"/>
      </loop>
      <coupling name="gear" joint="motor" reference="crank" ratio="5"/>
      <independent joints="crank"/>
    </robot>

Load it and put it in a consistent state:

    >>> lm = jaxmb.loops.load_urdf("four_bar.urdf")      # nv = 4, ny = 1 (the crank)
    >>> q = jaxmb.solve_configuration(lm, jnp.array([0.3]), guess=jnp.zeros(lm.nq), iterations=20).q
    >>> ydd = jaxmb.loops.forward_dynamics(lm, q, jnp.zeros(1), jnp.zeros(1))

Anything malformed, inconsistent or impossible to assemble raises `jaxmb.ModelError` naming the file and the
element, e.g. ``four_bar.urdf: <loop name='closure'>: link 'foo' does not exist``. The shipped
``jaxmb/assets/four_bar_leg.urdf`` and ``belt_leg.urdf`` are larger examples.
"""

import dataclasses
import os

import jax.numpy as jnp
import numpy as np

from jaxmb.configuration import neutral_configuration
from jaxmb.errors import ModelError
from jaxmb.batching import full_precision
from jaxmb.io.urdf import Reader, describe, parse_robot, read_text
from jaxmb.loops.constraints import coupling, linear_coupling, loop_closure
from jaxmb.loops.embedding import constraint_residual
from jaxmb.loops.model import aggregation_sets, close_loops
from jaxmb.loops.position import solve_configuration
from jaxmb.rotation import rpy_to_matrix

LOOP_TYPES = ("revolute", "planar", "ball", "weld")
ONE_DOF = ("revolute", "continuous", "prismatic")
ASSEMBLY_CHUNKS = (1, 2, 4, 8, 16, 19)
ASSEMBLY_ITERATIONS = sum(ASSEMBLY_CHUNKS)  # 50


def load_urdf(path, floating_base=False, gravity=(0.0, 0.0, -9.81), mimic=False, independent=None,
              q_reference=None, inertia="warn"):
    """Load a URDF file with closed loops (the format in this module's docstring) as a `jaxmb.loops.LoopModel`.

    ``floating_base``, ``gravity``, ``inertia``: as for `jaxmb.load_urdf`. ``mimic``: turn ``<mimic>``
    tags into couplings. ``independent``: joint names, overriding the file's ``<independent>``.
    ``q_reference`` (nq,): a configuration near an assembled one (default: neutral). The independent
    coordinates are chosen there, and the check that the loops close starts from there.
    """
    path = os.fspath(path)
    return load_urdf_string(read_text(path), floating_base, gravity, mimic, independent, q_reference, source=path,
                            inertia=inertia)


def load_urdf_string(text, floating_base=False, gravity=(0.0, 0.0, -9.81), mimic=False, independent=None,
                     q_reference=None, source="<urdf string>", inertia="warn"):
    """Load a URDF document with closed loops given as a string (see `load_urdf`)."""
    robot = parse_robot(text, source)
    reader = _LoopReader(robot, source)
    reader.mimics_enforced = mimic
    tree = reader.build(floating_base, gravity, inertia)
    return reader.close(tree, mimic, independent, q_reference)


@dataclasses.dataclass(frozen=True)
class _DrivenFirst:
    """A `jaxmb.loops.linear_coupling` whose first joint, the driven one, is made dependent first when the
    independent coordinates are chosen automatically (as `jaxmb.loops.coupling` does for its ``joint``)."""

    constraint: object

    def bind(self, model):
        return dataclasses.replace(self.constraint.bind(model), prefer_dependent=(0,))


class _LoopReader(Reader):
    """The tree reader, plus the ``<loop>``, ``<coupling>``, ``<independent>`` and ``<mimic>`` elements."""

    def __init__(self, robot, source):
        super().__init__(robot, source)
        self.joints = {el.get("name"): el for el in robot.findall("joint")}

    def attribute(self, element, attr, owner=None):
        value = element.get(attr)
        if value is None:
            raise self.error(element, f"missing attribute {attr!r}", owner)
        return value

    def number(self, element, attr, default=None, owner=None):
        return float(self.floats(element, attr, 1, None if default is None else (default,), owner)[0])

    def only_child(self, element, tag):
        found = element.findall(tag)
        if len(found) != 1:
            raise self.error(element, f"needs exactly one <{tag}>, found {len(found)}")
        return found[0]

    def coupled_joint(self, tree, element, name, owner=None):
        """Check that ``name`` is a joint that can be coupled. `Coupling.bind` rejects the multi-dof ones."""
        joint = self.joints.get(name)
        if joint is None and name not in tree.joint_names:  # the "root" free joint is the model's own
            raise self.error(element, f"joint {name!r} does not exist", owner)
        if joint is not None and joint.get("type") == "fixed":
            raise self.error(element, f"joint {name!r} is fixed (merged into its parent link); couplings act on "
                                      f"1-dof joints ({', '.join(ONE_DOF)})", owner)
        return name

    def loop(self, tree, el):
        kind = self.attribute(el, "type")
        if kind not in LOOP_TYPES:
            raise self.error(el, f"type {kind!r} is not one of {', '.join(LOOP_TYPES)}")
        ends = []
        for tag in ("link1", "link2"):
            end = self.only_child(el, tag)
            link = self.attribute(end, "link", el)
            if link not in tree.frame_names:
                raise self.error(el, f"link {link!r} does not exist")
            R = np.asarray(rpy_to_matrix(self.floats(end, "rpy", 3, (0, 0, 0), el)), float)
            ends.append((link, (R, self.floats(end, "xyz", 3, (0, 0, 0), el))))
        axis_el = el.find("axis")
        axis = np.array([0.0, 0.0, 1.0]) if axis_el is None else self.floats(axis_el, "xyz", 3, owner=el)
        if np.linalg.norm(axis) < 1e-12:
            raise self.error(el, "the axis is zero")
        (a, placement_a), (b, placement_b) = ends
        return loop_closure(a, b, placement_a, placement_b, kind, axis / np.linalg.norm(axis))

    def coupling(self, tree, el):
        joint = self.coupled_joint(tree, el, self.attribute(el, "joint"))
        offset = self.number(el, "offset", 0.0)
        references = el.findall("reference")
        if el.get("reference") is not None:
            if references:
                raise self.error(el, "give the reference as an attribute or as <reference> children, not both")
            reference = self.coupled_joint(tree, el, el.get("reference"))
            return coupling(joint, reference, self.number(el, "ratio"), offset)
        if not references:
            raise self.error(el, "missing attribute 'reference' (or <reference joint=.. ratio=..> children)")
        if el.get("ratio") is not None:
            raise self.error(el, "with <reference> children, each <reference> has its own ratio")
        names = [self.coupled_joint(tree, r, self.attribute(r, "joint", el), el) for r in references]
        ratios = [self.number(r, "ratio", owner=el) for r in references]
        if len(set(names)) != len(names) or joint in names:
            raise self.error(el, f"a joint appears twice in the coupling of {joint!r} to {names}")
        # q_J - a q_R1 - b q_R2 = c
        return _DrivenFirst(linear_coupling([joint, *names], [[1.0, *(-r for r in ratios)]], offset))

    def mimic(self, tree, el):
        tag = el.find("mimic")
        joint = self.coupled_joint(tree, tag, el.get("name"), el)
        reference = self.coupled_joint(tree, tag, self.attribute(tag, "joint", el), el)
        return coupling(joint, reference, self.number(tag, "multiplier", 1.0, el),
                              self.number(tag, "offset", 0.0, el))

    def constraints(self, tree, mimic):
        """``(element, owner, constraint)`` per constraint, in file order: loops, couplings, then mimics (owner:
        the ``<joint>`` of a ``<mimic>``, else None)."""
        found, names = [], set()
        for tag, read in (("loop", self.loop), ("coupling", self.coupling)):
            for el in self.robot.findall(tag):
                name = self.attribute(el, "name")
                if name in names:
                    raise self.error(el, "duplicate constraint name")
                names.add(name)
                found.append((el, None, read(tree, el)))
        if mimic:
            found += [(el.find("mimic"), el, self.mimic(tree, el)) for el in self.robot.findall("joint")
                      if el.find("mimic") is not None and el.get("type") != "fixed"]
        return found

    def independent(self, independent):
        """The independent joint names and where they came from (None, None: choose automatically)."""
        elements = self.robot.findall("independent")
        if len(elements) > 1:
            raise self.error(elements[1], "at most one <independent> element")
        if independent is not None:
            names = independent.split() if isinstance(independent, str) else list(independent)
            return names, f"independent={names}"
        if not elements:
            return None, None
        return self.attribute(elements[0], "joints").split(), describe(elements[0])

    def check_clusters(self, tree, bound, sets, where, names, origin):
        """Per loop cluster: some freedom left, and as many ``names`` (independent joints) as it has."""
        for bodies, cons in sets:
            joints = [tree.joint_names[b] for b in bodies]
            rows = sum(bound[c].size for c in cons)
            if rows >= len(bodies):
                planar = any(bound[c].kind == "closure" and bound[c].size == 5 for c in cons)
                hint = " (a loop whose hinges are all parallel to its axis is type=\"planar\")" if planar else ""
                raise ModelError(f"{self.source}: {where(cons)}: {rows} constraint rows leave no degree of freedom "
                                 f"to the {len(bodies)} joints {joints} they connect{hint}")
        if names is None:
            return
        unknown = [n for n in names if n not in tree.joint_names]
        if unknown:
            raise ModelError(f"{self.source}: {origin}: no movable joint named {unknown}")
        loose = [n for n in names if n not in {tree.joint_names[b] for bodies, _ in sets for b in bodies}]
        if loose:
            raise ModelError(f"{self.source}: {origin}: joints {loose} are in no loop; their coordinates are "
                             "independent anyway, leave them out")
        for bodies, cons in sets:
            joints = [tree.joint_names[b] for b in bodies]
            need = len(bodies) - sum(bound[c].size for c in cons)
            chosen = [n for n in joints if n in names]
            if len(chosen) != need:
                raise ModelError(f"{self.source}: {origin}: the joints {joints} of {where(cons)} need {need} "
                                 f"independent joint(s), got {chosen}")

    def close(self, tree, mimic, independent, q_reference):
        """Bind the constraints to ``tree``, check them element by element, and close the loops."""
        found = self.constraints(tree, mimic)
        labels = [describe(el) if owner is None else f"{describe(el)} in {describe(owner)}"
                  for el, owner, _ in found]

        def where(cons):
            return ", ".join(labels[c] for c in cons) or "<robot>"

        bound = []
        for el, owner, constraint in found:
            try:
                bound.append(constraint.bind(tree))
            except ModelError as e:
                raise self.error(el, str(e), owner) from None
        if mimic:
            tree = self.enforced_mimics(tree, found)
        sets = aggregation_sets(tree.topology, bound)
        names, origin = self.independent(independent)
        self.check_clusters(tree, bound, sets, where, names, origin)
        q_ref = None if q_reference is None else jnp.asarray(q_reference, tree.mass.dtype)
        if q_ref is not None and q_ref.shape != (tree.nq,):
            raise ValueError(f"{self.source}: q_reference must have shape ({tree.nq},), got {q_ref.shape}")
        try:
            lm = close_loops(tree, [c for _, _, c in found], names, q_ref)
        except ModelError as e:  # name the elements of the cluster the message is about, if it names one
            message = str(e)
            cons = [c for bodies, cs in sets if repr([tree.joint_names[b] for b in bodies]) in message for c in cs]
            if "reference configuration" in message and "q_reference" not in message:
                message += ", or pass a q_reference near an assembled configuration"
            raise ModelError(f"{self.source}: {where(cons or range(len(found)))}: {message}") from None
        self.check_assembly(lm, q_ref, labels)
        return lm

    def enforced_mimics(self, tree, found):
        """The tree's notes, where those that say a mimic is not enforced now say that it is."""
        mimics = {owner.get("name"): el.get("joint") for el, owner, _ in found if owner is not None}
        stale = tuple(f"joint {j!r} mimics " for j in mimics)
        notes = [n for n in tree.notes if not n.startswith(stale)]
        notes += [f"joint {j!r} mimics {r!r}: enforced as a coupling" for j, r in mimics.items()]
        return tree.replace(notes=tuple(notes))

    @full_precision
    def check_assembly(self, lm, q_ref, labels):
        """Raise unless Newton's method closes every loop from ``q_ref``'s independent coordinates."""
        if not lm.constraints:
            return
        q = neutral_configuration(lm.tree) if q_ref is None else q_ref
        y = q[jnp.asarray(lm.y_q_index, int)]
        tol = max(1e-8, 100 * float(jnp.finfo(q.dtype).eps))
        residual = float(jnp.max(jnp.abs(constraint_residual(lm, q))))
        # Newton's steps in growing chunks, each continuing from the last, so that a file drawn at or near an
        # assembled pose stops after a few; the steps are those of one solve with ASSEMBLY_ITERATIONS iterations.
        for chunk in ASSEMBLY_CHUNKS:
            if residual <= tol:
                return
            solution = solve_configuration(lm, y, q, chunk)
            q, residual = solution.q, float(solution.residual)
        if residual <= tol:
            return
        off = [labels[i] for i, (c, p) in enumerate(zip(lm.constraints, lm.params))
               if not float(jnp.max(jnp.abs(c.residual(lm.tree, p, q)))) <= tol]
        raise ModelError(f"{self.source}: {', '.join(off or labels)}: the loop cannot be closed: the constraint "
                         f"residual stays at {residual:.3g} after {ASSEMBLY_ITERATIONS} Newton iterations from the "
                         "reference configuration. If the mechanism can be assembled, pass a q_reference near an "
                         "assembled configuration")
