"""The one Newton–Schulz polar-factor routine of jaxlab (used by DeVA's spectral form).

optax's ``optax.contrib`` orthogonalization starts from a Frobenius (or a Schatten-4) scaling; the
DeVA reference additionally tightens the first step with the Schatten-8 estimate
``(Σσ⁸)^{1/8}`` of the spectral norm, which optax does not offer, so jaxlab keeps this single
implementation and every jaxlab caller uses it.
"""

# No ``from __future__ import annotations``: annotations stay real objects at run time.
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from jaxlab._src.validation import check_bool, check_int, check_real_triple

__all__ = ["newton_schulz_msign"]

# The quintic coefficients of Keller Jordan's Muon, also the DeVA reference's default.
DEFAULT_NS_COEFFS = (3.4445, -4.7750, 2.0315)
# Added under the square root of the Frobenius norm so that a zero matrix maps to zero.
_FROBENIUS_EPS = 1e-20


def newton_schulz_msign(
    x: ArrayLike,
    *,
    steps: int = 5,
    coeffs: Sequence[ArrayLike] = DEFAULT_NS_COEFFS,
    first_step_rescale: bool = True,
) -> jax.Array:
    r"""Approximates the polar factor ``msign(M) = UVᵀ`` of ``M = UΣVᵀ`` by Newton–Schulz.

    With ``X₀ = M/√(‖M‖_F² + 10⁻²⁰)`` (``M`` transposed first when it has more rows than
    columns) each of ``steps`` iterations is ``X ← aX + (bA + cA²)X`` with ``A = XXᵀ``. With
    ``first_step_rescale`` the first iteration divides ``X`` by the Schatten-8 estimate
    ``s = ‖A²‖_F^{1/4} = (Σσᵢ⁸)^{1/8}`` of ``σ_max`` (``σ_max ≤ s ≤ 1``) and rescales ``A`` by
    ``s⁻²`` and ``A²`` by ``s⁻⁴`` consistently. The quintic ``(a, b, c) = (3.4445, −4.7750,
    2.0315)`` maps every singular value ``σ/‖M‖_F ∈ [1.5·10⁻³, 1]`` into about ``[0.68, 1.20]``
    after five steps (it trades exact convergence for speed), and ``msign`` is orthogonally
    equivariant: ``msign(Q₁ᵀMQ₂) = Q₁ᵀ msign(M) Q₂``. The computation runs in the dtype of ``x``
    (the reference runs bfloat16; pass float32 for parity tests).

    Args:
      x: a 2-D array.
      steps: iterations (a static int ``>= 1``).
      coeffs: ``(a, b, c)``.
      first_step_rescale: apply the Schatten-8 rescaling on the first iteration.

    Returns:
      An array of ``x``'s shape and dtype with singular values near 1.

    Raises:
      TypeError: ``x`` is not floating point (integer coefficients would truncate), ``steps`` is
        not a static int, or a coefficient is not a real number.
      ValueError: ``x`` is not 2-D, ``steps < 1``, or ``coeffs`` is not three finite reals.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> m = jax.random.normal(jax.random.key(0), (16, 8))
      >>> sv = jnp.linalg.svd(newton_schulz_msign(m), compute_uv=False)
      >>> bool(jnp.all((sv > 0.6) & (sv < 1.25)))
      True

    References:
      Song, Bai, Zhang, Bullins, Gleich, "Decoupling Variance and Scale-Invariant Updates in
      Adaptive Gradient Descent for Unified Vector and Matrix Optimization", ICML 2026
      (arXiv 2602.06880); Jordan et al., "Muon: an optimizer for hidden layers" (2024).
    """
    if isinstance(x, str | bytes) or x is None:
        raise TypeError(f"x must be a 2-D floating-point array, got {type(x).__name__} {x!r}")
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"x must be a 2-D matrix, got shape {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"x must have a floating dtype, got {x.dtype}")
    steps = check_int(steps, "steps", minimum=1)
    check_bool(first_step_rescale, "first_step_rescale")
    check_real_triple(coeffs, "coeffs")
    dtype = x.dtype
    a, b, c = (jnp.asarray(v).astype(dtype) for v in coeffs)
    transposed = x.shape[0] > x.shape[1]
    if transposed:
        x = x.T
    x = x * jax.lax.rsqrt(jnp.sum(jnp.square(x)) + jnp.asarray(_FROBENIUS_EPS, dtype))
    for step in range(steps):
        gram = x @ x.T
        gram2 = gram @ gram
        if step == 0 and first_step_rescale:
            # s = ||A²||_F^{1/4}; a zero matrix has s = 0 and X = 0, so any positive s keeps it 0.
            s = jnp.sqrt(jnp.sqrt(jnp.sqrt(jnp.sum(jnp.square(gram2)))))
            s = jnp.where(s > 0, s, jnp.ones_like(s))
            x, gram, gram2 = x / s, gram / (s * s), gram2 / (s * s * s * s)
        x = a * x + (b * gram + c * gram2) @ x
    return x.T if transposed else x
