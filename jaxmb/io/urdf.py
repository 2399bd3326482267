"""URDF loading: links and joints to a `jaxmb.Model`.

* Joint types: ``revolute``, ``continuous`` (one coordinate, no cos/sin pair), ``prismatic``, ``fixed`` (merged
  into the parent body; the link stays a frame), ``floating`` (free joint) and ``planar`` (motion in the plane
  normal to ``<axis>``, which defaults to (1, 0, 0) as for every URDF joint; `jaxmb.joints.plane_basis`).
* ``floating_base=True`` joins the root link to the world by a free joint named ``"root"``, or, where the file
  already has a joint of that name, ``"root_free"`` (then ``"root_free_2"``, ...); the model's ``notes`` say so.
* Inertial frames may be rotated (``rpy``); the inertia is rotated into the link frame.
* ``mimic`` joints are loaded as independent coordinates (as Pinocchio does by default): a `UserWarning` and the
  model's ``notes`` say so. `jaxmb.loops.load_urdf` with ``mimic=True`` enforces them as couplings.
* A robot with no movable joint (and ``floating_base=False``) loads as a model with ``nb = nq = nv = 0`` whose
  links are frames fixed to the world (as Pinocchio loads it); its ``notes`` say so.
* Physically impossible link inertias raise, warn or are repaired as the ``inertia`` option says
  (docs/inertia.md).
* xacro files (the xacro namespace, ``<xacro:...>`` elements) are refused: expand them to URDF first.
* Visual and collision geometry (and ``package://`` mesh paths) are ignored, and so are elements other than
  ``<link>`` and ``<joint>`` (the closed-loop extensions ``<loop>``, ``<coupling>`` and ``<independent>`` are read
  by `jaxmb.loops.urdf`).

Anything malformed or unsupported raises `jaxmb.ModelError` naming the file and the element.
"""

import os
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from jaxmb import joints
from jaxmb.errors import ModelError
from jaxmb.model import ModelBuilder
from jaxmb.rotation import rpy_to_matrix


def load_urdf(path, floating_base=False, gravity=(0.0, 0.0, -9.81), inertia="warn"):
    """Load a URDF file (a path) as a `Model`.

    ``inertia``: what to do with link inertias that no body has, one of ``"strict"`` (raise), ``"warn"`` (load
    what keeps the dynamics defined, with a warning; raise for the rest) and ``"repair"`` (load the nearest
    physical inertias, and give a joint that moves no mass a small armature): `jaxmb.model.INERTIA_OPTIONS`,
    docs/inertia.md. A negative or non-finite mass, or a non-symmetric inertia, always raises.
    """
    path = os.fspath(path)
    return load_urdf_string(read_text(path), floating_base, gravity, source=path, inertia=inertia)


def load_urdf_string(text, floating_base=False, gravity=(0.0, 0.0, -9.81), source="<urdf string>", inertia="warn"):
    """Load a URDF document given as a string (see `load_urdf`)."""
    return Reader(parse_robot(text, source), source).build(floating_base, gravity, inertia)


def read_text(path) -> str:
    """The text of the file ``path``; `ModelError` naming it if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise ModelError(f"{path}: cannot read the file ({e.strerror})") from None


def _xacro_error(source, what):
    return ModelError(f"{source}: the file is xacro ({what}), not URDF: macros and properties would be skipped and "
                      "a partial robot loaded. Expand it first, e.g. `xacro robot.urdf.xacro > robot.urdf`, and load "
                      "the result")


def parse_robot(text, source) -> ET.Element:
    """The ``<robot>`` element of a URDF document; `ModelError` naming ``source`` if it is not one, or if it is
    xacro (elements in the xacro namespace, ``<xacro:...>``), which must be expanded to URDF first. A declaration
    of the namespace alone is no reason: the xacro tool keeps it in the URDF files it writes."""
    try:
        robot = ET.fromstring(text)
    except ET.ParseError as e:
        if "<xacro:" in text:
            raise _xacro_error(source, "it has <xacro:...> elements") from None
        raise ModelError(f"{source}: malformed XML ({e})") from None
    xacro = [el.tag for el in robot.iter() if isinstance(el.tag, str) and "xacro" in el.tag.split("}")[0]]
    if xacro:
        raise _xacro_error(source, f"it has xacro elements such as {xacro[0]}")
    if robot.tag != "robot":
        raise ModelError(f"{source}: the root element is <{robot.tag}>, expected <robot>")
    return robot


def describe(element) -> str:
    """An element as error messages name it: ``<joint name='knee'>``, or ``<tag>`` where it has no name."""
    name = element.get("name")
    return f"<{element.tag} name={name!r}>" if name is not None else f"<{element.tag}>"


def free_root_name(joint_names) -> str:
    """The name of the free joint that ``floating_base=True`` adds: ``"root"``, or where a joint of the file
    already has that name, the first of ``"root_free"``, ``"root_free_2"``, ... that none has."""
    if "root" not in joint_names:
        return "root"
    name, k = "root_free", 2
    while name in joint_names:
        name, k = f"root_free_{k}", k + 1
    return name


class Reader:
    """Reads the ``<link>`` and ``<joint>`` elements of a parsed ``<robot>`` (from `parse_robot`) into a model;
    ``source`` (the file) names every error. `jaxmb.loops.urdf` extends it with the closed-loop elements.

    ``mimics_enforced``: set by a subclass that turns ``<mimic>`` tags into constraints, so that the tree is built
    without the warning that they load as independent coordinates."""

    mimics_enforced = False

    def __init__(self, robot, source):
        self.robot, self.source = robot, source

    def error(self, element, message, owner=None):
        """A `ModelError` naming the file, ``element`` and its ``owner`` (a link or joint), then ``message``."""
        where = " in ".join(describe(e) for e in (element, owner) if e is not None)
        return ModelError(f"{self.source}: {where}: {message}")

    def floats(self, element, attr, n, default=None, owner=None):
        """The ``n`` numbers of ``element``'s attribute ``attr``; ``owner`` is the link or joint named in errors."""
        value = element.get(attr)
        if value is None:
            if default is None:
                raise self.error(element, f"missing attribute {attr!r}", owner)
            return np.asarray(default, float)
        try:
            x = np.array([float(v) for v in value.split()])
        except ValueError:
            raise self.error(element, f"attribute {attr}={value!r} is not numeric", owner) from None
        if x.shape != (n,) or not np.all(np.isfinite(x)):
            raise self.error(element, f"attribute {attr}={value!r} must be {n} finite numbers", owner)
        return x

    def origin(self, element, owner):
        o = element.find("origin")
        if o is None:
            return np.eye(3), np.zeros(3)
        R = np.asarray(rpy_to_matrix(self.floats(o, "rpy", 3, (0, 0, 0), owner)), float)
        return R, self.floats(o, "xyz", 3, (0, 0, 0), owner)

    def inertial(self, link):
        inertial = link.find("inertial")
        if inertial is None:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        mass_el, inertia_el = inertial.find("mass"), inertial.find("inertia")
        if mass_el is None:
            raise self.error(link, "<inertial> has no <mass>")
        mass = float(self.floats(mass_el, "value", 1, owner=link)[0])
        if inertia_el is None:
            raise self.error(link, "<inertial> has no <inertia>")
        keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
        c = {k: float(self.floats(inertia_el, k, 1, owner=link)[0]) for k in keys}
        I = np.array([[c["ixx"], c["ixy"], c["ixz"]], [c["ixy"], c["iyy"], c["iyz"]], [c["ixz"], c["iyz"], c["izz"]]])
        R, p = self.origin(inertial, link)
        return mass, p, R @ I @ R.T

    def joint(self, el):
        jtype = el.get("type")
        axis_el = el.find("axis")
        axis = (1.0, 0.0, 0.0) if axis_el is None else tuple(self.floats(axis_el, "xyz", 3, owner=el))
        if jtype in ("revolute", "prismatic", "continuous", "planar") and np.linalg.norm(axis) < 1e-12:
            raise self.error(el, "the joint axis is zero")
        limit = el.find("limit")
        lower = upper = None
        if jtype in ("revolute", "prismatic") and limit is not None:
            lower = float(self.floats(limit, "lower", 1, (-np.inf,), el)[0])
            upper = float(self.floats(limit, "upper", 1, (np.inf,), el)[0])
            if lower > upper:
                raise self.error(el, f"limit lower={lower} exceeds upper={upper}")
            if lower == upper == 0.0:  # URDF's default for an absent range: treat as unlimited
                lower = upper = None
        if jtype == "revolute":
            return joints.revolute(axis, lower, upper)
        if jtype == "continuous":
            return joints.continuous(axis)
        if jtype == "prismatic":
            return joints.prismatic(axis, lower, upper)
        if jtype == "fixed":
            return joints.fixed()
        if jtype == "floating":
            return joints.free()
        if jtype == "planar":  # the axis is the plane's normal; (1, 0, 0) where absent, as the format says
            return joints.planar(axis)
        if jtype is None:
            raise self.error(el, "missing attribute 'type'")
        raise self.error(el, f"unsupported joint type {jtype!r}")

    def build(self, floating_base, gravity, inertia):
        links = {}
        for link in self.robot.findall("link"):
            name = link.get("name")
            if not name:
                raise self.error(link, "a <link> has no name")
            if name in links:
                raise self.error(link, "duplicate link name")
            links[name] = link
        if not links:
            raise ModelError(f"{self.source}: the robot has no <link>")

        parent_of, joint_of = {}, {}
        for el in self.robot.findall("joint"):
            if not el.get("name"):
                raise self.error(el, "a <joint> has no name")
            parent_el, child_el = el.find("parent"), el.find("child")
            if parent_el is None or parent_el.get("link") is None:
                raise self.error(el, "missing <parent link=...>")
            if child_el is None or child_el.get("link") is None:
                raise self.error(el, "missing <child link=...>")
            parent, child = parent_el.get("link"), child_el.get("link")
            for role, link in (("parent", parent), ("child", child)):
                if link not in links:
                    raise self.error(el, f"{role} link {link!r} is not defined")
            if child in parent_of:
                raise self.error(el, f"link {child!r} is already the child of joint {joint_of[child].get('name')!r}: "
                                     "the kinematic graph has a closed loop (not a tree)")
            parent_of[child], joint_of[child] = parent, el

        roots = [n for n in links if n not in parent_of]
        if len(roots) != 1:
            raise ModelError(f"{self.source}: expected one root link, found {len(roots)} ({roots[:5]}); "
                             "a cycle of joints or several disconnected trees")

        self.check_mimics(joint_of)

        b = ModelBuilder(self.robot.get("name", "robot"), gravity=gravity, source=self.source, inertia=inertia)
        if not floating_base and all(el.get("type") == "fixed" for el in joint_of.values()):
            b.note(f"{self.source}: the robot has no movable joint (every joint is fixed, or it has none): loaded "
                   "with nv = 0, its links frames fixed to the world; floating_base=True joins its root link to the "
                   "world by a free joint")
        root = roots[0]
        m, c, I = self.inertial(links[root])
        root_name = free_root_name({el.get("name") for el in joint_of.values()}) if floating_base else "root"
        if root_name != "root":
            b.note(f"the free joint that floating_base=True adds is named {root_name!r}: the file has a joint "
                   "named 'root'")
        b.add_body(root, None, joints.free() if floating_base else joints.fixed(), joint_name=root_name,
                   mass=m, com=c, inertia=I)
        order, frontier = [], [root]
        while frontier:
            nxt = [child for child in parent_of if parent_of[child] in frontier]
            order += nxt
            frontier = nxt
        unreached = [child for child in parent_of if child not in set(order)]
        if unreached:
            raise ModelError(f"{self.source}: links {unreached[:5]} are not connected to the root link {root!r}: "
                             "their joints form a cycle")
        mimics = []
        for child in order:
            el = joint_of[child]
            m, c, I = self.inertial(links[child])
            b.add_body(child, parent_of[child], self.joint(el), joint_name=el.get("name"),
                       placement=self.origin(el, el), mass=m, com=c, inertia=I)
            if el.find("mimic") is not None and el.get("type") != "fixed":  # a fixed joint is merged, not loaded
                reference = el.find("mimic").get("joint")
                missing = "" if reference in {j.get("name") for j in joint_of.values()} else ", a joint the file lacks"
                mimics.append((el.get("name"), reference, missing))
                b.note(f"joint {el.get('name')!r} mimics {reference!r}{missing}: loaded as an independent joint (its "
                       "coupling is not enforced)")
        if mimics and not self.mimics_enforced:
            pairs = ", ".join(f"{j!r} (mimics {r!r}{missing})" for j, r, missing in mimics)
            warnings.warn(f"{self.source}: the mimic joints {pairs} load as independent coordinates: their "
                          "couplings are not enforced (jaxmb.loops.load_urdf(..., mimic=True) enforces them)",
                          UserWarning, stacklevel=3)
        return b.build()

    def check_mimics(self, joint_of):
        """Raise `ModelError` for a ``<mimic>`` without a ``joint`` attribute, and, where mimics are enforced, for
        one naming a joint the file lacks. Where they load as independent coordinates (the default, as Pinocchio
        loads them) such a coupling could not be enforced anyway, and the mimic warning names it."""
        names = {el.get("name") for el in joint_of.values()}
        for el in joint_of.values():
            tag = el.find("mimic")
            if tag is None or el.get("type") == "fixed":
                continue
            reference = tag.get("joint")
            if reference is None:
                raise self.error(tag, "missing attribute 'joint' (the joint it mimics)", el)
            if reference not in names and self.mimics_enforced:
                raise self.error(tag, f"joint {reference!r} does not exist (joint {el.get('name')!r} mimics it)",
                                 el)
