"""GPData: the one GP data check of jaxlab.bo."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.bo import GPData, GPParams, gp_log_marginal, rambo_init


def test_create_checks_once_and_keeps_the_data():
    x = jnp.arange(6.0).reshape(3, 2)
    data = GPData.create(x, np.array([1, 2, 3], np.float64), jnp.array([True, False, True]))
    assert data.x is x and data.y.dtype == x.dtype and data.mask.tolist() == [True, False, True]
    assert GPData.create(x, jnp.zeros(3)).mask.tolist() == [True, True, True]
    # NaN at a masked (padded) row is allowed: padding is never read
    padded = GPData.create(x.at[1, 0].set(jnp.nan), jnp.zeros(3).at[1].set(jnp.inf),
                           jnp.array([True, False, True]))  # fmt: skip
    assert bool(jnp.isnan(padded.x[1, 0]))
    # a pytree: through jit whole, traced data checked for shapes only
    out = jax.jit(lambda d: GPData.create(*d).y.sum())(data)
    assert float(out) == 6.0


@pytest.mark.parametrize(
    ("args", "argument"),
    [
        ((jnp.zeros(3), jnp.zeros(3)), "x"),  # 1-D inputs
        ((jnp.zeros((3, 2), jnp.int32), jnp.zeros(3)), "x"),  # integer inputs
        ((jnp.zeros((3, 2)), jnp.zeros(2)), "y"),  # one entry per row
        ((jnp.zeros((3, 2)), jnp.zeros(3), jnp.ones(3)), "mask"),  # not bool
        ((jnp.zeros((3, 2)), jnp.zeros(3), jnp.ones(2, bool)), "mask"),  # wrong length
        ((jnp.zeros((3, 2)), jnp.zeros(3), jnp.zeros(3, bool)), "mask"),  # selects nothing
        ((jnp.zeros((3, 2)).at[0, 1].set(jnp.nan), jnp.zeros(3)), "x"),
        ((jnp.zeros((3, 2)), jnp.zeros(3).at[2].set(jnp.inf)), "y"),
    ],
)
def test_bad_data_names_the_argument(args, argument):
    with pytest.raises((ValueError, TypeError), match=rf"^{argument}\b"):
        GPData.create(*args)


def test_gp_and_rambo_use_the_same_check():
    x, y = jnp.zeros((3, 1)), jnp.zeros(3).at[0].set(jnp.nan)
    messages = set()
    for call in (
        lambda: gp_log_marginal(x, y, GPParams(1.0, 1.0, 0.1)),
        lambda: rambo_init(jax.random.key(0), x, y),
        lambda: GPData.create(x, y),
    ):
        with pytest.raises(ValueError) as info:
            call()
        messages.add(str(info.value))
    assert messages == {"y must be finite at every unmasked observation, got NaN or inf"}
