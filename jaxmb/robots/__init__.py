"""A robot zoo: robots by name, from the files that installed packages ship.

>>> import jaxmb.robots
>>> model = jaxmb.robots.load("go1")                  # example-robot-data's URDF, a free base, inertia="warn"
>>> model = jaxmb.robots.load("panda", inertia="strict")
>>> model = jaxmb.robots.load("humanoid")             # MJX's MJCF, through MuJoCo's compiler
>>> jaxmb.robots.path("shadow_hand")                  # the file, for other tools
>>> jaxmb.robots.available()                          # the names whose files this installation has

The sources (`jaxmb.robots.sources`): jaxmb's own quadruped (``"jaxmb/quadruped"``, `jaxmb.assets`);
example-robot-data's URDF robots, named as its own Python loaders name them; the MJCF models of the mujoco-mjx
package (``humanoid``, ``barkour``, ``shadow_hand``); dm_control's suite where dm_control is installed
(``"dm_control/<domain>"``); MuJoCo Menagerie where a clone is on disk (``"menagerie/<dir>/<model>"``,
`jaxmb.robots.sources.menagerie_dir`). Nothing is downloaded. A name is either a full name or, where exactly one
full name ends with it after a ``/``, that tail (``"cheetah"`` is ``"dm_control/cheetah"``, ``"unitree_go1/go1"`` is
``"menagerie/unitree_go1/go1"``); a full name wins over a tail (``"humanoid"`` is MJX's, ``"quadruped"``
example-robot-data's).

Importing this module looks at no robot file or directory: the catalog of jaxmb, example-robot-data, MJX and
dm_control is data (`jaxmb.robots.catalog`), and the directories are looked for when a function needs them.
docs/robots.md has the table of names (`markdown_table`).
"""

import difflib

from jaxmb.io.mjcf import load_mjcf
from jaxmb.io.urdf import load_urdf
from jaxmb.model import Model
from jaxmb.robots.catalog import CATALOG, LEFT_OUT, Robot, menagerie_robots
from jaxmb.robots.sources import (
    SOURCES,
    Source,
    dm_control_suite_dir,
    example_robot_data_dir,
    menagerie_dir,
    mjx_test_data_dir,
    source_dir,
)

URDF_OPTIONS = ("floating_base", "gravity", "inertia")  # the keywords of jaxmb.load_urdf that load passes on
MJCF_OPTIONS = ("floating_base", "gravity", "assets")  # those of jaxmb.io.mjcf.load_mjcf


class UnknownRobotError(LookupError):
    """A name that no robot of the zoo has, or that several names end with; the message lists close names and the
    sources searched."""


def names(*, menagerie=None) -> tuple:
    """The name of every robot of the catalog (jaxmb, example-robot-data, MJX, dm_control, installed or not), then
    those of the MuJoCo Menagerie found on disk (`jaxmb.robots.sources.menagerie_dir`; ``menagerie`` its
    directory)."""
    return tuple(_robots(menagerie))


def available(*, menagerie=None) -> tuple:
    """The names (as `names` orders them) of the robots whose files this installation has."""
    roots = {}
    for source in SOURCES:
        try:
            roots[source] = source_dir(source, menagerie)
        except FileNotFoundError:
            roots[source] = None
    return tuple(name for name, robot in _robots(menagerie).items()
                 if roots[robot.source] is not None and (roots[robot.source] / robot.file).is_file())


def info(name, *, menagerie=None) -> Robot:
    """The `Robot` record of ``name``: a full name, or the tail of exactly one full name after a ``/``.
    `UnknownRobotError` lists close names and the sources searched where there is none, or the candidates where
    there are several."""
    if name in CATALOG:
        return CATALOG[name]
    if name in LEFT_OUT:
        raise UnknownRobotError(f"{name!r} is not a robot of jaxmb.robots: {LEFT_OUT[name]}")
    robots = _robots(menagerie)
    if name in robots:
        return robots[name]
    tails = [n for n in robots if n.endswith("/" + name)]
    if len(tails) == 1:
        return robots[tails[0]]
    if tails:
        raise UnknownRobotError(f"{name!r} ends several robot names: {', '.join(tails)}; give the full name")
    close = _close_names(name, robots)
    raise UnknownRobotError(f"no robot named {name!r} in jaxmb.robots"
                            + (f"; close names: {', '.join(close)}" if close else "")
                            + f". Sources searched: {_sources_searched(menagerie)}. "
                            "jaxmb.robots.names() lists every name, docs/robots.md describes them")


def path(name, *, menagerie=None):
    """The file of robot ``name`` (a ``pathlib.Path``), to load with `load` or to hand to other tools.
    FileNotFoundError names the package to install where its source is missing, or the file where the installed
    version of the package lacks it."""
    robot = info(name, menagerie=menagerie)
    try:
        root = source_dir(robot.source, menagerie)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"robot {robot.name!r} is a file of {SOURCES[robot.source].title}: {e}") from None
    file = root / robot.file
    if not file.is_file():
        raise FileNotFoundError(f"robot {robot.name!r}: {file} does not exist (the installed {robot.source} does "
                                "not ship it)")
    return file


def load(name, *, menagerie=None, **options) -> Model:
    """The `jaxmb.Model` of robot ``name`` (`info`), loaded from its file (`path`) by `jaxmb.load_urdf` or
    `jaxmb.io.mjcf.load_mjcf`.

    ``options`` go to the loader and replace the robot's defaults (`Robot.floating_base`, `Robot.inertia`): for a
    URDF ``floating_base``, ``gravity``, ``inertia``; for an MJCF ``floating_base``, ``gravity``, ``assets``. An
    option the loader does not take raises TypeError naming it.
    """
    robot = info(name, menagerie=menagerie)
    allowed = URDF_OPTIONS if robot.is_urdf else MJCF_OPTIONS
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        loader = "jaxmb.load_urdf" if robot.is_urdf else "jaxmb.io.mjcf.load_mjcf"
        raise TypeError(f"jaxmb.robots.load({robot.name!r}): {loader} takes the options {', '.join(allowed)}, not "
                        f"{', '.join(unknown)}")
    file = path(robot.name, menagerie=menagerie)
    if robot.is_urdf:
        return load_urdf(file, **{"floating_base": robot.floating_base, "inertia": robot.inertia, **options})
    return load_mjcf(file, **{"floating_base": robot.floating_base, **options})


def markdown_table() -> str:
    """The catalog (jaxmb, example-robot-data, MJX, dm_control) as a Markdown table: name, source, file, default
    base, default ``inertia`` option, note. docs/robots.md holds it."""
    base = {True: "free", False: "fixed", None: "as in the file"}
    rows = ["| name | source | file | base | inertia | note |", "|---|---|---|---|---|---|"]
    for r in CATALOG.values():
        rows.append(f"| `{r.name}` | {r.source} | `{r.file}` | {base[r.floating_base]} | {r.inertia or '-'} | "
                    f"{r.note} |")
    return "\n".join(rows) + "\n"


def _robots(menagerie) -> dict:
    """Every robot by name: the catalog, then the Menagerie's robots where one is found."""
    root = menagerie_dir(menagerie)
    found = menagerie_robots(root) if root is not None else ()
    return {**CATALOG, **{r.name: r for r in found}}


def _close_names(name, robots, limit=8) -> list:
    """Names like ``name``: close by spelling (the full name or its tail after the last ``/``), or containing it."""
    by_tail = {}
    for full in robots:
        by_tail.setdefault(full.rsplit("/", 1)[-1], []).append(full)
    close = difflib.get_close_matches(name, list(robots), n=limit, cutoff=0.6)
    for tail in difflib.get_close_matches(name, list(by_tail), n=limit, cutoff=0.6):
        close += by_tail[tail]
    close += [full for full in robots if name.lower() in full.lower()]
    return list(dict.fromkeys(close))[:limit]


def _sources_searched(menagerie) -> str:
    """Each source and where it was found, or what to install."""
    parts = []
    for source in SOURCES.values():
        try:
            parts.append(f"{source.title} at {source_dir(source.name, menagerie)}")
        except FileNotFoundError:
            parts.append(f"{source.title}: not found, {source.install}")
    return "; ".join(parts)


__all__ = [
    "Robot", "SOURCES", "Source", "UnknownRobotError", "available", "dm_control_suite_dir",
    "example_robot_data_dir", "info", "load", "markdown_table", "menagerie_dir", "mjx_test_data_dir", "names",
    "path",
]
