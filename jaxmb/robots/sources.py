"""Where the zoo's files lie: directories that installed packages ship, found on disk. Nothing is downloaded.

* jaxmb's own robot files (`jaxmb.assets`).
* example-robot-data (``pip install example-robot-data``): ``<prefix>/share/example-robot-data/robots``, where the
  prefix is the wheel's ``cmeel.prefix`` in site-packages, or a ROS, robotpkg or conda prefix
  (`example_robot_data_dir`).
* MJX's test models (``pip install mujoco-mjx``): ``mujoco/mjx/test_data`` in the ``mujoco`` package
  (`mjx_test_data_dir`).
* dm_control's suite (``pip install dm_control``): ``dm_control/suite`` (`dm_control_suite_dir`).
* MuJoCo Menagerie, optional: a directory given by the caller, the environment variable ``JAXMB_MENAGERIE``, or the
  clone that the ``robot_descriptions`` package keeps in its cache (`menagerie_dir`).

Packages are found with ``importlib`` without being imported.
"""

import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path
from typing import NamedTuple, Optional

from jaxmb.robots.catalog import DM_CONTROL, EXAMPLE_ROBOT_DATA, JAXMB, MENAGERIE, MJX

MENAGERIE_VARIABLE = "JAXMB_MENAGERIE"
ERD_ROBOTS = Path("share", "example-robot-data", "robots")


class Source(NamedTuple):
    """A collection of robot files: its name (as `jaxmb.robots.Robot.source`), what it is, and how to install it."""

    name: str
    title: str
    install: str


SOURCES = {
    JAXMB: Source(JAXMB, "jaxmb's assets", "reinstall jaxmb"),
    EXAMPLE_ROBOT_DATA: Source(EXAMPLE_ROBOT_DATA, "example-robot-data", "pip install example-robot-data"),
    MJX: Source(MJX, "mujoco-mjx's MJCF models", "pip install mujoco-mjx"),
    DM_CONTROL: Source(DM_CONTROL, "dm_control's suite", "pip install dm_control"),
    MENAGERIE: Source(MENAGERIE, "MuJoCo Menagerie",
                      f"pass menagerie=PATH or set {MENAGERIE_VARIABLE} to a clone of MuJoCo Menagerie"),
}


def source_dir(source, menagerie=None) -> Path:
    """The directory of a source (a `SOURCES` name) in this installation; FileNotFoundError saying what to install
    where it is missing. ``menagerie``: the Menagerie's directory (`menagerie_dir`)."""
    if source == JAXMB:
        return Path(__file__).parent.parent / "assets"
    if source == EXAMPLE_ROBOT_DATA:
        return example_robot_data_dir()
    if source == MJX:
        return mjx_test_data_dir()
    if source == DM_CONTROL:
        return dm_control_suite_dir()
    if source == MENAGERIE:
        root = menagerie_dir(menagerie)
        if root is None:
            raise FileNotFoundError(f"no MuJoCo Menagerie: {SOURCES[MENAGERIE].install} (jaxmb never downloads it; "
                                    f"the robot_descriptions package's clone is used where it exists, "
                                    f"{robot_descriptions_menagerie()})")
        return root
    raise ValueError(f"unknown source {source!r}; the sources are {sorted(SOURCES)}")


# -- example-robot-data -------------------------------------------------------------------------------------------

def example_robot_data_candidates() -> list:
    """The places searched for example-robot-data's ``robots`` directory, in order: the installed distribution's
    ``cmeel.prefix`` (pip), then ``<prefix>/share/example-robot-data/robots`` for ``sys.prefix``, each prefix of
    ``AMENT_PREFIX_PATH`` and ``CMAKE_PREFIX_PATH`` (ROS, robotpkg, conda), and, for each ``sys.path`` entry, its
    ``cmeel.prefix`` and the prefix it lies in (``<prefix>/lib/pythonX.Y/site-packages``)."""
    places = []
    try:
        dist = importlib.metadata.distribution("example-robot-data")
        places.append(Path(dist.locate_file(Path("cmeel.prefix") / ERD_ROBOTS)))
    except importlib.metadata.PackageNotFoundError:
        pass
    prefixes = [Path(sys.prefix)]
    for variable in ("AMENT_PREFIX_PATH", "CMAKE_PREFIX_PATH"):
        prefixes += [Path(p) for p in os.environ.get(variable, "").split(os.pathsep) if p]
    for entry in filter(None, sys.path):
        prefixes += [Path(entry) / "cmeel.prefix", Path(entry).parent.parent.parent]
    places += [prefix / ERD_ROBOTS for prefix in prefixes]
    return list(dict.fromkeys(places))


def example_robot_data_dir() -> Path:
    """example-robot-data's ``robots`` directory (`example_robot_data_candidates` says where it is looked for);
    FileNotFoundError if it is in none of those places."""
    for place in example_robot_data_candidates():
        if place.is_dir():
            return place
    raise FileNotFoundError("example-robot-data is not installed: no share/example-robot-data/robots in its "
                            "distribution, under sys.prefix, AMENT_PREFIX_PATH or CMAKE_PREFIX_PATH, or beside "
                            f"sys.path; {SOURCES[EXAMPLE_ROBOT_DATA].install}")


# -- MJX and dm_control ---------------------------------------------------------------------------------------

def package_dir(name) -> Optional[Path]:
    """The directory of the installed top-level package ``name``, found without importing it; None if there is
    none."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def mjx_test_data_dir() -> Path:
    """``mujoco/mjx/test_data``, the MJCF models that the mujoco-mjx package ships; FileNotFoundError if MuJoCo or
    mujoco-mjx is not installed."""
    mujoco = package_dir("mujoco")
    if mujoco is None:
        raise FileNotFoundError("MuJoCo is not installed: pip install mujoco mujoco-mjx")
    d = mujoco / "mjx" / "test_data"
    if not d.is_dir():
        raise FileNotFoundError(f"{d} does not exist: mujoco-mjx is not installed; {SOURCES[MJX].install}")
    return d


def dm_control_suite_dir() -> Path:
    """``dm_control/suite``, the MJCF models of dm_control's control suite; FileNotFoundError if dm_control is not
    installed."""
    dm_control = package_dir("dm_control")
    if dm_control is None or not (dm_control / "suite").is_dir():
        raise FileNotFoundError(f"dm_control is not installed; {SOURCES[DM_CONTROL].install}")
    return dm_control / "suite"


# -- MuJoCo Menagerie ---------------------------------------------------------------------------------------------

def robot_descriptions_menagerie() -> Path:
    """Where the robot_descriptions package keeps its clone of MuJoCo Menagerie: ``mujoco_menagerie`` in its cache,
    ``$ROBOT_DESCRIPTIONS_CACHE`` or ``~/.cache/robot_descriptions``."""
    cache = os.environ.get("ROBOT_DESCRIPTIONS_CACHE", os.path.join("~", ".cache", "robot_descriptions"))
    return Path(cache).expanduser() / "mujoco_menagerie"


def menagerie_dir(path=None) -> Optional[Path]:
    """The MuJoCo Menagerie directory: ``path`` if given, else ``$JAXMB_MENAGERIE`` if set, else
    robot_descriptions' clone (`robot_descriptions_menagerie`) if it exists, else None (the Menagerie is optional).
    A ``path`` or ``$JAXMB_MENAGERIE`` that is not a directory raises FileNotFoundError naming it."""
    if path is not None:
        given, what = Path(path).expanduser(), f"menagerie={os.fspath(path)!r}"
    elif os.environ.get(MENAGERIE_VARIABLE):
        given = Path(os.environ[MENAGERIE_VARIABLE]).expanduser()
        what = f"{MENAGERIE_VARIABLE}={os.environ[MENAGERIE_VARIABLE]!r}"
    else:
        cached = robot_descriptions_menagerie()
        return cached if cached.is_dir() else None
    if not given.is_dir():
        raise FileNotFoundError(f"{what}: no such directory (expected a clone of MuJoCo Menagerie, with one "
                                "directory per robot)")
    return given
