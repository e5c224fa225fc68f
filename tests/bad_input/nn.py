"""Bad-input probes for jaxlab.nn.

Module constructors get sizes that are 0, negative, floats or bools; calls get inputs of the
wrong dtype or shape (integers where floats are meant, a last axis that does not match, strings);
functions get bad numbers (NaN, negative, strings, None) and bad keys. Out-of-vocabulary tokens
are rejected when concrete and, traced under ``jit``, give a NaN loss counted in
``loss_and_aux(...)[1]["out_of_vocabulary"]`` (a status probe). Every fixture is tiny and built
once, and every raising probe fails before anything is compiled.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxlab import nn
from tests.bad_input import no_probes, probes, raises, status

NAN = float("nan")


def _key():
    return jax.random.key(0)


def _rngs():
    return nnx.Rngs(0)


@functools.cache
def _gpt() -> nn.SimpleGPT:
    return nn.SimpleGPT(_config(), rngs=_rngs())


@functools.cache
def _config() -> nn.GPTConfig:
    return nn.GPTConfig(16, 8, 1, 2, max_len=4, multiple_of=8)


@functools.cache
def _moe() -> nn.MixtureOfExperts:
    return nn.MixtureOfExperts(4, 8, num_experts=4, top_k=2, rngs=_rngs())


@functools.cache
def _router() -> nn.TopKRouter:
    return nn.TopKRouter(4, 4, 2, rngs=_rngs())


@functools.cache
def _net() -> nn.InvertibleNet:
    return nn.InvertibleNet(2, num_layers=1, hidden=4, rngs=_rngs())


def _task() -> nn.MoETeacherStudentTask:
    # sample() checks its arguments before it reads a field: no teacher needs to be built.
    return nn.MoETeacherStudentTask(None, None, jnp.zeros((1, 2)), 0.0, None)


@functools.cache
def _made(embed_features: int = 0) -> nn.ConditionalMADE:
    return nn.ConditionalMADE(2, 4, embed_features, rngs=_rngs())


@functools.cache
def _actnorm() -> nn.ActNormLU:
    return nn.ActNormLU(2, rngs=_rngs())


@functools.cache
def _encoder(kind: str):
    if kind == "mlp":
        return nn.MLPEncoder((2,), 4, hidden=4, rngs=_rngs())
    if kind == "deepsets":
        return nn.DeepSetsEncoder(2, 4, hidden=4, rngs=_rngs())
    return nn.QuadMixerEncoder(2, 4, hidden=4, rngs=_rngs())


@functools.cache
def _simplenorm() -> nn.SimpleNorm:
    return nn.SimpleNorm(4, 4, rngs=_rngs())


@functools.cache
def _traced_loss():
    model = _gpt()
    return jax.jit(lambda tokens, targets: model.loss_and_aux(tokens, targets))


def _traced_out_of_vocabulary(tokens, targets):
    loss, aux = _traced_loss()(jnp.asarray(tokens, jnp.int32), jnp.asarray(targets, jnp.int32))
    return bool(jnp.isnan(loss)), int(aux["out_of_vocabulary"])


def _disk(x):
    return jnp.sum(x**2, keepdims=True) - 1.0


def _train_homeomorphism(**overrides):
    kwargs = dict(rng_key=_key(), num_steps=1, batch_size=2, chunk_size=1)
    kwargs.update(overrides)
    latents = kwargs.pop("latents", jnp.zeros((4, 2)))
    return nn.train_homeomorphism(_net(), _disk, latents, **kwargs)


def _train_lm(**overrides):
    kwargs = dict(steps=1, batch_size=1, seq_len=4, rng_key=_key())
    kwargs.update(overrides)
    data = kwargs.pop("train_data", np.arange(16, dtype=np.int32))
    tx = kwargs.pop("tx", optax.sgd(0.1))
    return nn.train_language_model(_gpt(), tx, data, **kwargs)


def _scan_train(**overrides):
    kwargs = dict(num_steps=1)
    kwargs.update(overrides)
    loss_fn = kwargs.pop("loss_fn", lambda w, b: jnp.sum(w**2))
    return nn.scan_train(loss_fn, jnp.zeros(2), optax.sgd(0.1), lambda s: None, **kwargs)


def _quadratic(p):
    return jnp.sum(p**2)


# --- containers --------------------------------------------------------------------------------
for _name, _reason in (
    ("ConvergenceFit", "a result NamedTuple built by fit_convergence_constants"),
    ("HomeomorphismTraining", "a result NamedTuple built by train_homeomorphism"),
    ("MoEStats", "a statistics NamedTuple built by MixtureOfExperts.__call__"),
    ("RouterOutput", "a result NamedTuple built by TopKRouter.__call__"),
    ("ScanTrainResult", "a result NamedTuple built by scan_train"),
):
    no_probes(f"jaxlab.nn.{_name}", _reason)

probes(
    "jaxlab.nn.MoETeacherStudentTask",
    raises("num_samples", lambda: _task().sample(_key(), 0)),
    raises("num_samples", lambda: _task().sample(_key(), 2.5)),
    raises("rng_key", lambda: _task().sample(None, 2)),
)

# --- invertible networks -----------------------------------------------------------------------
probes(
    "jaxlab.nn.ActNormLU",
    raises("num_features", lambda: nn.ActNormLU(0, rngs=_rngs())),
    raises("num_features", lambda: nn.ActNormLU(2.0, rngs=_rngs())),
    raises("v", lambda: _actnorm()(jnp.zeros((3, 3)))),
    raises("v", lambda: _actnorm()(jnp.zeros((3, 2), jnp.int32))),
    raises(
        "v",
        lambda: _actnorm().initialize_from_batch(jnp.full((3, 2), NAN)),
        description="NaN batch",
    ),
)
probes(
    "jaxlab.nn.ConditionalMADE",
    raises("num_features", lambda: nn.ConditionalMADE(-1, 4, rngs=_rngs())),
    raises("hidden", lambda: nn.ConditionalMADE(2, True, rngs=_rngs())),
    raises("embed_features", lambda: nn.ConditionalMADE(2, 4, 1.5, rngs=_rngs())),
    raises("film", lambda: nn.ConditionalMADE(2, 4, 3, film="second", rngs=_rngs())),
    raises("v", lambda: _made()("abc")),
    raises(
        "embedding",
        lambda: _made(3)(jnp.zeros((1, 2)), jnp.zeros((1, 2))),
        description="last axis",
    ),
)
probes(
    "jaxlab.nn.MLPEncoder",
    raises("out_features", lambda: nn.MLPEncoder((2,), 0, rngs=_rngs())),
    raises("condition_shape", lambda: nn.MLPEncoder(("a",), 4, rngs=_rngs())),
    raises("condition", lambda: _encoder("mlp")(jnp.zeros((1, 3)))),
    raises("condition", lambda: _encoder("mlp")(None)),
)
probes(
    "jaxlab.nn.DeepSetsEncoder",
    raises("element_features", lambda: nn.DeepSetsEncoder(0, 4, rngs=_rngs())),
    raises("hidden", lambda: nn.DeepSetsEncoder(2, 4, hidden=-3, rngs=_rngs())),
    raises("condition", lambda: _encoder("deepsets")(jnp.zeros((3, 5)))),
    raises("condition", lambda: _encoder("deepsets")("set")),
)
probes(
    "jaxlab.nn.QuadMixerEncoder",
    raises("num_features", lambda: nn.QuadMixerEncoder(0, 4, rngs=_rngs())),
    raises("out_features", lambda: nn.QuadMixerEncoder(2, 2.5, rngs=_rngs())),
    raises("condition", lambda: _encoder("quad")(jnp.zeros((3, 6)))),
)
probes(
    "jaxlab.nn.InvertibleNet",
    raises("num_features", lambda: nn.InvertibleNet(0, rngs=_rngs())),
    raises("num_layers", lambda: nn.InvertibleNet(2, num_layers=0, rngs=_rngs())),
    raises("film", lambda: nn.InvertibleNet(2, film=None, rngs=_rngs())),
    raises("bounds", lambda: nn.InvertibleNet(2, bounds=(NAN, 1.0), rngs=_rngs())),
    raises("bounds", lambda: nn.InvertibleNet(2, bounds=("a", 1.0), rngs=_rngs())),
    raises("bounds", lambda: nn.InvertibleNet(2, bounds=(0.0, jnp.ones(3)), rngs=_rngs())),
    raises("z", lambda: _net()(jnp.zeros((2, 2), jnp.int32))),
    raises("z", lambda: _net()(jnp.zeros((2, 3)))),
    raises("condition", lambda: _net()(jnp.zeros((2, 2)), jnp.zeros((2, 3)))),
)
probes(
    "jaxlab.nn.sample_latents",
    raises("rng_key", lambda: nn.sample_latents(None, 4, 2)),
    raises("num_samples", lambda: nn.sample_latents(_key(), 0, 2)),
    raises("num_features", lambda: nn.sample_latents(_key(), 4, "2")),
)
probes(
    "jaxlab.nn.invertibility_error",
    raises("model", lambda: nn.invertibility_error(object(), jnp.zeros((2, 2))), TypeError),
    raises("latents", lambda: nn.invertibility_error(_net(), jnp.zeros((2, 3)))),
    raises("latents", lambda: nn.invertibility_error(_net(), jnp.zeros((2, 2), int)), TypeError),
)
probes(
    "jaxlab.nn.homeomorphism_loss",
    raises("latents", lambda: nn.homeomorphism_loss(_net(), jnp.zeros(2), None, _disk)),
    raises("latents", lambda: nn.homeomorphism_loss(_net(), jnp.zeros((2, 2), int), None, _disk)),
    raises(
        "penalty_weight",
        lambda: nn.homeomorphism_loss(_net(), jnp.zeros((2, 2)), None, _disk, penalty_weight=-1),
    ),
    raises(
        "lipschitz_weight",
        lambda: nn.homeomorphism_loss(
            _net(), jnp.zeros((2, 2)), None, _disk, lipschitz_weight="0.1"
        ),
    ),
    raises("constraint_fn", lambda: nn.homeomorphism_loss(_net(), jnp.zeros((2, 2)), None, 1.0)),
    raises("model", lambda: nn.homeomorphism_loss(None, jnp.zeros((2, 2)), None, _disk)),
)
probes(
    "jaxlab.nn.train_homeomorphism",
    raises("num_steps", lambda: _train_homeomorphism(num_steps=0)),
    raises("snapshot_steps", lambda: _train_homeomorphism(snapshot_steps=(0,)), ValueError),
    raises("snapshot_steps", lambda: _train_homeomorphism(snapshot_steps="5"), TypeError),
    raises("rng_key", lambda: _train_homeomorphism(rng_key=None)),
    raises("learning_rate", lambda: _train_homeomorphism(learning_rate="1e-3")),
    raises("learning_rate", lambda: _train_homeomorphism(learning_rate=NAN)),
    raises("ema_decay", lambda: _train_homeomorphism(ema_decay=1.0)),
    raises("decay_rate", lambda: _train_homeomorphism(decay_rate=0.0)),
    raises("latents", lambda: _train_homeomorphism(latents=jnp.full((4, 2), NAN))),
    raises("latents", lambda: _train_homeomorphism(latents=jnp.zeros((4, 3)))),
)

# --- mixture of experts ------------------------------------------------------------------------
probes(
    "jaxlab.nn.MixtureOfExperts",
    raises("in_features", lambda: nn.MixtureOfExperts(0, 8, 4, 2, rngs=_rngs())),
    raises("hidden_features", lambda: nn.MixtureOfExperts(4, 8.0, 4, 2, rngs=_rngs())),
    raises("top_k", lambda: nn.MixtureOfExperts(4, 8, 4, 5, rngs=_rngs())),
    raises(
        "router_init_std",
        lambda: nn.MixtureOfExperts(4, 8, 4, 2, router_init_std=NAN, rngs=_rngs()),
    ),
    raises("x", lambda: _moe()(jnp.ones((3, 4), jnp.int32)), TypeError, "integer input"),
    raises("x", lambda: _moe()(jnp.ones((3, 5))), ValueError, "last axis"),
    raises("x", lambda: _moe()("tokens")),
    raises("rng_key", lambda: _moe()(jnp.ones((3, 4)), rng_key="key")),
    raises("dispatch", lambda: nn.MixtureOfExperts(4, 8, 4, 2, dispatch="ragged", rngs=_rngs())),
    raises(
        "dispatch",
        lambda: nn.MixtureOfExperts(4, 8, 4, 2, dispatch="sparse", rngs=_rngs()),
        ValueError,
        "sparse without capacity_factor",
    ),
    raises("num_tokens", lambda: _moe().dispatch_flops_per_token(0)),
    raises("num_tokens", lambda: _moe().dispatch_flops_per_token(2.5), TypeError),
)
probes(
    "jaxlab.nn.TopKRouter",
    raises("num_experts", lambda: nn.TopKRouter(4, 0, 1, rngs=_rngs())),
    raises("top_k", lambda: nn.TopKRouter(4, 4, 0, rngs=_rngs())),
    raises("gate", lambda: nn.TopKRouter(4, 4, 2, gate=None, rngs=_rngs())),
    raises("init_std", lambda: nn.TopKRouter(4, 4, 2, init_std=float("inf"), rngs=_rngs())),
    raises("tie_break_noise", lambda: nn.TopKRouter(4, 4, 2, tie_break_noise=-1, rngs=_rngs())),
    raises("x", lambda: _router()(jnp.ones((3, 2)))),
    raises("x", lambda: _router()(jnp.ones((3, 4), jnp.complex64))),
    raises("rng_key", lambda: _router()(jnp.ones((3, 4)), rng_key=3)),
)
probes(
    "jaxlab.nn.capacity_keep_mask",
    raises("expert_index", lambda: nn.capacity_keep_mask(jnp.array([[0, 4]]), 4, 1)),
    raises("expert_index", lambda: nn.capacity_keep_mask(jnp.array([0, 1]), 4, 1)),
    raises("expert_index", lambda: nn.capacity_keep_mask(jnp.array([[0.0, 1.0]]), 4, 1)),
    raises("capacity", lambda: nn.capacity_keep_mask(jnp.array([[0, 1]]), 4, -1)),
    raises("num_experts", lambda: nn.capacity_keep_mask(jnp.array([[0, 1]]), 0, 1)),
)
probes(
    "jaxlab.nn.load_balancing_loss",
    raises("top_k", lambda: nn.load_balancing_loss(jnp.ones((2, 2)), jnp.ones((2, 2)), 3)),
    raises("top_k", lambda: nn.load_balancing_loss(jnp.ones((2, 2)), jnp.ones((2, 2)), "1")),
    raises("dispatch_mask", lambda: nn.load_balancing_loss(jnp.ones((2, 2)), jnp.ones((2, 3)), 1)),
    raises("router_probs", lambda: nn.load_balancing_loss("p", jnp.ones((2, 2)), 1)),
)
probes(
    "jaxlab.nn.optimal_top_k",
    raises("a", lambda: nn.optimal_top_k(0.0, 1.0, 16, 0.0, 1.0)),
    raises("b", lambda: nn.optimal_top_k(1.0, NAN, 16, 0.0, 1.0)),
    raises("num_experts", lambda: nn.optimal_top_k(1.0, 1.0, 0, 0.0, 1.0)),
    raises("gamma", lambda: nn.optimal_top_k(1.0, 1.0, 16, 0.0, 1.0, gamma=1.0)),
    raises("overhead_flops", lambda: nn.optimal_top_k(1.0, 1.0, 16, "0", 1.0)),
    raises("clip", lambda: nn.optimal_top_k(1.0, 1.0, 16, 0.0, 1.0, clip=None)),
)
probes(
    "jaxlab.nn.fixed_compute_steps",
    raises("budget", lambda: nn.fixed_compute_steps([1, 2], -1.0, 1.0, 1.0)),
    raises("flops_per_expert", lambda: nn.fixed_compute_steps([1, 2], 10.0, 1.0, 0.0)),
    raises("top_k_grid", lambda: nn.fixed_compute_steps([0, 2], 10.0, 1.0, 1.0)),
    raises("top_k_grid", lambda: nn.fixed_compute_steps(["1"], 10.0, 1.0, 1.0)),
)
_K, _T = np.meshgrid([1.0, 2.0, 4.0], [10.0, 100.0])
_L = 1.0 + 1.0 / np.sqrt(_T)
probes(
    "jaxlab.nn.fit_convergence_constants",
    raises("top_k", lambda: nn.fit_convergence_constants(-_K, _T, _L, num_experts=4, gamma=0.5)),
    raises(
        "steps",
        lambda: nn.fit_convergence_constants(_K, np.full_like(_T, NAN), _L, num_experts=4),
    ),
    raises("loss", lambda: nn.fit_convergence_constants(_K, _T, "loss", num_experts=4)),
    raises("num_experts", lambda: nn.fit_convergence_constants(_K, _T, _L, num_experts=0)),
    raises("gamma", lambda: nn.fit_convergence_constants(_K, _T, _L, num_experts=4, gamma=NAN)),
)
_FIT = nn.ConvergenceFit(0.0, 1.0, 1.0, 0.5, 4, 0.0, 0.0)
probes(
    "jaxlab.nn.predicted_loss",
    raises("top_k", lambda: nn.predicted_loss(_FIT, [0, 1], 4)),
    raises("steps", lambda: nn.predicted_loss(_FIT, [1, 2], "4")),
    raises("fit", lambda: nn.predicted_loss((0.0, 1.0), [1, 2], 4)),
)
probes(
    "jaxlab.nn.moe_transformer_flop_constants",
    raises("config", lambda: nn.moe_transformer_flop_constants({"num_experts": 2})),
    raises("num_experts", lambda: nn.moe_transformer_flop_constants(_config())),
)
probes(
    "jaxlab.nn.moe_teacher_student_task",
    raises("rng_key", lambda: nn.moe_teacher_student_task(None)),
    raises("in_features", lambda: nn.moe_teacher_student_task(_key(), in_features=0)),
    raises("top_k", lambda: nn.moe_teacher_student_task(_key(), num_experts=2, top_k=3)),
    raises("router_std", lambda: nn.moe_teacher_student_task(_key(), router_std=NAN)),
    raises("target_noise_std", lambda: nn.moe_teacher_student_task(_key(), target_noise_std=-1)),
)

# --- SimpleGPT ---------------------------------------------------------------------------------
probes(
    "jaxlab.nn.GPTConfig",
    raises("vocab_size", lambda: nn.GPTConfig(0, 8, 1, 2, max_len=4)),
    raises("d_model", lambda: nn.GPTConfig(16, 8.0, 1, 2, max_len=4)),
    raises("max_len", lambda: nn.GPTConfig(16, 8, 1, 2, max_len=True)),
    raises("num_heads", lambda: nn.GPTConfig(16, 8, 1, 3, max_len=4)),
    raises("ffn_multiplier", lambda: nn.GPTConfig(16, 8, 1, 2, max_len=4, ffn_multiplier=NAN)),
    raises("ffn_multiplier", lambda: nn.GPTConfig(16, 8, 1, 2, max_len=4, ffn_multiplier=1e-6)),
    raises("moe_gate", lambda: nn.GPTConfig(16, 8, 1, 2, max_len=4, moe_gate="top1")),
    raises("depth_init", lambda: nn.GPTConfig(16, 8, 1, 2, max_len=4, depth_init="yes")),
    raises("epsilon", lambda: nn.GPTConfig(16, 8, 1, 2, max_len=4, epsilon="1e-5")),
)
probes(
    "jaxlab.nn.SimpleGPT",
    raises("config", lambda: nn.SimpleGPT({"vocab_size": 16}, rngs=_rngs())),
    raises("tokens", lambda: _gpt()(jnp.array([[0, 16]])), ValueError, "out of vocabulary"),
    raises("tokens", lambda: _gpt()(jnp.array([[-1, 2]])), ValueError, "negative token"),
    raises("tokens", lambda: _gpt()(jnp.zeros((1, 2))), TypeError, "float tokens"),
    raises("tokens", lambda: _gpt()("hello")),
    raises("tokens", lambda: _gpt()(jnp.zeros((1, 5), jnp.int32)), ValueError, "max_len"),
    status(
        "tokens",
        lambda: _traced_out_of_vocabulary([[0, -1, 2, 3]], [[1, 2, 3, 4]]),
        lambda out: out == (True, 1),
        "traced out of vocabulary: NaN loss, counted",
    ),
)
probes(
    "jaxlab.nn.language_model_loss",
    raises(
        "targets",
        lambda: nn.language_model_loss(_gpt(), jnp.zeros((1, 2), int), jnp.array([[0, 99]])),
        ValueError,
        "out of vocabulary",
    ),
    raises(
        "targets",
        lambda: nn.language_model_loss(_gpt(), jnp.zeros((1, 2), int), jnp.zeros((1, 2))),
        TypeError,
        "float targets",
    ),
    raises(
        "tokens",
        lambda: nn.language_model_loss(_gpt(), jnp.full((1, 2), 16), jnp.zeros((1, 2), int)),
    ),
    raises("model", lambda: nn.language_model_loss(None, jnp.zeros((1, 2), int), None)),
    status(
        "targets",
        lambda: _traced_out_of_vocabulary([[0, 1, 2, 3]], [[1, 2, 16, 99]]),
        lambda out: out == (True, 2),
        "traced out of vocabulary: NaN loss, counted",
    ),
)
probes(
    "jaxlab.nn.SimpleNorm",
    raises("in_features", lambda: nn.SimpleNorm(0, 4, rngs=_rngs())),
    raises("epsilon", lambda: nn.SimpleNorm(4, 4, epsilon=NAN, rngs=_rngs())),
    raises("kernel_init", lambda: nn.SimpleNorm(4, 4, kernel_init=0.02, rngs=_rngs())),
    raises("x", lambda: _simplenorm()(jnp.ones((2, 4), jnp.int32))),
    raises("x", lambda: _simplenorm()([[1.0, 2.0]])),
)
probes(
    "jaxlab.nn.depth_init_std",
    raises("layer", lambda: nn.depth_init_std(-1, 4)),
    raises("layer", lambda: nn.depth_init_std(4, 4)),
    raises("num_layers", lambda: nn.depth_init_std(0, 0)),
    raises("depth_init", lambda: nn.depth_init_std(0, 4, depth_init="no")),
)
probes(
    "jaxlab.nn.ffn_hidden_size",
    raises("config", lambda: nn.ffn_hidden_size({"d_model": 8})),
)
probes(
    "jaxlab.nn.rotary_embedding",
    raises("x", lambda: nn.rotary_embedding(jnp.ones((2, 3, 4)), 1e4)),
    raises("x", lambda: nn.rotary_embedding(jnp.ones((1, 2, 1, 3)), 1e4)),
    raises("x", lambda: nn.rotary_embedding(jnp.ones((1, 2, 1, 4), jnp.int32), 1e4)),
    raises("theta", lambda: nn.rotary_embedding(jnp.ones((1, 2, 1, 4)), -1.0)),
    raises("theta", lambda: nn.rotary_embedding(jnp.ones((1, 2, 1, 4)), None)),
)
probes(
    "jaxlab.nn.simplegpt_schedule",
    raises("peak_lr", lambda: nn.simplegpt_schedule(NAN, 1, 10)),
    raises("total_steps", lambda: nn.simplegpt_schedule(1.0, 5, 5)),
    raises("warmup_steps", lambda: nn.simplegpt_schedule(1.0, -1, 5)),
    raises("total_steps", lambda: nn.simplegpt_schedule(1.0, 1, "10")),
)
probes(
    "jaxlab.nn.simplegpt_optimizer",
    raises("learning_rate", lambda: nn.simplegpt_optimizer(-1.0)),
    raises("learning_rate", lambda: nn.simplegpt_optimizer(None)),
    raises("weight_decay", lambda: nn.simplegpt_optimizer(1e-3, weight_decay=float("inf"))),
)

# --- text pipeline, training loop, Hessian -----------------------------------------------------
probes(
    "jaxlab.nn.markov_language",
    raises("vocab_size", lambda: nn.markov_language(1, 1, 10)),
    raises("branching", lambda: nn.markov_language(4, 5, 10)),
    raises("num_tokens", lambda: nn.markov_language(4, 2, 10.0)),
    raises("seed", lambda: nn.markov_language(4, 2, 10, seed=-1)),
    raises("seed", lambda: nn.markov_language(4, 2, 10, seed="0")),
)
probes(
    "jaxlab.nn.latin_markov_language",
    raises("vocab_size", lambda: nn.latin_markov_language(1, [1.0], 10)),
    raises("next_token_probs", lambda: nn.latin_markov_language(4, [0.5, 0.4], 10)),
    raises("next_token_probs", lambda: nn.latin_markov_language(4, [1.5, -0.5], 10)),
    raises("next_token_probs", lambda: nn.latin_markov_language(2, [0.2, 0.3, 0.5], 10)),
    raises("next_token_probs", lambda: nn.latin_markov_language(4, [[0.5, 0.5]], 10)),
    raises("next_token_probs", lambda: nn.latin_markov_language(4, [NAN, 1.0], 10)),
    raises("next_token_probs", lambda: nn.latin_markov_language(4, "0.5", 10)),
    raises("num_tokens", lambda: nn.latin_markov_language(4, [1.0], 2)),
    raises("num_tokens", lambda: nn.latin_markov_language(4, [1.0], 10.0)),
    raises("order", lambda: nn.latin_markov_language(4, [1.0], 10, order=0)),
    raises("order", lambda: nn.latin_markov_language(64, [1.0], 10, order=5)),
    raises("seed", lambda: nn.latin_markov_language(4, [1.0], 10, seed=-1)),
)
probes(
    "jaxlab.nn.LatinMarkovLanguage",
    raises("seq_len", lambda: nn.latin_markov_language(4, [1.0], 10).window_loss_floor(0)),
    raises("seq_len", lambda: nn.latin_markov_language(4, [1.0], 10).window_loss_floor(2.0)),
)
probes(
    "jaxlab.nn.stdlib_byte_corpus",
    raises("max_bytes", lambda: nn.stdlib_byte_corpus(0)),
    raises("max_bytes", lambda: nn.stdlib_byte_corpus(1e3)),
)
probes(
    "jaxlab.nn.split_corpus",
    raises("val_fraction", lambda: nn.split_corpus(np.arange(10), NAN)),
    raises("val_fraction", lambda: nn.split_corpus(np.arange(10), 1.0)),
    raises("data", lambda: nn.split_corpus(np.zeros((2, 5)))),
    raises("data", lambda: nn.split_corpus(None)),
)
probes(
    "jaxlab.nn.sample_batch",
    raises("rng_key", lambda: nn.sample_batch(None, jnp.arange(10), 2, 4)),
    raises("data", lambda: nn.sample_batch(_key(), jnp.arange(10.0), 2, 4)),
    raises("data", lambda: nn.sample_batch(_key(), jnp.arange(4), 2, 4)),
    raises("batch_size", lambda: nn.sample_batch(_key(), jnp.arange(10), 0, 4)),
    raises("seq_len", lambda: nn.sample_batch(_key(), jnp.arange(10), 2, None)),
)
probes(
    "jaxlab.nn.scan_train",
    raises("num_steps", lambda: _scan_train(num_steps=0)),
    raises("loss_fn", lambda: _scan_train(loss_fn="loss")),
    raises("has_aux", lambda: _scan_train(has_aux="no")),
    raises("start_step", lambda: _scan_train(start_step=-1)),
    raises("checkpoint_every", lambda: _scan_train(num_steps=3, checkpoint_every=2)),
)
probes(
    "jaxlab.nn.train_language_model",
    raises("train_data", lambda: _train_lm(train_data=np.arange(16) + 8), ValueError, "vocab"),
    raises(
        "eval_data", lambda: _train_lm(eval_data=np.full(16, -1, np.int32)), ValueError, "vocab"
    ),
    raises("train_data", lambda: _train_lm(train_data=np.zeros(16)), TypeError, "float data"),
    raises("rng_key", lambda: _train_lm(rng_key=None)),
    raises("steps", lambda: _train_lm(steps=0)),
    raises("tx", lambda: _train_lm(tx=optax.sgd)),
)
probes(
    "jaxlab.nn.loss_curve_stability",
    raises("losses", lambda: nn.loss_curve_stability("curve", warmup_steps=0)),
    raises("losses", lambda: nn.loss_curve_stability(np.zeros((2, 3)), warmup_steps=0)),
    raises("warmup_steps", lambda: nn.loss_curve_stability(np.ones(5), warmup_steps=-1)),
    raises("tail_steps", lambda: nn.loss_curve_stability(np.ones(5), warmup_steps=0, tail_steps=0)),
    raises("min_drop", lambda: nn.loss_curve_stability(np.ones(5), warmup_steps=0, min_drop=NAN)),
)
probes(
    "jaxlab.nn.hvp",
    raises("v", lambda: nn.hvp(_quadratic, jnp.ones(2), jnp.ones(3)), ValueError, "shape"),
    raises("v", lambda: nn.hvp(_quadratic, {"a": jnp.ones(2)}, {"b": jnp.ones(2)})),
    raises("v", lambda: nn.hvp(_quadratic, jnp.ones(2), jnp.ones(2, jnp.int32)), TypeError),
    raises("loss_fn", lambda: nn.hvp(lambda p: p**2, jnp.ones(2), jnp.ones(2)), ValueError),
    raises("loss_fn", lambda: nn.hvp(None, jnp.ones(2), jnp.ones(2))),
    raises("params", lambda: nn.hvp(_quadratic, jnp.ones(2, int), jnp.ones(2, int))),
)
probes(
    "jaxlab.nn.top_eigenvalue",
    raises("rng_key", lambda: nn.top_eigenvalue(_quadratic, jnp.ones(3), rng_key=None)),
    raises(
        "num_iters", lambda: nn.top_eigenvalue(_quadratic, jnp.ones(3), rng_key=_key(), num_iters=0)
    ),
    raises("method", lambda: nn.top_eigenvalue(_quadratic, jnp.ones(3), rng_key=_key(), method=1)),
    raises("shift", lambda: nn.top_eigenvalue(_quadratic, jnp.ones(3), rng_key=_key(), shift=NAN)),
    raises("shift", lambda: nn.top_eigenvalue(_quadratic, jnp.ones(3), rng_key=_key(), shift="0")),
    raises("loss_fn", lambda: nn.top_eigenvalue(lambda p: p, jnp.ones(3), rng_key=_key())),
)
probes(
    "jaxlab.nn.activation_hessian_top_eigenvalue",
    raises(
        "activation",
        lambda: nn.activation_hessian_top_eigenvalue(_quadratic, jnp.ones(3, int), rng_key=_key()),
        TypeError,
    ),
    raises(
        "activation", lambda: nn.activation_hessian_top_eigenvalue(_quadratic, "x", rng_key=_key())
    ),
    raises(
        "per_token",
        lambda: nn.activation_hessian_top_eigenvalue(
            _quadratic, jnp.ones(3), rng_key=_key(), per_token="yes"
        ),
    ),
    raises(
        "num_iters",
        lambda: nn.activation_hessian_top_eigenvalue(
            _quadratic, jnp.ones(3), rng_key=_key(), num_iters=0
        ),
    ),
    raises(
        "rng_key", lambda: nn.activation_hessian_top_eigenvalue(_quadratic, jnp.ones(3), rng_key=1)
    ),
    raises(
        "loss_fn", lambda: nn.activation_hessian_top_eigenvalue(None, jnp.ones(3), rng_key=_key())
    ),
    raises(
        "loss_fn",
        lambda: nn.activation_hessian_top_eigenvalue(lambda a: a, jnp.ones(3), rng_key=_key()),
        ValueError,
    ),
)
probes(
    "jaxlab.nn.preconditioned_top_eigenvalue",
    raises(
        "preconditioner",
        lambda: nn.preconditioned_top_eigenvalue(
            _quadratic, jnp.ones(3), jnp.zeros(3), rng_key=_key()
        ),
        ValueError,
    ),
    raises(
        "preconditioner",
        lambda: nn.preconditioned_top_eigenvalue(
            _quadratic, jnp.ones(3), jnp.ones(2), rng_key=_key()
        ),
        ValueError,
    ),
    raises(
        "preconditioner",
        lambda: nn.preconditioned_top_eigenvalue(
            _quadratic, jnp.ones(3), jnp.full(3, NAN), rng_key=_key()
        ),
        ValueError,
    ),
    raises(
        "method",
        lambda: nn.preconditioned_top_eigenvalue(
            _quadratic, jnp.ones(3), jnp.ones(3), rng_key=_key(), method="qr"
        ),
    ),
    raises(
        "loss_fn",
        lambda: nn.preconditioned_top_eigenvalue(None, jnp.ones(3), jnp.ones(3), rng_key=_key()),
    ),
)
probes(
    "jaxlab.nn.adam_preconditioner",
    raises(
        "opt_state", lambda: nn.adam_preconditioner(optax.sgd(0.1).init(jnp.ones(2))), TypeError
    ),
    raises(
        "opt_state", lambda: nn.adam_preconditioner(optax.adam(0.1).init(jnp.ones(2))), ValueError
    ),
    raises("b1", lambda: nn.adam_preconditioner(optax.adam(0.1).init(jnp.ones(2)), b1=1.0)),
    raises("b2", lambda: nn.adam_preconditioner(optax.adam(0.1).init(jnp.ones(2)), b2=NAN)),
    raises("eps", lambda: nn.adam_preconditioner(optax.adam(0.1).init(jnp.ones(2)), eps=-1.0)),
)
probes(
    "jaxlab.nn.adam_sharpness_limit",
    raises("learning_rate", lambda: nn.adam_sharpness_limit(0.0)),
    raises("learning_rate", lambda: nn.adam_sharpness_limit("0.1")),
    raises("b1", lambda: nn.adam_sharpness_limit(0.1, b1=1.0)),
)
probes(
    "jaxlab.nn.residual_stream_loss",
    raises("model", lambda: nn.residual_stream_loss(_moe(), jnp.zeros((1, 4), int), None)),
    raises(
        "tokens",
        lambda: nn.residual_stream_loss(_gpt(), jnp.full((1, 4), 99), jnp.zeros((1, 4), int)),
        ValueError,
    ),
    raises(
        "targets",
        lambda: nn.residual_stream_loss(_gpt(), jnp.zeros((1, 4), int), jnp.zeros((1, 3), int)),
        ValueError,
    ),
    raises(
        "targets",
        lambda: nn.residual_stream_loss(_gpt(), jnp.zeros((1, 4), int), jnp.ones((1, 4))),
        TypeError,
    ),
    raises(
        "layer",
        lambda: nn.residual_stream_loss(_gpt(), jnp.zeros((1, 4), int), jnp.zeros((1, 4), int))[1](
            1, jnp.zeros((1, 4, 8))
        ),
    ),
    raises(
        "x",
        lambda: nn.residual_stream_loss(_gpt(), jnp.zeros((1, 4), int), jnp.zeros((1, 4), int))[1](
            0, jnp.zeros((1, 4, 7))
        ),
        ValueError,
    ),
)

# --- disjunctive rule layers (issue 16) --------------------------------------------------------
_GAP = nn.Disjunction([nn.Disjunct([[1.0]], [0.25]), nn.Disjunct([[-1.0]], [-0.75])], "gap")
_GAP_SET = nn.RuleSet([0.0], [1.0], [_GAP])
# One rule, "x >= 0 -> y <= 0.5": an input x < 0 leaves no applicable disjunct.
_IF_X_NONNEGATIVE = nn.RuleSet(
    [0.0],
    [1.0],
    [nn.Disjunction([nn.Disjunct([[1.0]], [0.5], condition=([[-1.0]], [0.0]))], "x>=0: y<=.5")],
    input_size=1,
)
no_probes("jaxlab.nn.DisjunctiveInfo", "a NamedTuple of diagnostics returned by the layer")
no_probes("jaxlab.nn.DisjunctiveTask", "a NamedTuple of arrays returned by the task builders")
no_probes("jaxlab.nn.LiftedHull", "built by lifted_hull, whose arguments are probed")
for _name in ("gap_rules", "tightness_rules", "input_decided_toy_rules"):
    no_probes(f"jaxlab.nn.{_name}", "takes no arguments: a fixed rule set of the note")
probes(
    "jaxlab.nn.Disjunct",
    raises("lhs", lambda: nn.Disjunct("E", [0.0])),
    raises("rhs", lambda: nn.Disjunct([[1.0]], [0.0, 1.0]), ValueError),
    raises("condition", lambda: nn.Disjunct([[1.0]], [0.0], condition=[[1.0]])),
    raises("lhs", lambda: nn.Disjunct([[NAN]], [0.0]), ValueError),
)
probes(
    "jaxlab.nn.Disjunction",
    raises("disjuncts", lambda: nn.Disjunction([], "r"), ValueError),
    raises("name", lambda: nn.Disjunction([nn.Disjunct([[1.0]], [0.0])], "")),
    raises("disjuncts[0]", lambda: nn.Disjunction(["d"], "r"), TypeError),
)
probes(
    "jaxlab.nn.RuleSet",
    raises("lower", lambda: nn.RuleSet([-float("inf")], [1.0]), ValueError),
    raises("lower", lambda: nn.RuleSet([2.0], [1.0]), ValueError),
    raises("rules", lambda: nn.RuleSet([0.0], [1.0], _GAP), TypeError),
    raises(
        "negative",
        lambda: nn.RuleSet(
            [0.0], [1.0], [nn.Disjunction([nn.Disjunct([[1.0]], [-1.0])], "negative")]
        ),
        ValueError,
        "infeasible rule named",
    ),
    raises(
        "input_size",
        lambda: nn.RuleSet(
            [0.0],
            [1.0],
            [nn.Disjunction([nn.Disjunct([[1.0]], [1.0], condition=([[1.0]], [0.0]))], "c")],
        ),
        ValueError,
    ),
    raises("global_lhs", lambda: nn.RuleSet([0.0], [1.0], global_lhs=[[1.0]])),
)
probes(
    "jaxlab.nn.lifted_hull",
    raises("rule_set", lambda: nn.lifted_hull("rules")),
    raises("formulation", lambda: nn.lifted_hull(_GAP_SET, formulation="full")),
    raises("lift_regularization", lambda: nn.lifted_hull(_GAP_SET, lift_regularization=0.0)),
    raises("num_dnf_rules", lambda: nn.lifted_hull(_GAP_SET, num_dnf_rules=1)),
)
probes(
    "jaxlab.nn.hull_size",
    raises("formulation", lambda: nn.hull_size(_GAP_SET, formulation=3)),
    raises("rule_set", lambda: nn.hull_size(None)),
)
probes(
    "jaxlab.nn.DisjunctiveLayer",
    raises("mode", lambda: nn.DisjunctiveLayer(_GAP_SET, mode="milp"), ValueError),
    raises("tol", lambda: nn.DisjunctiveLayer(_GAP_SET, tol=-1.0), ValueError),
    raises("maxiter", lambda: nn.DisjunctiveLayer(_GAP_SET, maxiter=0), ValueError),
    raises("y_hat", lambda: nn.DisjunctiveLayer(_GAP_SET)(jnp.zeros((2, 3))), ValueError),
    raises("y", lambda: nn.DisjunctiveLayer(_GAP_SET)(jnp.zeros((2, 1), jnp.int32)), TypeError),
    raises(
        "x",
        lambda: nn.DisjunctiveLayer(nn.input_decided_toy_rules())(jnp.zeros((2, 2))),
        TypeError,
    ),
    status(
        "non-finite raw output reported",
        lambda: nn.DisjunctiveLayer(_GAP_SET)(jnp.array([[jnp.nan], [0.1]])),
        lambda out: out[1].status.tolist()[0] == 3 and bool(out[1].projected[1]),
    ),
    status(
        "no applicable disjunct: raw output, infeasible status (traced)",
        lambda: jax.jit(lambda y, x: nn.DisjunctiveLayer(_IF_X_NONNEGATIVE)(y, x))(
            jnp.array([[0.9], [0.9]]), jnp.array([[-1.0], [1.0]])
        ),
        lambda out: out[1].status.tolist() == [5, 1] and abs(float(out[0][0, 0]) - 0.9) < 1e-6,
    ),
)
for _fn in ("rule_satisfaction", "rule_violation", "rule_penalty"):
    probes(
        f"jaxlab.nn.{_fn}",
        raises(
            "y", lambda _fn=_fn: getattr(nn, _fn)(_GAP_SET, None, jnp.zeros((2, 2))), ValueError
        ),
        raises("rule_set", lambda _fn=_fn: getattr(nn, _fn)("r", None, jnp.zeros((2, 1)))),
    )
probes(
    "jaxlab.nn.rule_satisfaction",
    raises("tol", lambda: nn.rule_satisfaction(_GAP_SET, None, jnp.zeros((2, 1)), tol=-1.0)),
)
probes(
    "jaxlab.nn.pinned_fractions",
    raises("y", lambda: nn.pinned_fractions(_GAP_SET, None, jnp.zeros((2, 2))), ValueError),
    raises("y", lambda: nn.pinned_fractions(_GAP_SET, None, jnp.zeros((2, 2, 1))), ValueError),
    raises("rule_set", lambda: nn.pinned_fractions("r", None, jnp.zeros((2, 1)))),
    raises("tol", lambda: nn.pinned_fractions(_GAP_SET, None, jnp.zeros((2, 1)), tol=-1.0)),
)
for _fn in ("input_decided_regression_task", "output_only_regression_task"):
    probes(
        f"jaxlab.nn.{_fn}",
        raises("rng_key", lambda _fn=_fn: getattr(nn, _fn)(None)),
        raises("num_train", lambda _fn=_fn: getattr(nn, _fn)(_key(), num_train=0)),
        raises("noise_std", lambda _fn=_fn: getattr(nn, _fn)(_key(), noise_std=-1.0)),
    )
for _fn in ("input_decided_target", "output_only_target"):
    probes(
        f"jaxlab.nn.{_fn}",
        raises("x", lambda _fn=_fn: getattr(nn, _fn)(jnp.zeros((2, 2)))),
    )

# Issue 44: reversed input bounds were reported as an infeasible rule (family G); the loss's own
# KeyError escaped for params it cannot read (E).
probes(
    "jaxlab.nn.top_eigenvalue",
    raises("params", lambda: nn.top_eigenvalue(lambda p: p["w"] @ p["w"], {}, rng_key=_key()),
           ValueError, "empty"),
    raises("params", lambda: nn.top_eigenvalue(lambda p: p["w"] @ p["w"], {"v": jnp.ones(2)},
           rng_key=_key()), ValueError, "missing key"),
)  # fmt: skip
probes(
    "jaxlab.nn.RuleSet",
    raises("input_lower", lambda: nn.RuleSet([0.0], [1.0], [nn.Disjunction([nn.Disjunct(
           [[1.0]], [0.5], condition=([[-1.0]], [0.0]))], "R1")], input_size=1,
           input_lower=[1.0], input_upper=[-1.0]), ValueError, "reversed input bounds"),
)  # fmt: skip
probes(
    "jaxlab.nn.pinned_fractions",
    raises("y", lambda: nn.pinned_fractions(_GAP_SET, None, jnp.full((2, 1), NAN)), ValueError,
           "nan counted as pinned"),
)  # fmt: skip


# --- issue 43: the experiments' programs and problems moved into the library --------------------
no_probes("jaxlab.nn.LanguageModelRun", "a result NamedTuple built by language_model_program")
no_probes("jaxlab.nn.MoETopKProblem", "a problem NamedTuple built by the moe_*_problem factories")
_TOKENS = jnp.arange(40) % 16
_EVALS = (jnp.zeros((1, 2, 4), jnp.int32), jnp.zeros((1, 2, 4), jnp.int32))
probes(
    "jaxlab.nn.sample_eval_batches",
    raises("num_batches", lambda: nn.sample_eval_batches(_key(), _TOKENS, 0, 2, 4)),
    raises("rng_key", lambda: nn.sample_eval_batches(None, _TOKENS, 1, 2, 4)),
)
probes(
    "jaxlab.nn.language_model_program",
    raises(
        "config",
        lambda: nn.language_model_program(
            None, nn.simplegpt_optimizer, _TOKENS, _EVALS, steps=2, batch_size=2, seq_len=4
        ),
        TypeError,
    ),
    raises(
        "optimizer",
        lambda: nn.language_model_program(
            _config(), 0.1, _TOKENS, _EVALS, steps=2, batch_size=2, seq_len=4
        ),
    ),
    raises(
        "steps",
        lambda: nn.language_model_program(
            _config(),
            nn.simplegpt_optimizer,
            _TOKENS,
            _EVALS,
            steps=3,
            batch_size=2,
            seq_len=4,
            num_checkpoints=2,
        ),
        ValueError,
    ),
)
probes(
    "jaxlab.nn.learning_rate_limits",
    raises(
        "learning rate",
        lambda: nn.learning_rate_limits([[np.ones(5)]], [[1.0]], (0.1, 0.2), warmup_steps=0),
        ValueError,
    ),
    raises(
        "warmup_steps",
        lambda: nn.learning_rate_limits([[np.ones(5)]], [[1.0]], (0.1,), warmup_steps=-1),
        ValueError,
    ),
)
probes(
    "jaxlab.nn.simplegpt_hessian_probe",
    raises("num_iters", lambda: nn.simplegpt_hessian_probe(None, _EVALS, num_iters=0)),
)
probes(
    "jaxlab.nn.moe_teacher_student_problem",
    raises(
        "task",
        lambda: nn.moe_teacher_student_problem(
            None, in_features=2, hidden_features=2, num_experts=2
        ),
        TypeError,
    ),
)
probes(
    "jaxlab.nn.moe_language_model_problem",
    raises("config", lambda: nn.moe_language_model_problem(None, _TOKENS, None, batch_size=2)),
    raises(
        "num_experts",
        lambda: nn.moe_language_model_problem(_config(), _TOKENS, None, batch_size=2),
        ValueError,
    ),
)
probes(
    "jaxlab.nn.moe_top_k_trainer",
    raises(
        "problem",
        lambda: nn.moe_top_k_trainer(None, 1, learning_rate=0.1, aux_weight=0.0),
        TypeError,
    ),
)
probes(
    "jaxlab.nn.moe_compute_axis",
    raises("problem", lambda: nn.moe_compute_axis(None, (1,), 1.0, num_experts=2), TypeError),
)
probes(
    "jaxlab.nn.rule_network_init",
    raises("hidden", lambda: nn.rule_network_init(_key(), 0)),
    raises("rng_key", lambda: nn.rule_network_init(None, 4)),
)
probes(
    "jaxlab.nn.rule_network_apply",
    raises("params", lambda: nn.rule_network_apply({"w": 1}, jnp.ones((1, 3))), TypeError),
)
probes(
    "jaxlab.nn.rule_network_trainer",
    raises("steps", lambda: nn.rule_network_trainer(None, None, 0, uses_input=False)),
    raises("uses_input", lambda: nn.rule_network_trainer(None, None, 1, uses_input="yes")),
)
