"""The AB forward dynamics of a batch on the GPU as fused Pallas (Triton) kernels: Alg 7.2 on the screw joints
(revolute, prismatic, helical) as three loops over the bodies inside one kernel, one state per lane.

The level-scheduled sweeps (`jaxmb.sweeps`) run on the GPU as many XLA kernels, each of which streams whole level
arrays through the GPU's memory. Here one program of a kernel computes the ABA of `BLOCK` states (benchmarks/
README.md, "Fused kernels against the sweeps"). A body's step is straight-line code on scalars: every symbol of the
book is a Python list of scalars (a 6-vector 6 of them, a symmetric 6x6 inertia its 21 distinct entries), every
scalar an array of `BLOCK` states, and products with the constants 0 and 1 are folded while tracing. The spatial
algebra on such lists is `jaxmb.spatial_scalar`, the twin of `jaxmb.spatial`, whose stacked arrays a kernel of one
state per lane would only concatenate and slice apart again. The body's parameters come by scalar loads; what the
other bodies need (``X, V, a``, the sums ``P`` and ``z``, ``G, nu, alpha``) goes through a scratch memory with one
column per state, so that a warp's loads and stores are coalesced.

Loops, not one unrolled program: Triton did not compile the talos ABA unrolled body by body, nor a free joint's
6x6 step inside the kernel, in any usable time; the three loops over screw bodies compile (benchmarks/findings.md,
"Results: GPU"). So joints of other kinds are taken at roots only (a free or planar base, a
spherical root), by XLA between two kernels with the sweeps' own per-body steps (`jaxmb.dynamics.ab_steps`): their
``V`` before the first kernel (passes 0 and 1), their ``P``, ``z``, ``qdd`` and ``alpha`` from the first kernel's
sums before the second (pass 2). A tree with such a joint below a root takes the sweeps.

The recursions and conventions are those of `jaxmb.dynamics.articulated` (equation numbers as there): spatial
vectors ``[angular; linear]`` in body coordinates, ``phi`` moving forces from child to parent, gravity as the
world's acceleration. `forward_dynamics` under `jax.vmap` on a GPU calls `batched_rule`; its derivatives stay
those of `jaxmb.dynamics.articulated` (implicit function theorem): this module computes the primal only.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb import spatial_scalar as ss
from jaxmb.dynamics.ab_steps import ToParent, VelocityTerms, acceleration_step, articulated_step
from jaxmb.hinges import base_acceleration, body_inertias
from jaxmb.joints import KINDS
from jaxmb.spatial import Transform, compose, cross_force, cross_motion, mv
from jaxmb.spatial_scalar import add, dot, mul, sub, symmetric, vadd

ON_GPU = True
"""Batches of `jaxmb.forward_dynamics` on a GPU run as this module's kernels; False: as the level-scheduled sweeps
(benchmarks/fused.py compares the two)."""

BLOCK = 128
"""States per program of a kernel."""

NUM_WARPS = 4
"""Warps per program: with `BLOCK` 128, one state per thread."""


# -- the model's parameters, the tree and the scratch memory ----------------------------------------------------------

_PER_BODY = 9 + 3 + 3 + 2 + 21  # X_tree R, X_tree p, axis, coef, the upper triangle of the spatial inertia M(k)
_UPPER = list(zip(*np.triu_indices(6)))


def parameters(model):
    """The parameters the kernels read, flat, (n_params,): per body ``X_tree``, axis, coef and the spatial
    inertia's upper triangle, then the armature (nv,) and gravity (3,)."""
    M = body_inertias(model)
    per_body = jnp.concatenate([model.X_tree.R.reshape(-1, 9), model.X_tree.p, model.axis, model.coef,
                                M[:, np.triu_indices(6)[0], np.triu_indices(6)[1]]], 1)
    return jnp.concatenate([per_body.reshape(-1), model.armature, model.gravity])


class _Plan:
    """What the kernels are built from, known at trace time: the bodies of screw joints that the kernels compute
    (``screws``, in body order) and the roots of other kinds that XLA computes (``roots``), and the kernels' integer
    tables: per body its parent's slot (the world's slot is ``nb``), ``q_offset`` and ``v_offset``, then
    ``screws``. `_Plan.of` gives None where a joint of another kind has a parent: the kernels do not apply."""

    def __init__(self, topo):
        self.topo = topo
        self.screws = [k for k in range(topo.nb) if topo.kinds[k] == "screw"]
        self.roots = [k for k in range(topo.nb) if topo.kinds[k] != "screw"]
        parent = np.where(topo.parent < 0, topo.nb, topo.parent)
        self.tables = np.concatenate([parent, topo.q_offset, topo.v_offset, self.screws]).astype(np.int32)

    @staticmethod
    @functools.cache
    def of(topo):
        """The plan of a topology, made once per topology (the rule and the kernels both ask), or None."""
        plan = _Plan(topo)
        applies = bool(plan.screws) and all(topo.parent[k] < 0 for k in plan.roots)
        return plan if applies else None


class _Scratch:
    """Rows of the per-state scratch memory of the first kernel (one column per state), field by field: per body
    slot (nb + 1 of them, the last the world's) X (12: R, p), V, a, and the sums P (21: the upper triangle) and z
    that pass 1 gathers, ``z`` starting from ``b(k)``; per coordinate G (6) and nu. ``rows(ref, field, k)`` reads
    the values of body or coordinate ``k`` (a traced index), ``write`` stores them."""

    WIDTH = dict(X=12, V=6, a=6, P=21, z=6)

    def __init__(self, nb, nv):
        self.first, row = {}, 0
        for name, width in self.WIDTH.items():
            self.first[name], row = row, row + width * (nb + 1)
        self.first["G"], self.first["nu"] = row, row + 6 * nv
        self.size = row + 7 * nv

    def width(self, field):
        return self.WIDTH.get(field, 6 if field == "G" else 1)

    def rows(self, ref, field, k):
        start = self.first[field] + k * self.width(field)
        return [ref[start + i, :] for i in range(self.width(field))]

    def write(self, ref, field, k, values):
        start = self.first[field] + k * self.width(field)
        for i, x in enumerate(values):
            ref[start + i, :] = jnp.broadcast_to(jnp.asarray(x, ref.dtype), ref.shape[1:])


# -- Alg 7.2 on the screw joints: one step per pass, each a loop over the bodies in a kernel --------------------


class _Body:
    """The ``i``-th body of the plan's screws (a traced index): its index ``k``, parent slot, coordinates ``q0``,
    ``v0``, and its parameters by scalar loads; ``H`` its hinge row ``[c_w axis, c_v axis]``."""

    def __init__(self, refs, i):
        nb, tables, theta = refs.topo.nb, refs.tables, refs.theta
        self.refs = refs
        self.k = k = tables[3 * nb + i]
        self.parent, self.q0, self.v0 = tables[k], tables[nb + k], tables[2 * nb + k]
        o = k * _PER_BODY
        self.axis = [theta[o + 12 + j] for j in range(3)]
        self.coef = [theta[o + 15 + j] for j in range(2)]
        self.H = [mul(self.coef[0], a) for a in self.axis] + [mul(self.coef[1], a) for a in self.axis]

    def placement(self):
        """``X_tree(k)``, a `Transform` of lists."""
        o, theta = self.k * _PER_BODY, self.refs.theta
        R = [[theta[o + 3 * i + j] for j in range(3)] for i in range(3)]
        return Transform(R, [theta[o + 9 + i] for i in range(3)])

    def inertia(self):
        """``M(k)``, symmetric 6x6."""
        o = self.k * _PER_BODY + 17
        upper = {ij: self.refs.theta[o + n] for n, ij in enumerate(_UPPER)}
        return symmetric(lambda i, j: upper[(i, j)], 6)


def _pose(X):
    """The `Transform` of lists stored in the 12 scratch rows ``X``: ``R`` by rows, then ``p``."""
    return Transform([X[0:3], X[3:6], X[6:9]], X[9:12])


def _velocity_step(refs, body):
    """Pass 0 (down): ``X(k)``, ``V(k) = phi*(parent, k) V(parent) + H*(k) qd(k)``, ``a(k)``, ``b(k)`` (the start of
    the sum ``z``); clears the sum ``P``."""
    mem, m = refs.mem, refs.scratch
    X_J = ss.screw_transform(refs.q[body.q0, :], body.axis, body.coef)
    X = ss.compose(body.placement(), X_J)  # X_tree X_J
    vJ = [mul(h, refs.qd[body.v0, :]) for h in body.H]  # H*(k) qd(k)
    V = vadd(ss.phi_star(X, m.rows(mem, "V", body.parent)), vJ)
    b = ss.cross_force(V, ss.mv(body.inertia(), V))  # b(k) = V-bar(k) M(k) V(k)
    if refs.f_ext is not None:
        b = [sub(x, refs.f_ext[6 * body.k + i, :]) for i, x in enumerate(b)]
    m.write(mem, "X", body.k, [x for row in X.R for x in row] + X.p)
    m.write(mem, "V", body.k, V)
    m.write(mem, "a", body.k, ss.cross_motion(V, vJ))  # a(k) = V(k) x H*(k) qd(k)
    m.write(mem, "P", body.k, [0.0] * 21)
    m.write(mem, "z", body.k, b)


def _articulated_step(refs, body):
    """Pass 1 (up): ``P(k)``, ``z(k)``, the gain ``G(k)`` and ``nu(k)``; ``P+`` and ``z+`` added to the parent's
    sums (a root's to the world's, never read)."""
    mem, m = refs.mem, refs.scratch
    X = _pose(m.rows(mem, "X", body.k))
    M, P_children = body.inertia(), dict(zip(_UPPER, m.rows(mem, "P", body.k)))
    P = symmetric(lambda i, j: add(M[i][j], P_children[(i, j)]), 6)  # (6.28)
    z = vadd(ss.mv(P, m.rows(mem, "a", body.k)), m.rows(mem, "z", body.k))  # (7.42)
    PH = ss.mv(P, body.H)  # P(k) H*(k)
    D = add(dot(body.H, PH), refs.theta[refs.topo.nb * _PER_BODY + body.v0])  # H P H* + armature (6.13)
    D_inv = 1.0 / D
    eps = sub(refs.tau[body.v0, :], dot(body.H, z))  # eps(k) = T(k) - H(k) z(k)
    G = [mul(x, D_inv) for x in PH]  # G(k) = P H* D^-1, the Kalman gain
    nu = mul(eps, D_inv)  # nu(k) = D^-1(k) eps(k)
    m.write(mem, "G", body.v0, G)
    m.write(mem, "nu", body.v0, [nu])
    P_plus = symmetric(lambda i, j: sub(P[i][j], mul(G[i], PH[j])), 6)  # P+(k) = P - G H P
    z_plus = [add(z_i, mul(g, eps)) for z_i, g in zip(z, G)]  # z+(k) = z(k) + G(k) eps(k)
    to_P, to_z = ss.phi_congruence(X, P_plus), ss.phi(X, z_plus)
    sum_P = m.rows(mem, "P", body.parent)
    m.write(mem, "P", body.parent, [add(x, to_P[i][j]) for x, (i, j) in zip(sum_P, _UPPER)])
    m.write(mem, "z", body.parent, vadd(m.rows(mem, "z", body.parent), to_z))


def _acceleration_step(refs, body):
    """Pass 2 (down): ``alpha+(k) = phi*(parent, k) alpha(parent)``, ``qdd(k) = nu(k) - G*(k) alpha+(k)`` (7.31),
    ``alpha(k) = alpha+(k) + H*(k) qdd(k) + a(k)``; ``alpha`` is the second kernel's own scratch (6 rows a slot)."""
    mem, m = refs.mem, refs.scratch
    X = _pose(m.rows(mem, "X", body.k))
    alpha_plus = ss.phi_star(X, [refs.alpha[6 * body.parent + i, :] for i in range(6)])
    qdd = sub(m.rows(mem, "nu", body.v0)[0], dot(m.rows(mem, "G", body.v0), alpha_plus))
    refs.qdd[body.v0, :] = qdd
    alpha = [add(x, mul(h, qdd), y) for x, h, y in zip(alpha_plus, body.H, m.rows(mem, "a", body.k))]
    for i, x in enumerate(alpha):
        refs.alpha[6 * body.k + i, :] = x


class _Refs:
    """What the kernels' steps read and write (Pallas refs, states batch last): the parameters ``theta``, the
    plan's ``tables``, the states' rows ``q``, ``qd``, ``tau``, ``f_ext`` (or None), the scratch ``mem``, and in
    the second kernel ``alpha`` and ``qdd``."""

    def __init__(self, topo, theta, tables, mem, q=None, qd=None, tau=None, f_ext=None, alpha=None, qdd=None):
        self.topo, self.theta, self.tables, self.mem = topo, theta, tables, mem
        self.q, self.qd, self.tau, self.f_ext, self.alpha, self.qdd = q, qd, tau, f_ext, alpha, qdd
        self.scratch = _Scratch(topo.nb, topo.nv)


def _sweep(refs, step, n, reverse=False):
    """``step`` on the plan's screws in order (reversed: tips first), one `lax.fori_loop`."""
    def one(i, carry):
        step(refs, _Body(refs, n - 1 - i if reverse else i))
        return carry
    jax.lax.fori_loop(0, n, one, 0)


# -- the roots of other kinds, by XLA with the sweeps' own steps --------------------------------------------------


def _root_motion(model, k, q, qd, f_ext):
    """Pass 0 of root ``k`` for one state, as `jaxmb.dynamics.ab_steps.VelocityTerms` of that body:
    ``V = H* qd`` since the world is at rest."""
    topo = model.topology
    kind = KINDS[topo.kinds[k]]
    q_k = q[topo.q_offset[k]:topo.q_offset[k] + kind.nq]
    qd_k = qd[topo.v_offset[k]:topo.v_offset[k] + kind.nv]
    X = compose(Transform(model.X_tree.R[k], model.X_tree.p[k]), kind.transform(q_k, model.axis[k], model.coef[k]))
    H, M = kind.hinge_map(model.axis[k], model.coef[k]), body_inertias(model)[k]
    V = mv(H.T, qd_k)
    b = cross_force(V, mv(M, V))
    return VelocityTerms(X=X, H=H, M=M, V=V, a=cross_motion(V, V),  # a(k) = V(k) x H*(k) qd(k)
                         b=b if f_ext is None else b - f_ext[k])


def _root_accelerations(model, k, motion, P_children, z_children, tau):
    """Passes 1 and 2 of root ``k`` for one state, by the sweeps' own steps (`jaxmb.dynamics.ab_steps`), from its
    pass 0 ``motion`` (`_root_motion`) and its children's sums: `jaxmb.dynamics.ab_steps.Acceleration`."""
    topo = model.topology
    v = slice(topo.v_offset[k], topo.v_offset[k] + motion.H.shape[0])
    gains = articulated_step(ToParent(P=P_children, z=z_children), motion.X, motion.M, motion.a, motion.b, motion.H,
                             tau[v], model.armature[v]).coordinates
    return acceleration_step(base_acceleration(model), motion.X, motion.a, gains.G, gains.nu, motion.H)


def _pow2(n):
    return 1 << max(n - 1, 0).bit_length()


def batched_accelerations(model, q, qd, tau, f_ext=None, interpret=False):
    """``qdd`` (B, nv) of a batch, ``q`` (B, nq), ``qd``, ``tau`` (B, nv), ``f_ext`` (B, nb, 6) or None, by Pallas
    kernels of ``ceil(B / BLOCK)`` programs, for a model whose joints of kinds other than screw are roots (`_Plan`);
    ``interpret``: Pallas' interpreter (any backend, for tests).

    Without such roots, one kernel computes the three passes. With them (a free base), XLA computes the roots around
    two kernels: their ``V`` before the first (passes 0 and 1), their ``P``, ``z``, ``qdd`` and ``alpha`` from the
    first kernel's sums before the second (pass 2). The kernels take their arrays batch last, the batch padded to
    whole blocks with copies of the last state."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    topo, n, plan = model.topology, q.shape[0], _Plan.of(model.topology)
    if plan is None:
        raise ValueError(f"fused forward dynamics: model {model.name!r} has a joint of a kind other than screw "
                         f"below its root; such models take the sweeps")
    theta = parameters(model)
    dtype = jnp.result_type(theta, q, qd, tau)
    q, qd, tau = (jnp.asarray(x, dtype) for x in (q, qd, tau))
    f_ext = None if f_ext is None else jnp.asarray(f_ext, dtype)
    n_pad = -(-n // BLOCK) * BLOCK
    scratch = _Scratch(topo.nb, topo.nv)

    def rows(x):  # (B, ...) -> (pow2 >= rows, n_pad), batch last
        x = jnp.pad(x.reshape(n, -1), ((0, n_pad - n), (0, 0)), mode="edge").T
        return jnp.pad(x, ((0, _pow2(x.shape[0]) - x.shape[0]), (0, 0)))

    def call(kernel, inputs, out_rows, name):
        block = lambda r: pl.BlockSpec((r, BLOCK), lambda i: (0, i))  # noqa: E731
        whole = lambda x: pl.BlockSpec(x.shape, lambda i: (0,))  # noqa: E731
        return pl.pallas_call(
            kernel,
            out_shape=[jax.ShapeDtypeStruct((r, n_pad), dtype) for r in out_rows],
            grid=(n_pad // BLOCK,),
            in_specs=[whole(theta), whole(tables)] + [block(x.shape[0]) for x in inputs],
            out_specs=[block(r) for r in out_rows],
            compiler_params=plgpu.CompilerParams(num_warps=NUM_WARPS, num_stages=1),
            interpret=interpret,
            name=f"{name}_{model.name}",
        )(theta, tables, *inputs)

    theta = jnp.pad(theta.astype(dtype), (0, _pow2(theta.size) - theta.size))
    tables = jnp.asarray(np.pad(plan.tables, (0, _pow2(plan.tables.size) - plan.tables.size)))
    states = [rows(q), rows(qd), rows(tau)] + ([] if f_ext is None else [rows(f_ext)])
    world = jnp.broadcast_to(base_acceleration(model).astype(dtype), (n, 6))  # alpha(world) = [0; -g]
    n_mem, n_alpha, n_qdd = _pow2(scratch.size), _pow2(6 * (topo.nb + 1)), _pow2(topo.nv)

    def passes_0_1(r, V_roots):  # the world's V and the roots' (rows of V_roots), then pass 0 and pass 1
        scratch.write(r.mem, "V", topo.nb, [0.0] * 6)
        for j, k in enumerate(plan.roots):
            scratch.write(r.mem, "V", k, [V_roots[6 * j + i, :] for i in range(6)])
            scratch.write(r.mem, "P", k, [0.0] * 21)
            scratch.write(r.mem, "z", k, [0.0] * 6)
        _sweep(r, _velocity_step, len(plan.screws))
        _sweep(r, _articulated_step, len(plan.screws), reverse=True)

    def pass_2(r, alpha_in):  # the world's alpha and the roots' (rows of alpha_in), then pass 2
        for j, k in enumerate([topo.nb] + plan.roots):
            for i in range(6):
                r.alpha[6 * k + i, :] = alpha_in[6 * j + i, :]
        _sweep(r, _acceleration_step, len(plan.screws))

    if not plan.roots:  # one kernel, the three passes
        def aba(theta_ref, tables_ref, q_ref, qd_ref, tau_ref, *refs):
            *f_ref, world_ref, mem_ref, qdd_ref, alpha_ref = refs
            r = _Refs(topo, theta_ref, tables_ref, mem_ref, q_ref, qd_ref, tau_ref, f_ref[0] if f_ref else None,
                      alpha_ref, qdd_ref)
            passes_0_1(r, None)
            pass_2(r, world_ref)

        _, qdd, _ = call(aba, states + [rows(world)], [n_mem, n_qdd, n_alpha], "fused_aba")
        return qdd[: topo.nv, :n].T

    # the roots' pass 0 by XLA, the first kernel, the roots' passes 1 and 2 by XLA, the second kernel
    motion = {k: jax.vmap(_root_motion, (None, None, 0, 0, None if f_ext is None else 0))(model, k, q, qd, f_ext)
              for k in plan.roots}

    def up(theta_ref, tables_ref, q_ref, qd_ref, tau_ref, *refs):
        *f_ref, V_ref, mem_ref = refs
        passes_0_1(_Refs(topo, theta_ref, tables_ref, mem_ref, q_ref, qd_ref, tau_ref, f_ref[0] if f_ref else None),
                   V_ref)

    V_roots = rows(jnp.stack([motion[k].V for k in plan.roots], 1))
    (mem,) = call(up, states + [V_roots], [n_mem], "fused_aba_up")
    alpha_roots, qdd_roots = [], []
    for k in plan.roots:
        P = mem[scratch.first["P"] + 21 * k:][:21, :n].T
        P = jnp.zeros((n, 6, 6), dtype).at[:, np.triu_indices(6)[0], np.triu_indices(6)[1]].set(P)
        P = P + jnp.triu(P, 1).swapaxes(-1, -2)  # the children's sum, from its upper triangle
        z = mem[scratch.first["z"] + 6 * k:][:6, :n].T
        alpha, qdd_k = jax.vmap(_root_accelerations, (None, None, 0, 0, 0, 0))(model, k, motion[k], P, z, tau)
        alpha_roots.append(alpha)
        qdd_roots.append(qdd_k)

    def down(theta_ref, tables_ref, mem_ref, alpha_in_ref, qdd_ref, alpha_ref):
        pass_2(_Refs(topo, theta_ref, tables_ref, mem_ref, alpha=alpha_ref, qdd=qdd_ref), alpha_in_ref)

    qdd, _ = call(down, [mem, rows(jnp.stack([world] + alpha_roots, 1))], [n_qdd, n_alpha], "fused_aba_down")
    qdd = qdd[: topo.nv, :n].T
    for k, qdd_k in zip(plan.roots, qdd_roots):
        qdd = qdd.at[:, topo.v_offset[k]:topo.v_offset[k] + qdd_k.shape[1]].set(qdd_k)
    return qdd


def batched_rule(axis_size, batched, model, q, qd, tau, f_ext):
    """`batched_accelerations` of a batch under `jax.vmap` on a GPU, the unbatched arguments broadcast; None where
    it does not apply (`ON_GPU` False, another backend, an empty batch, a batch of models, a joint of another kind
    than screw below a root)."""
    if (not ON_GPU or jax.default_backend() != "gpu" or axis_size == 0 or any(jax.tree.leaves(batched[0]))
            or _Plan.of(model.topology) is None):
        return None
    spread = lambda x, b: x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x))  # noqa: E731
    f_ext = None if f_ext is None else spread(f_ext, batched[4])
    return batched_accelerations(model, spread(q, batched[1]), spread(qd, batched[2]), spread(tau, batched[3]), f_ext)
