"""Shared test configuration: the suite runs in float64.

x64 must be enabled before any array is created, so it is set here, at import, before pytest imports the test
modules (the Pinocchio oracle tests rely on it too). Tests that check float32 cast explicitly. The suite runs jaxmb
alone, so it gives jaxmb's XLA options to every ``jax.jit`` (``JAXMB_XLA_FLAGS=1``, `jaxmb.batching.compile`).
"""

import os

import jax
import pytest

jax.config.update("jax_enable_x64", True)
os.environ.setdefault("JAXMB_XLA_FLAGS", "1")  # the suite's thousands of programs compile faster under jaxmb's options


@pytest.fixture(scope="module", autouse=True)
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module. Each program maps its machine code into the process
    (3-4 mappings each); a whole session compiles thousands, and a process that reaches the kernel's default limit
    of 65530 mappings crashes inside the next compile."""
    yield
    jax.clear_caches()


@pytest.fixture(scope="session")
def check_grads_in_groups():
    """`checks.check_grads` of ``f`` in groups of its arguments, each group given by positions into ``args``, the
    other arguments held: ``check_grads_in_groups(f, args, [(0, 1), (2,)], eps=...)``. Each group's checks are
    those of ``f`` as a function of that group alone (the same random directions), made on the three programs of
    ``f`` in every argument (`checks.derivative_programs`, the other arguments' tangents zero): one set of
    programs for all the groups."""
    return _check_grads_in_groups


def _check_grads_in_groups(f, args, groups, atol=None, rtol=None, eps=None):
    from jax.test_util import check_jvp, check_vjp

    import checks

    primal, jvp, vjp = checks.derivative_programs(f)
    zeros = tuple(jax.tree.map(jax.numpy.zeros_like, a) for a in args)
    tolerances = dict(atol=atol, rtol=rtol, **({} if eps is None else {"eps": eps}))

    def with_group(group, values, held):
        out = list(held)
        for i, x in zip(group, values):
            out[i] = x
        return tuple(out)

    for group in groups:
        def f_group(*sub, group=group):
            return primal(*with_group(group, sub, args))

        def jvp_group(sub, tangents, group=group):
            return jvp(with_group(group, sub, args), with_group(group, tangents, zeros))

        def vjp_group(*sub, group=group):
            full = with_group(group, sub, args)
            return primal(*full), lambda ct: tuple(vjp(full, ct)[i] for i in group)

        sub_args = tuple(args[i] for i in group)
        check_jvp(f_group, jvp_group, sub_args, **tolerances)
        check_vjp(f_group, vjp_group, sub_args, **tolerances)
