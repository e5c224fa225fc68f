"""Compressors: contraction bounds (exact and Monte Carlo), identities, oddness, scopes, bad input.

Truths used: the note's check 5 closed forms (scaled sign identity, top-k and rotation equality
cases), numpy re-implementations of top-k and block top-k selection, closed-form expectations of
rand-k and natural compression, and per-leaf/concatenated re-computation of the two scopes.
"""

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from jaxlab import optim

D = 12  # fixed vector size of the property tests (even, for the rotation compressor)
# Monte Carlo: averages over this many keys; a mean is accepted within MC_SIGMAS standard errors
# (estimated from the same sample) of its expectation. 5 sigma: a false alarm has probability
# about 6e-7 per comparison, and hypothesis is derandomised, so the draws are fixed.
MC_SAMPLES = 4096
MC_SIGMAS = 5.0
# float64 round-off slack of the exact identities (relative to ||v||^2).
EXACT_RTOL = 1e-12

# Entries 0 or of magnitude in [1e-3, 1e3]: squared errors and variances then stay far from float64
# underflow (entries near 1e-300 would make the closed-form variances round to 0).
_magnitude = st.floats(1e-3, 1e3, allow_nan=False, allow_subnormal=False)
_entry = st.one_of(st.just(0.0), _magnitude, _magnitude.map(lambda x: -x))
vectors = hnp.arrays(np.float64, (D,), elements=_entry).filter(lambda v: np.any(v != 0))
# No zero entries: the scaled-sign identity needs sign(v) != 0.
nonzero_vectors = st.tuples(
    hnp.arrays(np.float64, (D,), elements=_magnitude),
    hnp.arrays(np.bool_, (D,)),
).map(lambda ms: np.where(ms[1], -ms[0], ms[0]))
sign_vectors = hnp.arrays(np.bool_, (D,)).map(lambda s: np.where(s, -1.0, 1.0))
scales = st.floats(1e-3, 1e3, allow_nan=False)

DETERMINISTIC = {
    "identity": optim.identity(),
    "top_k": optim.top_k(5),
    "top_k_ratio": optim.top_k(ratio=0.3),
    "scaled_sign": optim.scaled_sign(),
    "rotation": optim.rotation_compressor(0.6, 1.1),
    "block_top_k": optim.block_top_k(2, 5),  # 12 = 5 + 5 + a partial block of 2
    "block_top_k_1": optim.block_top_k(1, 4),
    "block_top_k_wide": optim.block_top_k(9, 11),  # k > 8: the row-wise lax.top_k path
}
RANDOM = {
    "rand_k": optim.rand_k(4),
    "rand_k_unbiased": optim.rand_k(ratio=0.25, unbiased=True),
    "natural": optim.natural_compression(),
}
ALL = {**DETERMINISTIC, **RANDOM}


@functools.partial(jax.jit, static_argnums=0)
def _compress(compressor, v, key):
    return compressor.compress(v, key)


@functools.partial(jax.jit, static_argnums=0)
def _call(compressor, tree, key):
    return compressor.tree_compress(tree, key)


@functools.partial(jax.jit, static_argnums=(0, 2))
def _samples(compressor, v, unbiased):
    """``MC_SAMPLES`` draws of the compressor (or its unbiased operator) on ``v``."""
    keys = jax.random.split(jax.random.PRNGKey(2026), MC_SAMPLES)
    fn = compressor.unbiased_compress if unbiased else compressor.compress
    return jax.vmap(lambda key: fn(v, key))(keys)


def _key():
    return jax.random.PRNGKey(0)


def _err(c, v):
    return float(np.sum((np.asarray(c, np.float64) - v) ** 2))


# ------------------------------------------------------------------------------------------------
# Deterministic compressors: exact bounds and identities (float64).


@pytest.mark.parametrize("name", sorted(DETERMINISTIC))
@settings(max_examples=40, deadline=None)
@given(v=vectors)
def test_deterministic_contraction_bound(name, v):
    compressor = DETERMINISTIC[name]
    with jax.enable_x64(True):
        c = _compress(compressor, jnp.asarray(v), _key())
    norm2 = float(np.sum(v**2))
    assert _err(c, v) <= (1 - compressor.alpha(D)) * norm2 + EXACT_RTOL * norm2


@settings(max_examples=40, deadline=None)
@given(v=nonzero_vectors)
def test_scaled_sign_identity(v):
    # Note, check 5: ||C(v) - v||^2 = ||v||^2 - ||v||_1^2 / d exactly (no zero entries).
    with jax.enable_x64(True):
        c = _compress(optim.scaled_sign(), jnp.asarray(v), _key())
    norm2 = float(np.sum(v**2))
    expected = norm2 - float(np.sum(np.abs(v))) ** 2 / D
    assert _err(c, v) == pytest.approx(expected, rel=1e-9, abs=EXACT_RTOL * norm2)
    np.testing.assert_allclose(np.asarray(c), np.sum(np.abs(v)) / D * np.sign(v), rtol=1e-14)


@pytest.mark.parametrize("name", ["top_k", "top_k_ratio", "block_top_k_1"])
@settings(max_examples=20, deadline=None)
@given(signs=sign_vectors, scale=scales)
def test_top_k_equality_for_constant_magnitude(name, signs, scale):
    # Note, check 5: top-k meets (1 - k/d) with equality when |v| is constant (so does block
    # top-k when d is a multiple of the block size).
    compressor = DETERMINISTIC[name]
    v = scale * signs
    with jax.enable_x64(True):
        c = _compress(compressor, jnp.asarray(v), _key())
    norm2 = float(np.sum(v**2))
    assert _err(c, v) == pytest.approx((1 - compressor.alpha(D)) * norm2, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(v=vectors, epsilon=st.floats(0.0, 0.99), theta=st.floats(-7.0, 7.0))
def test_rotation_equality(v, epsilon, theta):
    # Note, check 5: ||C(v) - v||^2 = epsilon ||v||^2 exactly. Run eagerly (not through the
    # jitted helper): every example has a new (epsilon, theta), i.e. a new static compressor.
    compressor = optim.rotation_compressor(epsilon, theta)
    with jax.enable_x64(True):
        c = compressor.compress(jnp.asarray(v))
    norm2 = float(np.sum(v**2))
    assert _err(c, v) == pytest.approx(epsilon * norm2, rel=1e-9, abs=EXACT_RTOL * norm2)
    assert compressor.alpha(D) == pytest.approx(1 - epsilon)


def _numpy_top_k(v, k):
    keep = np.argsort(-np.abs(v), kind="stable")[:k]  # ties: lower index first
    out = np.zeros_like(v)
    out[keep] = v[keep]
    return out


@settings(max_examples=40, deadline=None)
@given(v=vectors)
def test_top_k_matches_numpy_selection(v):
    with jax.enable_x64(True):
        for compressor, k in ((optim.top_k(5), 5), (optim.top_k(ratio=0.3), 4)):
            np.testing.assert_array_equal(
                np.asarray(_compress(compressor, jnp.asarray(v), _key())), _numpy_top_k(v, k)
            )


@settings(max_examples=40, deadline=None)
@given(v=vectors)
def test_block_top_k_matches_numpy_per_block_selection(v):
    for k, b in ((2, 5), (1, 4), (9, 11)):
        expected = np.concatenate([_numpy_top_k(v[i : i + b], k) for i in range(0, D, b)])
        with jax.enable_x64(True):
            c = _compress(optim.block_top_k(k, b), jnp.asarray(v), _key())
        np.testing.assert_array_equal(np.asarray(c), expected)


def test_block_top_k_ties_go_to_lower_index():
    v = jnp.array([2.0, -2.0, 1.0, 2.0, 0.0, 0.0])
    np.testing.assert_array_equal(
        np.asarray(optim.block_top_k(1, 3).compress(v)), [2.0, 0.0, 0.0, 2.0, 0.0, 0.0]
    )
    np.testing.assert_array_equal(
        np.asarray(optim.block_top_k(2, 3).compress(v)), [2.0, -2.0, 0.0, 2.0, 0.0, 0.0]
    )


# ------------------------------------------------------------------------------------------------
# Random compressors: Monte Carlo (float64). Each sample mean is compared with its closed-form
# expectation within MC_SIGMAS *exact* standard errors (the closed-form variance over
# sqrt(MC_SAMPLES)); a sample standard deviation would be ~0 when a rounding probability is near
# 0 or 1 and make the test fail spuriously.


def _sampling_sum_variance(w, k):
    """Var of the sum of ``w`` over a uniform random ``k``-subset (sampling without replacement)."""
    d = w.shape[0]
    return k * np.var(w) * (d - k) / (d - 1) if d > 1 else 0.0


@pytest.mark.parametrize("name", ["rand_k", "rand_k_unbiased"])
@settings(max_examples=8, deadline=None, derandomize=True)
@given(v=vectors)
def test_rand_k_expected_contraction(name, v):
    compressor = RANDOM[name]
    k = round(compressor.alpha(D) * D)
    with jax.enable_x64(True):
        draws = np.asarray(_samples(compressor, jnp.asarray(v), False))
    errors = np.sum((draws - v) ** 2, axis=1)  # sum of v_j^2 over the d - k dropped coordinates
    norm2 = float(np.sum(v**2))
    expected = (1 - k / D) * norm2  # E ||C(v) - v||^2 = (1 - alpha) ||v||^2 exactly for rand-k
    se = math.sqrt(_sampling_sum_variance(v**2, k) / MC_SAMPLES)
    slack = MC_SIGMAS * se + 1e-9 * norm2
    assert errors.mean() <= (1 - compressor.alpha(D)) * norm2 + slack
    assert abs(errors.mean() - expected) <= slack
    # At most k nonzeros (exactly k, less any zero entries of v), each coordinate kept with
    # probability k/d.
    assert np.all(np.sum(draws != 0, axis=1) <= k)
    freq = np.mean(draws[:, v != 0] != 0, axis=0)
    assert np.all(np.abs(freq - k / D) <= MC_SIGMAS * np.sqrt(k / D * (1 - k / D) / MC_SAMPLES))


@settings(max_examples=8, deadline=None, derandomize=True)
@given(v=vectors)
def test_unbiased_rand_k_is_unbiased_before_rescaling(v):
    compressor = RANDOM["rand_k_unbiased"]
    k = round(compressor.alpha(D) * D)
    with jax.enable_x64(True):
        raw = np.asarray(_samples(compressor, jnp.asarray(v), True))
        scaled = np.asarray(_samples(compressor, jnp.asarray(v), False))
    # Coordinate j is (d/k) v_j with probability k/d, else 0: mean v_j, variance (d/k - 1) v_j^2.
    se = np.sqrt((D / k - 1) * v**2 / MC_SAMPLES)
    assert np.all(np.abs(raw.mean(axis=0) - v) <= MC_SIGMAS * se + 1e-12 * np.abs(v).max())
    # E ||Q(v) - v||^2 = omega ||v||^2 with omega = d/k - 1; ||Q(v) - v||^2 =
    # ||v||^2 + ((d/k - 1)^2 - 1) * (sum of v_j^2 over the kept coordinates).
    omega = compressor.omega(D)
    assert omega == pytest.approx(D / k - 1)
    norm2 = float(np.sum(v**2))
    var = np.sum((raw - v) ** 2, axis=1).mean()
    var_se = abs((D / k - 1) ** 2 - 1) * math.sqrt(_sampling_sum_variance(v**2, k) / MC_SAMPLES)
    assert abs(var - omega * norm2) <= MC_SIGMAS * var_se + 1e-9 * norm2
    # The contractive operator is Q / (1 + omega) (here = rand-k up to rounding).
    np.testing.assert_allclose(scaled, raw / (1 + omega), rtol=1e-14, atol=0)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(v=vectors)
def test_natural_compression_unbiased_and_contractive(v):
    compressor = RANDOM["natural"]
    with jax.enable_x64(True):
        raw = np.asarray(_samples(compressor, jnp.asarray(v), True))
        scaled = np.asarray(_samples(compressor, jnp.asarray(v), False))
    a = np.abs(v)
    low = np.where(a > 0, 2.0 ** np.floor(np.log2(np.where(a > 0, a, 1.0))), 0.0)
    up = np.where(a > 0, a / np.where(a > 0, low, 1.0) - 1, 0.0)  # P(round up to 2 low)
    # Every draw is sign(v) 2^e or sign(v) 2^(e+1) around |v|.
    assert np.all((np.abs(raw) == low) | (np.abs(raw) == 2 * low))
    assert np.all(np.sign(raw) == np.sign(v)[None, :])
    # Unbiased: mean v_j, variance (|v_j| - 2^e)(2^(e+1) - |v_j|) per coordinate.
    coord_var = (a - low) * (2 * low - a)
    se = np.sqrt(coord_var / MC_SAMPLES)
    assert np.all(np.abs(raw.mean(axis=0) - v) <= MC_SIGMAS * se + 1e-12 * a.max())

    def two_point_sum(down_value, up_value):
        """Mean and exact standard error of sum_j Y_j, Y_j = up_value_j w.p. up_j, else down."""
        mean = np.sum(up * up_value + (1 - up) * down_value)
        variance = np.sum(up * (1 - up) * (up_value - down_value) ** 2)
        return mean, math.sqrt(variance / MC_SAMPLES)

    # E ||C_nat(v) - v||^2 = sum (|v| - 2^e)(2^(e+1) - |v|) <= ||v||^2 / 8.
    norm2 = float(np.sum(v**2))
    expected, var_se = two_point_sum((a - low) ** 2, (2 * low - a) ** 2)
    assert expected == pytest.approx(np.sum(coord_var), rel=1e-12, abs=1e-12 * norm2)
    assert expected <= compressor.omega(D) * norm2 * (1 + 1e-12)
    measured = np.sum((raw - v) ** 2, axis=1).mean()
    assert abs(measured - expected) <= MC_SIGMAS * var_se + 1e-9 * norm2
    # The rescaled operator C = C_nat / (1 + 1/8): E ||C(v) - v||^2 <= (1 - 8/9) ||v||^2.
    assert compressor.alpha(D) == pytest.approx(8 / 9)
    shrink = 1 / (1 + 1 / 8)
    err_mean, err_se = two_point_sum((shrink * low - a) ** 2, (shrink * 2 * low - a) ** 2)
    assert err_mean <= (1 - compressor.alpha(D)) * norm2 * (1 + 1e-12)
    measured = np.sum((scaled - v) ** 2, axis=1).mean()
    assert measured <= (1 - compressor.alpha(D)) * norm2 + MC_SIGMAS * err_se + 1e-9 * norm2
    assert abs(measured - err_mean) <= MC_SIGMAS * err_se + 1e-9 * norm2
    np.testing.assert_allclose(scaled, raw * shrink, rtol=1e-15)


# ------------------------------------------------------------------------------------------------
# Oddness, scopes, dtypes, bits.


@pytest.mark.parametrize("name", sorted(ALL))
@settings(max_examples=15, deadline=None)
@given(v=vectors, seed=st.integers(0, 2**31 - 1))
def test_odd_map(name, v, seed):
    compressor = ALL[name]
    key = jax.random.PRNGKey(seed)
    with jax.enable_x64(True):
        plus = np.asarray(_compress(compressor, jnp.asarray(v), key))
        minus = np.asarray(_compress(compressor, jnp.asarray(-v), key))
    np.testing.assert_array_equal(minus, -plus)


def _tree(seed=0, dtype=jnp.float32):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    return {
        "a": jax.random.normal(k1, (6,), dtype),
        "b": jax.random.normal(k2, (2, 5), dtype),
        "c": jax.random.normal(k3, (), dtype),  # a scalar leaf
    }


TREE_CASES = {
    "top_k_ratio": optim.top_k(ratio=0.4),
    "rand_k": optim.rand_k(ratio=0.5),
    "scaled_sign": optim.scaled_sign(),
    "natural": optim.natural_compression(),
    "block_top_k": optim.block_top_k(1, 3),
}


@pytest.mark.parametrize("name", sorted(TREE_CASES))
def test_leaf_scope_compresses_each_leaf_with_its_own_key(name):
    compressor = TREE_CASES[name]
    tree, key = _tree(), jax.random.PRNGKey(5)
    out = _call(compressor, tree, key)
    for i, (leaf_name, leaf) in enumerate(sorted(tree.items())):  # dict leaves: sorted keys
        leaf_key = jax.random.fold_in(key, i)
        expected = _compress(compressor, leaf.reshape(-1), leaf_key).reshape(leaf.shape)
        # Jitted vs eager sums may differ by an ulp; a wrong key would change the selection.
        np.testing.assert_allclose(np.asarray(out[leaf_name]), np.asarray(expected), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(TREE_CASES))
def test_global_scope_compresses_the_concatenation(name):
    compressor = dataclasses.replace(TREE_CASES[name], scope="global")
    assert compressor.scope == "global"
    tree, key = _tree(), jax.random.PRNGKey(5)
    out = _call(compressor, tree, key)
    flat = jnp.concatenate([leaf.reshape(-1) for _, leaf in sorted(tree.items())])
    expected = np.asarray(_compress(compressor, flat, key))
    got = np.concatenate([np.asarray(leaf).reshape(-1) for _, leaf in sorted(out.items())])
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize("scope", ["leaf", "global"])
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_tree_contraction_bound_both_scopes(scope, seed):
    # Whole-tree message: ||C(x) - x||^2 <= (1 - tree_alpha) ||x||^2 for deterministic ones.
    tree = _tree(seed)
    for compressor in (
        optim.top_k(ratio=0.4, scope=scope),
        optim.scaled_sign(scope=scope),
        optim.block_top_k(1, 3, scope=scope),
    ):
        out = _call(compressor, tree, None)
        err = sum(float(jnp.sum((out[k] - tree[k]) ** 2)) for k in tree)
        norm2 = sum(float(jnp.sum(tree[k] ** 2)) for k in tree)
        assert err <= (1 - compressor.tree_alpha(tree)) * norm2 * (1 + 1e-5)


def test_tree_alpha_and_tree_bits_by_scope():
    tree = _tree()  # leaf sizes 6, 10, 1 (17 in all)
    leaf, glob = optim.top_k(ratio=0.4), optim.top_k(ratio=0.4, scope="global")
    # k = ceil(0.4 d): 3 of 6, 4 of 10, 1 of 1; globally 7 of 17.
    assert leaf.tree_alpha(tree) == pytest.approx(min(3 / 6, 4 / 10, 1.0))
    assert glob.tree_alpha(tree) == pytest.approx(7 / 17)
    assert leaf.tree_bits(tree) == 3 * (32 + 3) + 4 * (32 + 4) + 1 * 32
    assert glob.tree_bits(tree) == 7 * (32 + 5)


def test_bits_closed_forms():
    d = 12
    assert optim.identity().bits(d) == 32 * d
    assert optim.top_k(3).bits(d) == 3 * (32 + 4)  # values and ceil(log2 12) = 4-bit indices
    assert optim.rand_k(3).bits(d) == 3 * (32 + 4)
    assert optim.scaled_sign().bits(d) == d + 32
    assert optim.natural_compression().bits(d) == 9 * d
    assert optim.rotation_compressor(0.5, 0.3).bits(d) == 32 * d
    # blocks of 5, 5 and 2: 2 + 2 + 2 kept, indices within a block of 5 (3 bits)
    assert optim.block_top_k(2, 5).bits(d) == 6 * (32 + 3)
    assert optim.block_top_k(3, 5).bits(d) == (3 + 3 + 2) * (32 + 3)


def test_ratio_rounding_and_minimum_of_one():
    assert optim.top_k(ratio=0.07).alpha(100) == pytest.approx(0.07)  # not ceil(7.000...01)
    assert optim.top_k(ratio=0.01).alpha(10) == pytest.approx(0.1)  # max(1, ceil(0.1))
    assert optim.top_k(ratio=1.0).alpha(7) == 1.0


@pytest.mark.parametrize("name", sorted(ALL))
@pytest.mark.parametrize("scope", ["leaf", "global"])
def test_dtype_preserved(name, scope):
    base = ALL[name]
    compressor = dataclasses.replace(base, scope=scope)
    tree = {"a": jnp.ones((6,), jnp.bfloat16) * 1.5, "b": -jnp.arange(6.0, dtype=jnp.float32)}
    key = jax.random.PRNGKey(1)
    with jax.numpy_dtype_promotion("strict"):
        if scope == "leaf":
            out = _call(compressor, tree, key)
        else:  # global joins mixed dtypes explicitly: check one dtype at a time under strict
            out = {k: _call(compressor, {k: tree[k]}, key)[k] for k in ("a", "b")}
    mixed = _call(compressor, tree, key)
    for k in tree:
        assert out[k].dtype == tree[k].dtype
        assert mixed[k].dtype == tree[k].dtype
        assert out[k].shape == tree[k].shape


def test_hashable_and_compared_by_value():
    assert optim.top_k(3) == optim.top_k(3)
    assert hash(optim.top_k(3)) == hash(optim.top_k(3))
    assert optim.top_k(3) != optim.top_k(4)
    assert optim.top_k(3) != optim.rand_k(3)
    assert optim.top_k(3, scope="global") != optim.top_k(3)
    assert repr(optim.top_k(ratio=0.5)) == "top_k(ratio=0.5, scope='leaf')"
    traces = []

    @functools.partial(jax.jit, static_argnums=0)
    def f(compressor, v):
        traces.append(None)
        return compressor.compress(v)

    f(optim.top_k(2), jnp.ones(4))
    f(optim.top_k(2), jnp.ones(4))  # an equal, separately built compressor: no retrace
    assert len(traces) == 1


def test_deterministic_flags():
    assert {n for n, c in ALL.items() if c.deterministic} == set(DETERMINISTIC)


def test_random_compressor_needs_a_key():
    with pytest.raises(ValueError, match="rng_key"):
        optim.rand_k(2).tree_compress({"a": jnp.ones(4)})


# ------------------------------------------------------------------------------------------------
# Bad input.


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: optim.top_k(0), "k"),
        (lambda: optim.top_k(-3), "k"),
        (lambda: optim.rand_k(0), "k"),
        (lambda: optim.top_k(ratio=0.0), "ratio"),
        (lambda: optim.top_k(ratio=1.5), "ratio"),
        (lambda: optim.top_k(ratio=-0.2), "ratio"),
        (lambda: optim.top_k(ratio=float("nan")), "ratio"),
        (lambda: optim.rand_k(ratio=2.0), "ratio"),
        (lambda: optim.top_k(), "k and ratio"),
        (lambda: optim.top_k(2, ratio=0.5), "k and ratio"),
        (lambda: optim.top_k(2, scope="local"), "scope"),
        (lambda: optim.scaled_sign(scope="all"), "scope"),
        (lambda: optim.rotation_compressor(1.0, 0.0), "epsilon"),
        (lambda: optim.rotation_compressor(-0.1, 0.0), "epsilon"),
        (lambda: optim.rotation_compressor(0.5, float("inf")), "theta"),
        (lambda: optim.block_top_k(0, 5), "k_per_block"),
        (lambda: optim.block_top_k(6, 5), "k_per_block"),
        (lambda: optim.block_top_k(1, 0), "block_size"),
    ],
)
def test_bad_construction_raises_value_error(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: optim.top_k(2.5), "k"),
        (lambda: optim.top_k(True), "k"),
        (lambda: optim.top_k(ratio="half"), "ratio"),
        (lambda: optim.rand_k(2, unbiased=1), "unbiased"),
        (lambda: optim.block_top_k(1.0, 5), "k_per_block"),
    ],
)
def test_bad_types_raise_type_error(make, match):
    with pytest.raises(TypeError, match=match):
        make()


def test_k_larger_than_the_vector_raises():
    with pytest.raises(ValueError, match=r"k must lie in \(0, d\] = \(0, 3\]"):
        optim.top_k(5).compress(jnp.ones(3))
    with pytest.raises(ValueError, match="k must"):
        optim.rand_k(4).tree_compress({"a": jnp.ones(3)}, jax.random.PRNGKey(0))


def test_rotation_needs_even_size_and_vectors_must_be_flat():
    with pytest.raises(ValueError, match="even"):
        optim.rotation_compressor(0.5, 0.1).compress(jnp.ones(3))
    with pytest.raises(ValueError, match="1-D"):
        optim.top_k(1).compress(jnp.ones((2, 2)))


# ------------------------------------------------------------------------------------------------
# threshold_top_k: a sampled magnitude threshold, exact fallback. Truths: the top-k bound
# (1 - k/d)||v||^2 computed in numpy, numpy's exact top-k selection (tie-free vectors) and the
# top-set property (every kept magnitude >= every dropped one).

TD = 64  # vector size of the threshold property tests: above the samples below, so they sample
THRESHOLD = {
    # s = 4 samples for 64 entries: the quantile estimate is poor and the fallback frequent.
    "tiny_sample": optim.threshold_top_k(8, sample_size=4, oversample=1.0),
    "ratio": optim.threshold_top_k(ratio=0.1, sample_size=16),
    "k1": optim.threshold_top_k(1, sample_size=8, oversample=2.0),
}
_tie_magnitudes = st.sampled_from([0.0, 1.0, 2.0, 1e3])
_adversarial = st.one_of(
    hnp.arrays(np.float64, (TD,), elements=_entry),  # zeros, wide magnitude range
    hnp.arrays(np.float64, (TD,), elements=_tie_magnitudes),  # many ties
    st.tuples(scales, hnp.arrays(np.bool_, (TD,))).map(  # constant |v|
        lambda s: np.where(s[1], -s[0], s[0])
    ),
    st.tuples(  # a few huge entries among small ones
        hnp.arrays(np.float64, (TD,), elements=st.floats(-1e-2, 1e-2)),
        st.lists(st.integers(0, TD - 1), min_size=1, max_size=3),
    ).map(lambda vi: np.where(np.isin(np.arange(TD), vi[1]), 1e6, vi[0])),
).filter(lambda v: np.any(v != 0))


def _check_top_set(v, out, k):
    kept = out != 0
    np.testing.assert_array_equal(out[kept], v[kept])  # kept entries are unchanged
    if kept.any() and (~kept).any():
        assert np.abs(v[kept]).min() >= np.abs(v[~kept]).max()  # a top-set of |v|
    error = float(np.sum((out - v) ** 2))
    bound = (1.0 - k / v.size) * float(np.sum(v**2))
    assert error <= bound * (1 + EXACT_RTOL) + 1e-300


@pytest.mark.parametrize("name", sorted(THRESHOLD))
@settings(max_examples=30, deadline=None)
@given(v=_adversarial, seed=st.integers(0, 2**31 - 1))
def test_threshold_top_k_deterministic_contraction(name, v, seed):
    compressor = THRESHOLD[name]
    k = compressor.alpha(TD) * TD
    with jax.enable_x64(True):
        out = np.asarray(_compress(compressor, jnp.asarray(v), jax.random.PRNGKey(seed)))
    _check_top_set(v, out, round(k))


@functools.partial(jax.jit, static_argnums=2)
def _keep(v, tau, k):
    from jaxlab.optim._compressors import _keep_top_set

    return _keep_top_set(v, tau, k)


@settings(max_examples=30, deadline=None)
@given(v=nonzero_vectors, k=st.integers(1, D))
def test_threshold_fallback_equals_exact_top_k(v, k):
    # A threshold above every |v_i| keeps nothing, so the fallback must run; on tie-free
    # magnitudes its set {|v| >= k-th largest} is exactly top-k's.
    v = v * (1.0 + np.arange(D) * 1e-9)  # break ties in |v|
    with jax.enable_x64(True):
        out = np.asarray(_keep(jnp.asarray(v), jnp.float64(1e9), k))
        reference = np.asarray(_compress(optim.top_k(k), jnp.asarray(v), None))
    np.testing.assert_array_equal(out, reference)
    assert np.count_nonzero(out) == k


def test_threshold_fallback_with_ties_keeps_a_larger_top_set():
    v = jnp.array([1.0, -2.0, 2.0, 0.5, -2.0, 3.0])
    out = np.asarray(_keep(v, jnp.float32(10.0), 2))  # 2nd largest |v| is 2, tied three times
    np.testing.assert_array_equal(out, [0.0, -2.0, 2.0, 0.0, -2.0, 3.0])


def test_threshold_without_fallback_keeps_exactly_the_threshold_set():
    v = jnp.arange(1.0, 11.0)
    out = np.asarray(_keep(v, jnp.float32(7.0), 3))  # 4 entries >= 7 >= k = 3: no fallback
    np.testing.assert_array_equal(out, np.where(np.arange(1.0, 11.0) >= 7, v, 0))


def test_threshold_top_k_small_vectors_use_the_exact_quantile():
    # d <= sample_size: tau is the exact ceil(oversample k)-th largest magnitude, no key used.
    v = jnp.array([0.1, -5.0, 3.0, -0.2, 4.0, 1.0, -2.0, 0.3])
    c = optim.threshold_top_k(2, oversample=1.5)  # keeps the 3 largest
    out = np.asarray(c.compress(v, jax.random.PRNGKey(0)))
    np.testing.assert_array_equal(out, [0, -5.0, 3.0, 0, 4.0, 0, 0, 0])
    assert c.alpha(8) == 0.25 and c.bits(8) == 3 * (32 + 3)


def test_radix_kth_largest_matches_sort():
    # For d <= sample_size the threshold is the exact ceil(oversample k)-th largest |v_i| (the
    # radix-select kernel); oversample = 1 makes it the k-th.
    def _kth_largest(xs, rank):
        return optim.threshold_top_k(rank, oversample=1.0).threshold(xs, jax.random.key(0))

    rng = np.random.default_rng(0)
    x = np.abs(rng.standard_normal(300)).astype(np.float32)
    x[::7] = x[3]  # ties
    x[::11] = 0.0
    for dtype in (jnp.float32, jnp.bfloat16):
        xs = jnp.asarray(x, dtype)
        ordered = np.sort(np.asarray(xs, np.float32))[::-1]
        for rank in (1, 2, 37, 150, 300):
            got = _kth_largest(xs, rank)
            assert got.dtype == dtype and float(got) == ordered[rank - 1]


def test_threshold_top_k_sampled_count_near_oversample_k():
    # d = 20000 > sample_size: about oversample * k kept (Beta spread), never fewer than k.
    v = jax.random.normal(jax.random.PRNGKey(3), (20_000,))
    c = optim.threshold_top_k(ratio=0.01, sample_size=2048, oversample=1.5)
    counts = [int(np.count_nonzero(_compress(c, v, jax.random.PRNGKey(seed)))) for seed in range(8)]
    assert min(counts) >= 200 and 1.1 * 300 > np.mean(counts) > 0.9 * 300, counts


@settings(max_examples=15, deadline=None)
@given(v=_adversarial, seed=st.integers(0, 2**31 - 1))
def test_threshold_top_k_is_odd(v, seed):
    compressor = THRESHOLD["tiny_sample"]
    key = jax.random.PRNGKey(seed)
    with jax.enable_x64(True):
        plus = np.asarray(_compress(compressor, jnp.asarray(v), key))
        minus = np.asarray(_compress(compressor, jnp.asarray(-v), key))
    np.testing.assert_array_equal(minus, -plus)


@pytest.mark.parametrize("scope", ["leaf", "global"])
def test_threshold_top_k_keeps_dtype_under_strict_promotion(scope):
    compressor = optim.threshold_top_k(ratio=0.25, sample_size=4, scope=scope)
    tree = {"a": jax.random.normal(jax.random.PRNGKey(0), (40,), jnp.bfloat16)}
    with jax.numpy_dtype_promotion("strict"):
        out = _call(compressor, tree, jax.random.PRNGKey(1))
    assert out["a"].dtype == jnp.bfloat16 and out["a"].shape == (40,)
    _check_top_set(
        np.asarray(tree["a"], np.float64), np.asarray(out["a"], np.float64), round(0.25 * 40)
    )


def test_threshold_top_k_flags_repr_and_key():
    c = optim.threshold_top_k(ratio=0.01)
    assert not c.deterministic and c.name == "threshold_top_k"
    assert c == optim.threshold_top_k(ratio=0.01) and hash(c) == hash(
        optim.threshold_top_k(ratio=0.01)
    )
    assert repr(c) == "threshold_top_k(ratio=0.01, sample_size=8192, oversample=1.5, scope='leaf')"
    with pytest.raises(ValueError, match="rng_key"):
        c.tree_compress({"a": jnp.ones(4)})
    assert c.alpha(1000) == 0.01 and c.bits(1000) == 15 * (32 + 10)


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: optim.threshold_top_k(0), ValueError, "k must"),
        (lambda: optim.threshold_top_k(ratio=1.5), ValueError, "ratio"),
        (lambda: optim.threshold_top_k(), ValueError, "k and ratio"),
        (lambda: optim.threshold_top_k(2, sample_size=0), ValueError, "sample_size"),
        (lambda: optim.threshold_top_k(2, sample_size=8.0), TypeError, "sample_size"),
        (lambda: optim.threshold_top_k(2, oversample=0.9), ValueError, "oversample"),
        (lambda: optim.threshold_top_k(2, oversample=float("inf")), ValueError, "oversample"),
        (lambda: optim.threshold_top_k(2, oversample="1.5"), TypeError, "oversample"),
        (lambda: optim.threshold_top_k(2.5), TypeError, "k"),
        (lambda: optim.threshold_top_k(2, scope="all"), ValueError, "scope"),
    ],
)
def test_threshold_top_k_bad_input(make, error, match):
    with pytest.raises(error, match=match):
        make()
    with pytest.raises(ValueError, match=r"k must lie in \(0, d\]"):
        optim.threshold_top_k(5).compress(jnp.ones(3), jax.random.PRNGKey(0))


def test_compressors_are_not_callable_so_inject_hyperparams_passes_them_through():
    # optax.inject_hyperparams takes any callable argument for a schedule; a compressor is
    # applied by tree_compress instead, which equals compress leaf by leaf.
    import optax

    for compressor in ALL.values():
        assert not callable(compressor)
    tree = {"a": jnp.array([3.0, -1.0, -4.0, 0.5]), "b": jnp.array([[2.0, -5.0]])}
    out = optim.top_k(1).tree_compress(tree)
    np.testing.assert_array_equal(out["a"], optim.top_k(1).compress(tree["a"]))
    np.testing.assert_array_equal(out["b"], [[0.0, -5.0]])
    injected = optax.inject_hyperparams(optim.compressed_gradient_descent)(
        learning_rate=0.5, compressor=optim.top_k(1)
    )
    updates, _ = injected.update(tree, injected.init(tree))
    np.testing.assert_array_equal(updates["b"], [[0.0, 2.5]])


def test_tree_compress_checks_leaves_and_keys():
    with pytest.raises(TypeError, match=r"tree\['w'\] must have a floating dtype"):
        optim.top_k(1).tree_compress({"w": jnp.ones(3, jnp.int32)})
    with pytest.raises(TypeError, match="rng_key must be a JAX PRNG key"):
        optim.rand_k(1).tree_compress(jnp.ones(3), 0)
    with pytest.raises(TypeError, match="rng_key must be a JAX PRNG key"):
        optim.natural_compression().compress(jnp.ones(3), "key")


# ------------------------------------------------------------------------------------------------
# The fused path error feedback takes: C(combine(*operands)) without materialising the combination.

FUSED = {
    "top_k": optim.top_k(ratio=0.01),
    "block_top_k": optim.block_top_k(1, 100),
    "scaled_sign": optim.scaled_sign(),
    "threshold": optim.threshold_top_k(ratio=0.01),
    "threshold_global": optim.threshold_top_k(ratio=0.01, scope="global"),
    "rand_k": optim.rand_k(ratio=0.01),
    # The largest of 100 sampled magnitudes as the threshold, k = 50 of the 20,000-entry leaf:
    # with the test's key the sample keeps fewer than k, the exact fallback of the fused path.
    "threshold_fallback": optim.threshold_top_k(ratio=0.0025, sample_size=100, oversample=1.0),
}
# (combine, negated): v and -v from the operands, as EF21 (g - e) and EF (e + u) pass them.
_COMBINES = {
    "difference": (lambda g, e: g - e, lambda g, e: e - g),
    "sum": (lambda e, u: e + u, lambda e, u: -u - e),
}


def _fused_operands(scale=1.0, poison=None):
    """Two trees with a leaf above the sample size (20,000 entries) and a small one."""
    keys = jax.random.split(jax.random.PRNGKey(7), 4)
    a = {"w": jax.random.normal(keys[0], (100, 200)) * scale, "b": jax.random.normal(keys[1], (5,))}
    b = {"w": 0.3 * jax.random.normal(keys[2], (100, 200)) * scale, "b": jnp.ones(5)}
    if poison is not None:
        a["w"] = a["w"].at[3, 4].set(poison)
    return a, b


@functools.partial(jax.jit, static_argnums=(0, 1))
def _fused(compressor, combine_name, a, b, key):
    return compressor._tree_compress_fused(*_COMBINES[combine_name], (a, b), key)[0]


def _assert_trees_equal(got, want):
    for leaf_got, leaf_want in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(leaf_got), np.asarray(leaf_want))


@pytest.mark.parametrize("combine", sorted(_COMBINES))
@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_compress_equals_tree_compress_of_the_combination(name, combine):
    # Key 18: the fallback case's sample keeps 14 of the 50 (checked below).
    compressor, key = FUSED[name], jax.random.PRNGKey(18)
    a, b = _fused_operands()
    combined = jax.tree.map(_COMBINES[combine][0], a, b)
    got = _fused(compressor, combine, a, b, key)
    _assert_trees_equal(got, _call(compressor, combined, key))
    if name == "threshold_fallback" and combine == "difference":  # the sample keeps too few
        v = combined["w"].reshape(-1)
        tau = compressor.threshold(v, jax.random.fold_in(key, 1))
        assert int(jnp.sum(jnp.abs(v) >= tau)) < 50 <= int(jnp.sum(got["w"] != 0))


@pytest.mark.parametrize("poison", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_compress_with_nonfinite_entries_equals_tree_compress(name, poison):
    # A NaN makes the fused count NaN (the exact count decides); an infinity is counted as a
    # large entry. Either way the message is tree_compress's, NaNs in the same places.
    compressor, key = FUSED[name], jax.random.PRNGKey(12)
    a, b = _fused_operands(poison=poison)
    got = _fused(compressor, "difference", a, b, key)
    _assert_trees_equal(got, _call(compressor, jax.tree.map(lambda x, y: x - y, a, b), key))


def test_fused_threshold_on_tiny_magnitudes_takes_the_exact_count():
    # Magnitudes near 1e-36: differences of distinct values could flush to zero, so the fused
    # sign count is not trusted there (tau below the guard) and the exact count decides.
    compressor, key = FUSED["threshold"], jax.random.PRNGKey(13)
    a, b = _fused_operands(scale=1e-36)
    got = _fused(compressor, "difference", a, b, key)
    _assert_trees_equal(got, _call(compressor, jax.tree.map(lambda x, y: x - y, a, b), key))
    assert int(jnp.sum(got["w"] != 0)) >= 200  # k = 1% of 20,000


def test_fused_threshold_with_a_zero_threshold_keeps_everything():
    # g == e on most of the leaf: the sampled threshold is 0 and every entry passes (|v| >= 0).
    compressor, key = FUSED["threshold"], jax.random.PRNGKey(14)
    a, _ = _fused_operands()
    b = {"w": a["w"].at[0, :5].add(1.0), "b": a["b"]}
    got = _fused(compressor, "difference", a, b, key)
    _assert_trees_equal(got, _call(compressor, jax.tree.map(lambda x, y: x - y, a, b), key))
