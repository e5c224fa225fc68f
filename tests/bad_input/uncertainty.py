"""Bad-input probes for jaxlab.uncertainty (CreDRO, ``jaxlab/uncertainty/_credro.py`` and
``_problems.py``). Traced levels are not checked (members are vmapped with different levels);
concrete ones are, eagerly, before any arithmetic."""

import jax
import jax.numpy as jnp

from jaxlab import uncertainty as unc
from tests.bad_input import no_probes, probes, raises, status

_NAN = float("nan")
_LOSSES = jnp.array([1.0, 2.0, 3.0])
_PROBS = jnp.array([[[0.7, 0.3]], [[0.6, 0.4]]])  # (M = 2, n = 1, C = 2)
_KEY = jax.random.key(0)


def _train(**kwargs):
    args = dict(apply_fn=unc.mlp_apply, init_params=unc.ensemble_init(_KEY, 2, (4, 2)),
                inputs=jnp.ones((3, 4)), labels=jnp.zeros(3, jnp.int32), rng_key=_KEY,
                levels=jnp.ones(2), steps=2, batch_size=2)  # fmt: skip
    args.update(kwargs)
    return unc.train_credal_ensemble(**args)


probes(
    "jaxlab.uncertainty.cvar_loss",
    raises("level", lambda: unc.cvar_loss(_LOSSES, level=0.0), ValueError),
    raises("level", lambda: unc.cvar_loss(_LOSSES, level=1.5), ValueError),
    raises("level", lambda: unc.cvar_loss(_LOSSES, level="half"), TypeError),
    raises("losses", lambda: unc.cvar_loss(jnp.ones((2, 2)), level=0.5), ValueError),
    raises("losses", lambda: unc.cvar_loss(jnp.ones(0), level=0.5), ValueError),
    raises("losses", lambda: unc.cvar_loss(jnp.ones(3, jnp.int32), level=0.5), TypeError),
)
probes(
    "jaxlab.uncertainty.tilted_loss",
    raises("temperature", lambda: unc.tilted_loss(_LOSSES, temperature=0.0), ValueError),
    raises("temperature", lambda: unc.tilted_loss(_LOSSES, temperature=_NAN), ValueError),
    raises("temperature", lambda: unc.tilted_loss(_LOSSES, temperature="hot"), TypeError),
    raises("losses", lambda: unc.tilted_loss(None, temperature=1.0), TypeError),
)
probes(
    "jaxlab.uncertainty.chi2_dro_loss",
    raises("radius", lambda: unc.chi2_dro_loss(_LOSSES, radius=-0.1), ValueError),
    raises("radius", lambda: unc.chi2_dro_loss(_LOSSES, radius=None), TypeError),
    raises("losses", lambda: unc.chi2_dro_loss("abc", radius=0.1), TypeError),
)
probes(
    "jaxlab.uncertainty.dro_loss",
    raises("kind", lambda: unc.dro_loss(_LOSSES, kind="wasserstein", level=0.5), ValueError),
    raises("level", lambda: unc.dro_loss(_LOSSES, kind="cvar", level=2.0), ValueError),
)
probes(
    "jaxlab.uncertainty.train_credal_ensemble",
    raises("apply_fn", lambda: _train(apply_fn="mlp"), TypeError),
    raises("rng_key", lambda: _train(rng_key=0), TypeError),
    raises("kind", lambda: _train(kind="tv"), ValueError),
    raises("steps", lambda: _train(steps=0), ValueError),
    raises("batch_size", lambda: _train(batch_size=1.5), TypeError),
    raises("warmup_fraction", lambda: _train(warmup_fraction=2.0), ValueError),
    raises("inputs", lambda: _train(inputs=jnp.ones((4, 4))), ValueError),
    raises("labels", lambda: _train(labels=jnp.zeros(3)), TypeError),
    raises("init_params", lambda: _train(levels=jnp.ones(3)), ValueError),
    raises("optimizer", lambda: _train(optimizer="adam"), TypeError),
)
probes(
    "jaxlab.uncertainty.credal_box",
    raises("member_probs", lambda: unc.credal_box(jnp.ones(3)), ValueError),
    raises("member_probs", lambda: unc.credal_box("p"), TypeError),
)
probes(
    "jaxlab.uncertainty.upper_entropy",
    raises("lower", lambda: unc.upper_entropy(jnp.zeros(3), jnp.ones(2)), ValueError),
    raises("base", lambda: unc.upper_entropy(jnp.zeros(2), jnp.ones(2), base=-2.0), ValueError),
    raises("upper", lambda: unc.upper_entropy(jnp.zeros(2), None), TypeError),
)
probes(
    "jaxlab.uncertainty.lower_entropy",
    raises("number of classes", lambda: unc.lower_entropy(jnp.zeros(13), jnp.ones(13)), ValueError),
    raises("lower", lambda: unc.lower_entropy(jnp.zeros((2, 3)), jnp.ones(3)), ValueError),
    raises("base", lambda: unc.lower_entropy(jnp.zeros(2), jnp.ones(2), base=0.0), ValueError),
)
probes(
    "jaxlab.uncertainty.epistemic_uncertainty",
    raises("member_probs", lambda: unc.epistemic_uncertainty(jnp.ones(2)), ValueError),
    raises("base", lambda: unc.epistemic_uncertainty(_PROBS, base=_NAN), ValueError),
)
probes(
    "jaxlab.uncertainty.mutual_information",
    raises("member_probs", lambda: unc.mutual_information(jnp.ones(2, jnp.int32)), TypeError),
)
probes(
    "jaxlab.uncertainty.entropy_of_mean",
    raises("member_probs", lambda: unc.entropy_of_mean(jnp.ones(2)), ValueError),
)
probes(
    "jaxlab.uncertainty.entropy",
    raises("probs", lambda: unc.entropy("x"), TypeError),
    raises("base", lambda: unc.entropy(jnp.ones(2) / 2, base=-1.0), ValueError),
)
probes(
    "jaxlab.uncertainty.auroc",
    raises("scores_in", lambda: unc.auroc([], [1.0]), ValueError),
    raises("scores_out", lambda: unc.auroc([1.0], [[1.0]]), ValueError),
    raises("scores_in", lambda: unc.auroc([_NAN], [1.0]), ValueError),
)
probes(
    "jaxlab.uncertainty.accuracy_rejection_curve",
    raises("rejection_rates", lambda: unc.accuracy_rejection_curve([1], [0.5], [1.0]), ValueError),
    raises("scores", lambda: unc.accuracy_rejection_curve([1, 0], [0.5], [0.0]), ValueError),
    raises("scores", lambda: unc.accuracy_rejection_curve([1], [_NAN], [0.0]), ValueError),
)
probes(
    "jaxlab.uncertainty.rotate_images",
    raises("images", lambda: unc.rotate_images(jnp.ones((2, 10)), 30.0), ValueError),
    raises("images", lambda: unc.rotate_images(jnp.ones((2, 64), jnp.int32), 30.0), TypeError),
)
probes(
    "jaxlab.uncertainty.add_pixel_noise",
    raises("rng_key", lambda: unc.add_pixel_noise(None, jnp.ones((1, 64)), 0.1), TypeError),
    raises("std", lambda: unc.add_pixel_noise(_KEY, jnp.ones((1, 64)), -0.1), ValueError),
)
probes(
    "jaxlab.uncertainty.digits_shift_splits",
    raises("rng_key", lambda: unc.digits_shift_splits(0), TypeError),
    raises("in_classes", lambda: unc.digits_shift_splits(_KEY, in_classes=(0, 0)), ValueError),
    raises("test_fraction", lambda: unc.digits_shift_splits(_KEY, test_fraction=1.0), ValueError),
    raises(
        "train_class_weights",
        lambda: unc.digits_shift_splits(_KEY, train_class_weights=(1.0, 2.0, 1, 1, 1)),
        ValueError,
    ),  # fmt: skip
    raises("noise_std", lambda: unc.digits_shift_splits(_KEY, noise_std=-1.0), ValueError),
    raises("num_noise_images", lambda: unc.digits_shift_splits(_KEY, num_noise_images=0)),
)
probes(
    "jaxlab.uncertainty.mlp_init",
    raises("rng_key", lambda: unc.mlp_init(None, (4, 2)), TypeError),
    raises("sizes", lambda: unc.mlp_init(_KEY, (4,)), ValueError),
    raises("sizes", lambda: unc.mlp_init(_KEY, (4, 0)), ValueError),
)
probes(
    "jaxlab.uncertainty.mlp_apply",
    raises("x", lambda: unc.mlp_apply(unc.mlp_init(_KEY, (4, 2)), jnp.ones((2, 3))), ValueError),
)
probes(
    "jaxlab.uncertainty.ensemble_init",
    raises("num_members", lambda: unc.ensemble_init(_KEY, 0, (4, 2)), ValueError),
    raises("rng_key", lambda: unc.ensemble_init("k", 2, (4, 2)), TypeError),
)
probes(
    "jaxlab.uncertainty.train_deep_ensemble",
    raises(
        "init_params",
        lambda: unc.train_deep_ensemble(
            unc.mlp_apply,
            {"a": jnp.ones((2, 1)), "b": jnp.ones((3, 1))},
            jnp.ones((3, 4)),
            jnp.zeros(3, jnp.int32),
            _KEY,
        ),
        ValueError,
    ),  # fmt: skip
)
no_probes("jaxlab.uncertainty.DigitsShiftSplits", "a NamedTuple of arrays built by the splits")

# Issue 44, family A: a NaN probability or a box holding no distribution gave a finite entropy.
probes(
    "jaxlab.uncertainty.entropy",
    raises("probs", lambda: unc.entropy(jnp.array([_NAN, 0.5])), ValueError, "nan"),
    raises("probs", lambda: unc.entropy(jnp.array([1.5, -0.5])), ValueError, "negative"),
    raises("probs", lambda: unc.entropy(jnp.array([0.5, 0.7])), ValueError, "sums to 1.2"),
)
for _name in ("upper_entropy", "lower_entropy"):
    _fn = getattr(unc, _name)
    probes(
        "jaxlab.uncertainty." + _name,
        raises("lower", lambda f=_fn: f(jnp.array([0.6, 0.1]), jnp.array([0.4, 0.9])),
               ValueError, "lower above upper"),
        raises("lower", lambda f=_fn: f(jnp.array([0.7, 0.6]), jnp.array([0.8, 0.9])),
               ValueError, "sum(lower) above 1"),
        raises("upper", lambda f=_fn: f(jnp.array([0.1, 0.1]), jnp.array([0.2, 0.3])),
               ValueError, "sum(upper) below 1"),
        raises("lower", lambda f=_fn: f(jnp.array([_NAN, 0.1]), jnp.array([0.9, 0.9])),
               ValueError, "nan"),
        status("lower", lambda f=_fn: jax.jit(f)(jnp.array([0.6, 0.1]), jnp.array([0.4, 0.9])),
               lambda out: bool(jnp.isnan(out)), "traced empty box gives NaN"),
    )  # fmt: skip
probes(
    "jaxlab.uncertainty.entropy",
    status("probs", lambda: jax.jit(unc.entropy)(jnp.array([_NAN, 0.5])),
           lambda out: bool(jnp.isnan(out)), "traced NaN gives NaN"),
)  # fmt: skip
probes(
    "jaxlab.uncertainty.epistemic_uncertainty",
    raises("member_probs", lambda: unc.epistemic_uncertainty(jnp.array([[[0.5, 0.9]],
           [[0.5, 0.5]]])), ValueError, "not a law"),
)  # fmt: skip
probes(
    "jaxlab.uncertainty.mutual_information",
    raises("member_probs", lambda: unc.mutual_information(jnp.array([[[1.5, -0.5]],
           [[0.5, 0.5]]])), ValueError, "negative"),
)  # fmt: skip
probes(
    "jaxlab.uncertainty.mlp_apply",
    raises("params", lambda: unc.mlp_apply({"w": jnp.ones((4, 2))}, jnp.ones((3, 4))), TypeError,
           "a dict"),
)  # fmt: skip


# Issue 44, second independent probe set: the findings it made, fixed at the entry checks.
def _apply(params, x):
    return unc.mlp_apply(params, x)


def _members():
    return unc.ensemble_init(_KEY, 2, (4, 3))


_X6 = jnp.ones((6, 4))
probes(
    "jaxlab.uncertainty.entropy",
    raises("base", lambda: unc.entropy(jnp.array([0.5, 0.5]), base=1.0), ValueError, "base 1"),
    raises("probs", lambda: unc.entropy(jnp.array(1.0)), ValueError, "no class axis"),
)
probes(
    "jaxlab.uncertainty.cvar_loss",
    raises("exact", lambda: unc.cvar_loss(_LOSSES, level=0.5, exact="yes"), TypeError),
)
probes(
    "jaxlab.uncertainty.accuracy_rejection_curve",
    raises(
        "correct",
        lambda: unc.accuracy_rejection_curve(jnp.array([0.3, 0.7]), jnp.array([0.1, 0.2]), [0.5]),
        ValueError,
        "not 0/1",
    ),
)
probes("jaxlab.uncertainty.mlp_init", raises("sizes", lambda: unc.mlp_init(_KEY, 4), TypeError))
probes(
    "jaxlab.uncertainty.ensemble_init",
    raises("sizes", lambda: unc.ensemble_init(_KEY, 2, None), TypeError),
)
probes(
    "jaxlab.uncertainty.train_deep_ensemble",
    raises(
        "labels",
        lambda: unc.train_deep_ensemble(
            _apply, _members(), _X6, jnp.array([0, 1, 2, 5, 0, 1]), _KEY, steps=1, batch_size=2
        ),
        ValueError,
        "class 5 of 3",
    ),
    raises(
        "apply_fn",
        lambda: unc.train_deep_ensemble(
            lambda p, x: jnp.ones(x.shape[0]),
            _members(),
            _X6,
            jnp.zeros(6, int),
            _KEY,
            steps=1,
            batch_size=2,
        ),
        ValueError,
        "1-D logits",
    ),
)
probes(
    "jaxlab.uncertainty.train_credal_ensemble",
    raises(
        "levels",
        lambda: unc.train_credal_ensemble(
            _apply,
            _members(),
            _X6,
            jnp.zeros(6, int),
            _KEY,
            levels=jnp.array([0.5, 1.5]),
            steps=1,
            batch_size=2,
        ),
        ValueError,
        "cvar level 1.5",
    ),
)


probes(
    "jaxlab.uncertainty.flip_labels",
    raises("rate", lambda: unc.flip_labels(_KEY, jnp.arange(4), 1.5, 3), ValueError),
    raises("labels", lambda: unc.flip_labels(_KEY, jnp.ones(4), 0.1, 3), TypeError),
    raises("num_classes", lambda: unc.flip_labels(_KEY, jnp.arange(4), 0.1, 0)),
)
