"""Load time of the robot zoo (`jaxmb.robots`): each robot's first load in the process and a repeated load, against
the library that reads the same file (Pinocchio's URDF reader, MuJoCo's MJCF compiler) in the same run.

    python benchmarks/models.py            # every robot this installation has
    python benchmarks/models.py --quick    # a handful: panda, talos, go1, solo12, humanoid, barkour, shadow_hand
    python benchmarks/models.py --tiny     # panda and humanoid (tests)

Measured per robot: ``first_s``, the wall time of the first `jaxmb.robots.load` of that robot in this process
(parsing, inertia checks, building the model's arrays; the modules are imported beforehand by loading another
robot), and ``repeat_s``, the best of the next loads (the file now in the operating system's cache). The peer:
``pin.buildModelFromUrdf`` for a URDF (with a free-flyer root where jaxmb's default base is free), or
``mujoco.MjModel.from_xml_path`` for an MJCF (jaxmb's MJCF loader runs MuJoCo's compiler and reads its arrays, so
the MJCF ratio is the cost of the reading on top of the compile). Ratios: the peer's time over jaxmb's (above 1:
jaxmb is faster). Writes ``benchmarks/results/models-<backend>-<cores>core.json``.
"""

import argparse
import time
import warnings

from common import machine, save

import jaxmb.robots as robots

QUICK = ["panda", "talos", "go1", "solo12", "humanoid", "barkour", "shadow_hand"]


def timed(fn, repeats):
    """``(first, best of the next repeats)`` wall seconds of ``fn()``."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return first, best


def peer_loader(name):
    """``(peer name, a function that loads the robot's file with the peer)``."""
    robot, file = robots.info(name), str(robots.path(name))
    if robot.is_urdf:
        import pinocchio as pin

        if robot.floating_base:
            return "pinocchio", lambda: pin.buildModelFromUrdf(file, pin.JointModelFreeFlyer())
        return "pinocchio", lambda: pin.buildModelFromUrdf(file)
    import mujoco

    return "mujoco", lambda: mujoco.MjModel.from_xml_path(file)


def measure(name, repeats):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the loaders' notes on the files (inertias, mimics, what MJCF leaves out)
        first, repeat = timed(lambda: robots.load(name), repeats)
        model = robots.load(name)
    peer, load_peer = peer_loader(name)
    peer_first, peer_repeat = timed(load_peer, repeats)
    row = dict(robot=name, source=robots.info(name).source, nb=model.nb, nv=model.nv, first_s=first,
               repeat_s=repeat, peer=peer, peer_first_s=peer_first, peer_repeat_s=peer_repeat,
               peer_over_jaxmb=peer_repeat / repeat)
    print(f"  {name:24s} nv {model.nv:3d}: first {first * 1e3:7.1f} ms, repeat {repeat * 1e3:7.1f} ms; {peer} "
          f"{peer_repeat * 1e3:7.1f} ms (x{row['peer_over_jaxmb']:.2f})", flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true")
    size.add_argument("--tiny", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    have = robots.available()
    chosen = ["panda", "humanoid"] if args.tiny else QUICK if args.quick else list(have)
    chosen = [n for n in chosen if n in have]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        robots.load("double_pendulum")  # imports and first-use costs paid before the first timed load
    print(f"== load time of {len(chosen)} zoo robots (first load in the process, best repeat), against the "
          "peer that reads the same file")
    payload = {"machine": machine(), "mode": "tiny" if args.tiny else "quick" if args.quick else "full",
               "results": [measure(n, args.repeats) for n in chosen]}
    if not args.no_save:
        print("saved", save("models", payload))


if __name__ == "__main__":
    main()
