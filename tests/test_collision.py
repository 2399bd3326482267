"""Collision geometry and the narrow phase (`jaxmb.sim.geometry`, `jaxmb.sim.collision`, `jaxmb.sim.urdf_collision`).

Oracle: MuJoCo's collision functions (``mj_forward`` on a two-geom scene at random poses) for the deepest contact's
distance and normal, and the contact points of plane-box and of parallel capsules. Each pair function is compiled
once and vmapped over the batch of poses.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmb import assets, load_urdf
from jaxmb.errors import ModelError
from jaxmb.kinematics import forward_kinematics
from jaxmb.rotation import quat_to_matrix
from jaxmb.spatial import Transform
from jaxmb.sim import collision as col
from jaxmb.sim import geometry as geo
from jaxmb.sim.urdf_collision import urdf_geometry

mujoco = pytest.importorskip("mujoco")

MARGIN = 0.3
N = 160
SIZES = {"sphere": [0.3, 0, 0], "capsule": [0.2, 0.5, 0], "box": [0.4, 0.3, 0.2], "plane": [0, 0, 0]}
EXTENT = {"sphere": 0.3, "capsule": 0.7, "box": 0.5}


def _mjcf_geom(kind):
    size = {"plane": "0 0 1", "sphere": "0.3", "capsule": "0.2 0.5", "box": "0.4 0.3 0.2"}[kind]
    return f'<geom type="{kind}" size="{size}" margin="{MARGIN}"/>'


def _random_quats(rng, n):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _poses(kind_a, kind_b, rng, n=N):
    """Random (pos, quat) of a and b, near contact: b at a random direction and a distance around the sum of the
    extents; a plane is the world's z = 0 plane."""
    qa, qb = _random_quats(rng, n), _random_quats(rng, n)
    if kind_a == "plane":
        pa = np.zeros((n, 3))
        qa[:] = [1, 0, 0, 0]
        pb = np.c_[rng.uniform(-1, 1, (n, 2)), rng.uniform(-0.2, 1.1, n) * EXTENT[kind_b]]
    else:
        pa = rng.uniform(-0.5, 0.5, (n, 3))
        u = rng.normal(size=(n, 3))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        pb = pa + u * rng.uniform(0.3, 1.1, (n, 1)) * (EXTENT[kind_a] + EXTENT[kind_b])
    return pa, qa, pb, qb


def _mujoco(kind_a, kind_b, pa, qa, pb, qb):
    """MuJoCo's contacts per sample: list of (dist (k,), pos (k, 3), normal (k, 3)) with the normal from a to b."""
    if kind_a == "plane":
        body_a, nfree = f"{_mjcf_geom('plane')}", 1
    else:
        body_a, nfree = f'<body><freejoint/>{_mjcf_geom(kind_a)}</body>', 2
    xml = (f"<mujoco><option><flag gravity='disable'/></option><worldbody>{body_a}"
           f"<body><freejoint/>{_mjcf_geom(kind_b)}</body></worldbody></mujoco>")
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    out = []
    for k in range(len(pa)):
        d.qpos[:] = np.r_[pa[k], qa[k], pb[k], qb[k]] if nfree == 2 else np.r_[pb[k], qb[k]]
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        cs = d.contact[: d.ncon]
        # MuJoCo orders a pair by type (plane, sphere, capsule, box as here) and then by geom id: geom 0 is a
        sign = np.array([1.0 if c.geom[0] == 0 else -1.0 for c in cs])
        out.append((np.array([c.dist for c in cs]), np.array([c.pos for c in cs]).reshape(-1, 3),
                    (np.array([c.frame[:3] for c in cs]).reshape(-1, 3) * sign[:, None])))
    return out


def _ours(kind_a, kind_b, pa, qa, pb, qb):
    fn = jax.jit(jax.vmap(col.PAIR_FUNCTIONS[(kind_a, kind_b)]))
    Ta = Transform(quat_to_matrix(jnp.asarray(qa)), jnp.asarray(pa))
    Tb = Transform(quat_to_matrix(jnp.asarray(qb)), jnp.asarray(pb))
    sa = jnp.broadcast_to(jnp.asarray(SIZES[kind_a], float), (len(pa), 3))
    sb = jnp.broadcast_to(jnp.asarray(SIZES[kind_b], float), (len(pa), 3))
    return jax.tree.map(np.asarray, fn(Ta, sa, Tb, sb))


PAIRS = [("plane", "sphere"), ("plane", "capsule"), ("plane", "box"), ("sphere", "sphere"),
         ("sphere", "capsule"), ("sphere", "box"), ("capsule", "capsule"), ("capsule", "box")]


@pytest.mark.parametrize("kinds", PAIRS, ids=lambda k: "-".join(k))
def test_deepest_contact_matches_mujoco(kinds):
    """The deepest contact's distance (1e-9) and normal (1e-6) equal MuJoCo's, for every sample where MuJoCo
    reports a contact within the margin; samples where MuJoCo reports none have none of ours within the margin.

    Capsule-box is compared where the capsule's axis stays outside the box (``dist > -r``): deeper, ours is the
    depth of the axis' deepest point, and MuJoCo's another estimate."""
    rng = np.random.default_rng(sum(map(ord, "".join(kinds))))
    poses = _poses(*kinds, rng)
    ref = _mujoco(*kinds, *poses)
    ours = _ours(*kinds, *poses)
    assert ours.dist.shape == (N, col.CONTACTS[kinds])
    assert np.all(np.isfinite(ours.dist)) and np.all(np.isfinite(ours.frame))
    checked = 0
    for k, (d_ref, _, n_ref) in enumerate(ref):
        i = int(np.argmin(ours.dist[k]))
        if not len(d_ref):
            assert ours.dist[k].min() > MARGIN - 1e-9, k
            continue
        j = int(np.argmin(d_ref))
        if kinds == ("capsule", "box") and min(d_ref[j], ours.dist[k, i]) < -SIZES["capsule"][0] + 1e-3:
            continue
        np.testing.assert_allclose(ours.dist[k, i], d_ref[j], atol=1e-9, err_msg=f"sample {k}")
        # the normal is defined where the deepest contact is unique (not two ends of a parallel capsule)
        if np.sum(d_ref < d_ref[j] + 1e-9) > 1:
            continue
        np.testing.assert_allclose(ours.frame[k, i, 0], n_ref[j], atol=1e-6, err_msg=f"sample {k}")
        checked += 1
    assert checked > N // 8, checked


@pytest.mark.parametrize("kinds", PAIRS + [("box", "box")], ids=lambda k: "-".join(k))
def test_float32_shapes_give_float32_contacts_with_x64_on(kinds):
    """A float32 scene stays float32 where float64 is enabled (as in this suite): no constant of a pair function
    promotes its contacts to float64."""
    rng = np.random.default_rng(0)
    pa, qa, pb, qb = (np.asarray(x[0], np.float32) for x in _poses(*kinds, rng))
    f32 = lambda x: jnp.asarray(x, jnp.float32)
    out = col.PAIR_FUNCTIONS[kinds](Transform(quat_to_matrix(f32(qa)), f32(pa)), f32(SIZES[kinds[0]]),
                                     Transform(quat_to_matrix(f32(qb)), f32(pb)), f32(SIZES[kinds[1]]))
    assert {x.dtype for x in jax.tree.leaves(out)} == {jnp.dtype(jnp.float32)}


def _box_separation(L, d, A, ha, B, hb):
    """Separation of two boxes along the unit directions L (k, 3): |L d| - support radii."""
    return np.abs(L @ d) - np.abs(L @ A) @ ha - np.abs(L @ B) @ hb


def test_box_box_against_brute_force_and_mujoco():
    """Penetrating boxes: our depth is the least penetration over every direction: the separation along our
    normal, and no direction of a dense sample of the sphere separates more. MuJoCo prefers face contacts to
    slightly shallower edge contacts, so its depth is never shallower than ours, and equals ours (and the normal
    too) wherever ours is a face contact along MuJoCo's normal."""
    kinds = ("box", "box")
    rng = np.random.default_rng(7)
    pa, qa, pb, qb = _poses(*kinds, rng)
    ref, ours = _mujoco(*kinds, pa, qa, pb, qb), _ours(*kinds, pa, qa, pb, qb)
    A, B = np.asarray(quat_to_matrix(jnp.asarray(qa))), np.asarray(quat_to_matrix(jnp.asarray(qb)))
    h = np.asarray(SIZES["box"])
    L = rng.normal(size=(4000, 3))
    L /= np.linalg.norm(L, axis=1, keepdims=True)
    penetrating = same = 0
    for k in range(N):
        dist = ours.dist[k].min()
        if dist > -1e-3:
            continue
        penetrating += 1
        d = pb[k] - pa[k]
        sep = _box_separation(L, d, A[k], h, B[k], h)
        assert sep.max() <= dist + 1e-12
        n = ours.frame[k, 0, 0]
        np.testing.assert_allclose(_box_separation(n[None], d, A[k], h, B[k], h)[0], dist, atol=1e-12)
        assert sep.max() > dist - 0.05
        d_ref, _, n_ref = ref[k]
        assert d_ref.min() <= dist + 1e-9
        face = np.sum(ours.dist[k] < col.FAR) > 1
        if face and np.allclose(n_ref[np.argmin(d_ref)], ours.frame[k, 0, 0], atol=1e-6):
            np.testing.assert_allclose(dist, d_ref.min(), atol=1e-9)
            same += 1
    assert penetrating > N // 4 and same > penetrating // 3, (penetrating, same)


def test_capsule_contacts_are_mujocos():
    """Crossing capsules: MuJoCo's one contact (its clipped nearest axis points), the same distance and point to
    1e-12 wherever MuJoCo reports it within the margin, and the second slot empty; parallel capsules get MuJoCo's
    two."""
    rng = np.random.default_rng(5)
    poses = _poses("capsule", "capsule", rng, 200)
    ref, ours = _mujoco("capsule", "capsule", *poses), _ours("capsule", "capsule", *poses)
    found = 0
    for k, (d_ref, p_ref, n_ref) in enumerate(ref):
        assert ours.dist[k, 1] == col.FAR
        if len(d_ref):
            found += 1
            assert len(d_ref) == 1
            np.testing.assert_allclose(ours.dist[k, 0], d_ref[0], atol=1e-12)
            np.testing.assert_allclose(ours.pos[k, 0], p_ref[0], atol=1e-12)
            np.testing.assert_allclose(ours.frame[k, 0, 0], n_ref[0], atol=1e-12)
        else:
            assert ours.dist[k, 0] > MARGIN
    assert found > 50, found
    side = np.asarray([[0.0, 0.0, 0.0], [0.35, 0.0, 0.3]])  # parallel, side by side, 5 cm into each other
    q = np.tile([1.0, 0, 0, 0], (1, 1))
    d_ref, p_ref, _ = _mujoco("capsule", "capsule", side[:1], q, side[1:], q)[0]
    mine = _ours("capsule", "capsule", side[:1], q, side[1:], q)
    assert len(d_ref) == 2
    np.testing.assert_allclose(np.sort(mine.dist[0]), np.sort(d_ref), atol=1e-12)
    np.testing.assert_allclose(sorted(mine.pos[0, :, 2]), sorted(p_ref[:, 2]), atol=1e-12)


def test_contact_frames_are_rotations():
    rng = np.random.default_rng(0)
    n = rng.normal(size=(500, 3))
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    n = np.r_[n, [[0, 0, 1], [0, 0, -1], [1, 0, 0], [0, 0, 1e-17 - 1]]]
    F = np.asarray(col.contact_frame(jnp.asarray(n)))
    np.testing.assert_allclose(F @ F.transpose(0, 2, 1), np.broadcast_to(np.eye(3), F.shape), atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(F), 1.0, atol=1e-12)
    np.testing.assert_allclose(F[:, 0], n)


def test_plane_box_corners_match_mujoco():
    """The penetrating corners of a box on a plane are MuJoCo's contact points."""
    rng = np.random.default_rng(1)
    poses = _poses("plane", "box", rng, 60)
    ref, ours = _mujoco("plane", "box", *poses), _ours("plane", "box", *poses)
    for k, (d_ref, p_ref, _) in enumerate(ref):
        mine = ours.pos[k][ours.dist[k] < 0]
        theirs = p_ref[d_ref < 0]
        assert len(mine) == len(theirs)
        for p in theirs:
            assert np.min(np.linalg.norm(mine - p, axis=1)) < 1e-9


def _T(p=(0, 0, 0), R=None):
    return Transform(jnp.eye(3) if R is None else jnp.asarray(R, float), jnp.asarray(p, float))


def test_parallel_capsules_rest_on_two_points():
    """Parallel capsules get the two ends of their overlap, as MuJoCo's; crossing ones their nearest points."""
    sa, sb = jnp.array([0.1, 0.5, 0.0]), jnp.array([0.1, 0.8, 0.0])
    c = jax.jit(col.capsule_capsule)(_T((0, 0, 0)), sa, _T((0.15, 0.0, 0.6)), sb)
    np.testing.assert_allclose(c.dist, [-0.05, -0.05], atol=1e-12)
    np.testing.assert_allclose(sorted(np.asarray(c.pos[:, 2])), [-0.2, 0.5], atol=1e-12)
    np.testing.assert_allclose(c.frame[:, 0], [[1, 0, 0]] * 2, atol=1e-12)
    Rx = np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]], float)  # local z along -y: crossing at right angles
    c = jax.jit(col.capsule_capsule)(_T((0, 0, 0)), sa, _T((0.15, 0.0, 0.1), Rx), sb)
    assert np.isclose(c.dist.min(), -0.05)
    np.testing.assert_allclose(c.pos[jnp.argmin(c.dist)], [0.075, 0, 0.1], atol=1e-12)


def test_capsule_on_box_rests_on_both_ends_and_finds_edges():
    R = np.array([[0, 0, 1], [0, 1, 0], [-1, 0, 0]], float)  # local z along world x
    c = jax.jit(col.capsule_box)(_T((0, 0, 1.05), R), jnp.array([0.1, 1.0, 0]), _T(), jnp.array([2.0, 2.0, 1.0]))
    np.testing.assert_allclose(c.dist, [-0.05, -0.05], atol=1e-12)
    np.testing.assert_allclose(sorted(np.asarray(c.pos[:, 0])), [-1, 1], atol=1e-12)
    # across a narrow box: the middle of the capsule touches, the ends hang over
    c = jax.jit(col.capsule_box)(_T((0, 0, 1.05), R), jnp.array([0.1, 1.0, 0]), _T(), jnp.array([0.2, 2.0, 1.0]))
    assert np.isclose(c.dist.min(), -0.05, atol=1e-12)
    assert abs(float(c.pos[jnp.argmin(c.dist), 0])) <= 0.2 + 1e-9


def test_box_box_face_contacts():
    c = jax.jit(col.box_box)(_T(), jnp.array([1.0, 1.0, 1.0]), _T((0.2, 0.1, 1.9)), jnp.array([0.5, 0.5, 1.0]))
    assert c.dist.shape == (8,)
    real = np.asarray(c.dist) < 1.0
    np.testing.assert_allclose(c.dist[real], [-0.1] * 4, atol=1e-12)
    np.testing.assert_allclose(np.sort(np.asarray(c.pos[real, 0])), [-0.3, -0.3, 0.7, 0.7], atol=1e-12)
    np.testing.assert_allclose(c.frame[:, 0], np.tile([0, 0, 1.0], (8, 1)), atol=1e-12)
    np.testing.assert_array_equal(c.dist[~real], col.FAR)
    # a box turned 45 degrees about z on a larger one: its bottom face clipped by the top face to an octagon
    s = np.sqrt(0.5)
    Rz = np.array([[s, -s, 0], [s, s, 0], [0, 0, 1]])
    c = jax.jit(col.box_box)(_T(), jnp.array([1.0, 1.0, 1.0]), _T((0, 0, 1.9), Rz), jnp.array([0.9, 0.9, 1.0]))
    np.testing.assert_allclose(c.dist, [-0.1] * 8, atol=1e-12)


def _degenerate_cases():
    I, s = np.eye(3), lambda x: jnp.array(x, float)
    return {
        "coincident spheres": ("sphere", "sphere", _T(), s([0.3, 0, 0]), _T(), s([0.2, 0, 0])),
        "sphere on capsule axis": ("sphere", "capsule", _T(), s([0.3, 0, 0]), _T(), s([0.2, 0.5, 0])),
        "parallel capsules": ("capsule", "capsule", _T(), s([0.2, 0.5, 0]), _T((0.3, 0, 0.1)), s([0.2, 0.5, 0])),
        "coaxial capsules": ("capsule", "capsule", _T(), s([0.2, 0.5, 0]), _T((0, 0, 0.1)), s([0.2, 0.5, 0])),
        "crossing axes": ("capsule", "capsule", _T(), s([0.2, 0.5, 0]),
                          _T((0, 0, 0), [[1, 0, 0], [0, 0, -1], [0, 1, 0]]), s([0.2, 0.5, 0])),
        "box-box face aligned": ("box", "box", _T(), s([0.5, 0.5, 0.5]), _T((0, 0, 0.9)), s([0.5, 0.5, 0.5])),
        "box-box coincident": ("box", "box", _T(), s([0.5, 0.5, 0.5]), _T(), s([0.5, 0.5, 0.5])),
        "sphere centre inside a box": ("sphere", "box", _T((0.1, 0, 0)), s([0.2, 0, 0]), _T(), s([0.5, 0.5, 0.5])),
        "sphere centre at box centre": ("sphere", "box", _T(), s([0.2, 0, 0]), _T(), s([0.5, 0.5, 0.5])),
        "sphere centre on a box face": ("sphere", "box", _T((0.5, 0, 0)), s([0.2, 0, 0]), _T(), s([0.5, 0.5, 0.5])),
        "capsule through a box": ("capsule", "box", _T(), s([0.2, 0.5, 0]), _T(), s([0.5, 0.5, 0.5])),
        "capsule flat on a box": ("capsule", "box", _T((0, 0, 0.6), [[0, 0, 1], [0, 1, 0], [-1, 0, 0]]),
                                  s([0.2, 0.5, 0]), _T(), s([0.5, 0.5, 0.5])),
        "box on a plane": ("plane", "box", _T(), s([0, 0, 0]), _T((0, 0, 0.5)), s([0.5, 0.5, 0.5])),
        "capsule flat on a plane": ("plane", "capsule", _T(), s([0, 0, 0]), _T((0, 0, 0.1), I[[2, 1, 0]] * [1, 1, -1]),
                                    s([0.2, 0.5, 0])),
    }


@pytest.mark.parametrize("kinds", sorted({c[:2] for c in _degenerate_cases().values()}), ids="-".join)
def test_gradients_are_finite_at_degenerate_configurations(kinds):
    """Gradients of the distances, points and frames with respect to poses and sizes are finite at the
    configurations of `_degenerate_cases` (all cases of a pair of kinds in one vmapped batch)."""
    cases = [c[2:] for c in _degenerate_cases().values() if c[:2] == kinds]
    Ta, sa, Tb, sb = jax.tree.map(lambda *x: jnp.stack(x), *cases)
    fn = col.PAIR_FUNCTIONS[kinds]

    def total(Ta, sa, Tb, sb):
        c = jax.vmap(fn)(Ta, sa, Tb, sb)
        real = c.dist < 1.0
        return jnp.sum(jnp.where(real, c.dist, 0.0)) + jnp.sum(c.pos) + jnp.sum(c.frame), c

    grads, c = jax.jit(jax.grad(total, argnums=(0, 1, 2, 3), has_aux=True))(Ta, sa, Tb, sb)
    for x in jax.tree.leaves((grads, c)):
        assert np.all(np.isfinite(x)), kinds


def test_distance_gradient_matches_finite_differences():
    """d dist / d position of b is the normal, for a separated and a penetrating sphere-box and capsule pair."""
    for ka, kb, sa, sb, pb in [("sphere", "box", [0.2, 0, 0], [0.5, 0.4, 0.3], [0.3, 0.7, 0.2]),
                               ("sphere", "box", [0.2, 0, 0], [0.5, 0.4, 0.3], [0.1, 0.05, 0.0]),
                               ("capsule", "capsule", [0.2, 0.3, 0], [0.1, 0.4, 0], [0.2, 0.25, 0.1])]:
        fn = col.PAIR_FUNCTIONS[(ka, kb)]
        R = np.asarray(quat_to_matrix(jnp.array([0.9, 0.1, 0.3, 0.2]) / np.linalg.norm([0.9, 0.1, 0.3, 0.2])))
        sa, sb = jnp.array(sa, float), jnp.array(sb, float)
        Ta = _T((0, 0, 0), R) if ka == "capsule" else _T()
        d = lambda p: fn(Ta, sa, _T(p), sb).dist.min()
        g = jax.jit(jax.grad(d))(jnp.array(pb, float))
        c = jax.jit(fn)(Ta, sa, _T(pb), sb)
        np.testing.assert_allclose(g, c.frame[jnp.argmin(c.dist), 0], atol=1e-9)


# -- geometry, pairs, collide ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def quadruped():
    return assets.quadruped(floating_base=True)


def test_collide_matches_pair_functions_in_pair_order(quadruped):
    model = quadruped
    geoms = [geo.plane(name="floor"), geo.box("trunk", (0.18, 0.09, 0.05), name="body"),
             *[geo.sphere(f"{leg}_foot", 0.02, name=f"{leg}_foot") for leg in ("FL", "FR", "RR")],
             geo.capsule("FL_calf", 0.012, 0.1, (0, 0, -0.1)), geo.capsule("RL_calf", 0.012, 0.1, (0, 0, -0.1))]
    g = geo.geometry(model, geoms)
    assert g.names[5:] == ("capsule5", "capsule6") and g.ng == 7
    assert g.body[2] == model.body_names.index("FL_calf")  # the foot is a frame of the calf
    P = geo.pairs(model, g)
    kinds = [(g.kind[a], g.kind[b]) for a, b in zip(P.a, P.b)]
    assert all(geo.KINDS.index(x) <= geo.KINDS.index(y) for x, y in kinds)
    names = {(g.names[a], g.names[b]) for a, b in zip(P.a, P.b)}
    assert ("floor", "body") in names and ("FL_foot", "RR_foot") in names
    assert ("FL_foot", "capsule5") not in names and ("capsule5", "FL_foot") not in names  # one body
    assert P.nc == sum(col.CONTACTS[k] for k in kinds) == len(P.contact_a)
    q = jnp.zeros(model.nq).at[3].set(1.0).at[2].set(0.3)  # free joint: position, then quaternion [w, x, y, z]
    poses = jax.jit(geo.geom_poses)(g, forward_kinematics(model, q))
    c = jax.jit(col.collide, static_argnums=1)(g, P, poses)
    assert c.dist.shape == (P.nc,)
    jitted = {kinds: jax.jit(fn) for kinds, fn in col.PAIR_FUNCTIONS.items()}
    for k, (a, b) in enumerate(zip(P.a, P.b)):
        fn = jitted[(g.kind[a], g.kind[b])]
        ref = fn(jax.tree.map(lambda x: x[a], poses), g.size[a], jax.tree.map(lambda x: x[b], poses), g.size[b])
        sl = slice(P.offset[k], P.offset[k] + P.count[k])
        np.testing.assert_allclose(c.dist[sl], ref.dist, atol=1e-12)
        np.testing.assert_allclose(c.pos[sl], ref.pos, atol=1e-12)
    # the feet stand 0.3 - 0.4 - 0.02 below the floor
    feet = [k for k, (a, b) in enumerate(zip(P.a, P.b)) if g.names[a] == "floor" and "foot" in g.names[b]]
    np.testing.assert_allclose([c.dist[P.offset[k]] for k in feet], [0.3 - 0.4 - 0.02] * 3, atol=1e-12)
    # include / exclude by body and geom names
    P2 = geo.pairs(model, g, include=[("floor", "FL_calf"), ("body", "FR_foot")], exclude=[("floor", "capsule5")])
    assert [(g.names[a], g.names[b]) for a, b in zip(P2.a, P2.b)] == [("floor", "FL_foot"), ("FR_foot", "body")]
    P3 = geo.pairs(model, g, exclude=[("world", "trunk")])
    assert ("floor", "body") not in {(g.names[a], g.names[b]) for a, b in zip(P3.a, P3.b)}
    # jit, vmap and grad through the whole chain
    f = lambda q: jnp.sum(jnp.minimum(col.collide(g, P, geo.geom_poses(g, forward_kinematics(model, q))).dist, 0))
    grads = jax.jit(jax.vmap(jax.grad(f)))(jnp.stack([q, q.at[2].set(0.1)]))
    assert grads.shape == (2, model.nq) and np.all(np.isfinite(grads)) and np.any(grads[:, 2] != 0)


def test_geometry_is_a_pytree_in_the_model_dtype(quadruped):
    g = geo.geometry(quadruped.cast(jnp.float32), [geo.sphere("trunk", 0.1, friction=0.5)])
    assert g.size.dtype == g.placement.R.dtype == g.friction.dtype == jnp.float32
    assert g.friction[0] == 0.5
    leaves, tree = jax.tree.flatten(g)
    assert len(leaves) == 4 and jax.tree.unflatten(tree, leaves).names == ("sphere0",)
    pl = geo.geometry(quadruped, [geo.plane(None, (0, 0, 2), (0, 0, 0.1))])
    np.testing.assert_allclose(pl.placement.R[0][:, 2], [0, 0, 1])
    np.testing.assert_allclose(pl.placement.R[0].T @ pl.placement.R[0], np.eye(3), atol=1e-12)


@pytest.mark.parametrize("geoms, message", [
    ([geo.sphere("nose", 0.1, name="s")], r"geom 's'.*no body or frame 'nose'.*'trunk'"),
    ([geo.sphere("trunk", 0.0, name="s")], "geom 's'.*radius must be positive"),
    ([geo.sphere("trunk", -1.0)], "geom 'sphere0'.*radius must be positive"),
    ([geo.capsule("trunk", 0.1, -0.2, name="c")], "geom 'c'.*half_length must be non-negative"),
    ([geo.box("trunk", (0.1, 0.0, 0.1), name="b")], "geom 'b'.*half sizes must be positive"),
    ([geo.box("trunk", (0.1, 0.1), name="b")], "geom 'b'.*size must be 3 numbers"),
    ([geo.sphere("trunk", float("nan"), name="s")], "geom 's'.*finite"),
    ([geo.sphere("trunk", 0.1, (0, float("inf"), 0), name="s")], "geom 's'.*pos must be finite"),
    ([geo.box("trunk", (0.1, 0.1, 0.1), rot=np.diag([1, 1, -1.0]), name="b")], "geom 'b'.*not a rotation"),
    ([geo.box("trunk", (0.1, 0.1, 0.1), rot=2 * np.eye(3), name="b")], "geom 'b'.*not a rotation"),
    ([geo.sphere("trunk", 0.1, friction=-0.1, name="s")], "geom 's'.*friction must be finite and non-negative"),
    ([geo.plane(normal=(0, 0, 0), name="p")], "geom 'p'.*normal is zero"),
    ([geo.sphere("trunk", 0.1, name="s"), geo.sphere("FL_calf", 0.1, name="s")], "duplicate geom name 's'"),
])
def test_geometry_errors_name_the_geom(quadruped, geoms, message):
    with pytest.raises(ModelError, match=message):
        geo.geometry(quadruped, geoms)


@pytest.mark.parametrize("kwargs, message", [
    (dict(include=[("floor", "nose")]), r"'nose' is neither a geom nor a body"),
    (dict(include=[("trunk", "trunk")]), "names body 'trunk' twice"),
    (dict(include=[("s", "s")]), "names geom 's' twice"),
    (dict(include=[("floor", "ceiling")]), "'floor' and geom 'ceiling' are both fixed to the world"),
    (dict(include=[("floor", "wall")]), "both planes"),
    (dict(include=[("floor", "FR_hip")]), "body 'FR_hip' has no geoms"),
    (dict(exclude=[("s", "nose")]), "exclude pair.*'nose'"),
    (dict(include=["floor"]), r"\(name, name\) pair"),
])
def test_pairs_errors(quadruped, kwargs, message):
    g = geo.geometry(quadruped, [geo.plane(name="floor"), geo.plane(None, (1, 0, 0), name="wall"),
                                 geo.sphere(None, 0.1, (0, 0, 2), name="ceiling"), geo.sphere("trunk", 0.1, name="s")])
    with pytest.raises(ModelError, match=message):
        geo.pairs(quadruped, g, **kwargs)


def test_default_pairs_skip_what_cannot_collide(quadruped):
    g = geo.geometry(quadruped, [geo.plane(name="floor"), geo.plane(None, (1, 0, 0), name="wall"),
                                 geo.sphere(None, 0.1, (0, 0, 2), name="ceiling"), geo.sphere("trunk", 0.1, name="s"),
                                 geo.sphere("FL_hip", 0.05, name="hip"), geo.sphere("FL_thigh", 0.05, name="thigh")])
    named = lambda P: [(g.names[a], g.names[b]) for a, b in zip(P.a, P.b)]
    assert named(geo.pairs(quadruped, g)) == [("floor", "s"), ("floor", "hip"), ("floor", "thigh"), ("wall", "s"),
                                              ("wall", "hip"), ("wall", "thigh"), ("ceiling", "s"),
                                              ("ceiling", "hip"), ("ceiling", "thigh"), ("s", "thigh")]
    assert ("s", "hip") in named(geo.pairs(quadruped, g, exclude_parent_child=False))


# -- URDF -----------------------------------------------------------------------------------------------------


def test_urdf_geometry_of_the_quadruped(quadruped):
    geoms = urdf_geometry(assets.path("quadruped.urdf"), quadruped)
    assert [g.name for g in geoms] == [f"{leg}_foot/0" for leg in ("FL", "FR", "RL", "RR")]
    assert all(g.kind == "sphere" and g.size[0] == 0.02 for g in geoms)
    g = geo.geometry(quadruped, geoms)
    T = forward_kinematics(quadruped, jnp.zeros(quadruped.nq).at[3].set(1.0))
    np.testing.assert_allclose(geo.geom_poses(g, T).p[:, 2], [-0.4] * 4, atol=1e-12)


URDF = """<robot name="r">
  <link name="base">
    <collision name="hull"><origin xyz="0 0 0.1" rpy="0 0 1.5707963267948966"/>
      <geometry><mesh filename="part.stl" scale="2 1 1"/></geometry></collision>
    <collision><origin xyz="0 0 -0.2" rpy="1.5707963267948966 0 0"/>
      <geometry><cylinder radius="0.05" length="0.3"/></geometry></collision>
    <collision><geometry><mesh filename="package://robot/meshes/missing.stl"/></geometry></collision>
    <collision><geometry><box size="0.2 0.4 0.6"/></geometry></collision>
  </link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/></joint>
  <link name="arm"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>
    <collision><geometry><mesh filename="package://robot/meshes/arm.obj"/></geometry></collision>
  </link>
</robot>"""

STL = """solid part
facet normal 0 0 1
 outer loop
  vertex 0 0 0
  vertex 0.1 0.2 0
  vertex 0.1 0 0.3
 endloop
endfacet
endsolid part
"""


def test_urdf_geometry_cylinders_and_meshes(tmp_path):
    (tmp_path / "part.stl").write_text(STL)
    (tmp_path / "robot" / "meshes").mkdir(parents=True)
    (tmp_path / "robot" / "meshes" / "arm.obj").write_text("v -1 0 0\nv 1 2 0.5\nv 0 0 -0.5\nf 1 2 3\n")
    (tmp_path / "r.urdf").write_text(URDF)
    model = load_urdf(tmp_path / "r.urdf")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        geoms = urdf_geometry(tmp_path / "r.urdf", model)
    text = [str(w.message) for w in caught]
    assert any("'base'" in t and "part.stl" in t and "bounding box" in t for t in text)
    assert any("missing.stl" in t and "not found" in t for t in text)
    assert sum("replaced by capsules" in t for t in text) == 1
    assert [g.name for g in geoms] == ["hull", "base/1", "base/3", "arm/0"]
    hull, cyl, bx, arm = geoms
    # the STL's bounding box [0, 0.2] x [0, 0.2] x [0, 0.3] (x scaled by 2), turned 90 degrees about z
    np.testing.assert_allclose(hull.size, [0.1, 0.1, 0.15])
    np.testing.assert_allclose(hull.pos, [-0.1, 0.1, 0.25], atol=1e-12)
    assert cyl.kind == "capsule" and np.allclose(cyl.size, [0.05, 0.1, 0]) and np.allclose(cyl.pos, [0, 0, -0.2])
    np.testing.assert_allclose(np.reshape(cyl.rot, (3, 3)) @ [0, 0, 1], [0, -1, 0], atol=1e-12)
    assert bx.kind == "box" and np.allclose(bx.size, [0.1, 0.2, 0.3])
    np.testing.assert_allclose(arm.size, [1, 1, 0.5]), np.testing.assert_allclose(arm.pos, [0, 1, 0])
    g = geo.geometry(model, geoms)
    assert g.body == (-1, -1, -1, 0)  # the base is fixed: its geoms are the world's
    # the same document as a string, meshes relative to base_dir
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = urdf_geometry(URDF, model, string=True, base_dir=tmp_path)
    assert [g.name for g in again] == [g.name for g in geoms]


def test_binary_stl(tmp_path):
    import struct
    tri = np.array([[0, 0, 0], [1, 0, 0], [0, 2, -1]], np.float32)
    data = b"\0" * 80 + struct.pack("<I", 1) + np.r_[[0, 0, 1], tri.ravel()].astype("<f4").tobytes() + b"\0\0"
    (tmp_path / "m.stl").write_bytes(data)
    from jaxmb.sim.urdf_collision import read_mesh_vertices
    np.testing.assert_allclose(read_mesh_vertices(str(tmp_path / "m.stl")), tri)
