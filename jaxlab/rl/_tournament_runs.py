"""GRPO training programs for TSRL's studies (Juneja et al., ICML 2026), each one compiled program.

:func:`judged_group_reward` is a grouped reward of any of the four kinds (pointwise rubric,
single comparison, round robin, TSRL's win rate against anchors) chosen by a traced index;
:func:`tournament_bandit_program` trains a tabular policy on :func:`tournament_bandit` for every
(arm, seed) at once; :func:`hidden_quality_sequence_program` trains an
:class:`AutoregressivePolicy` on :func:`hidden_quality_sequences` with the reward kind, learning
rate and step count as traced arguments, so a learning-rate grid and its extensions reuse one
compile. :func:`tsrl_reference_errors` holds the note's closed-form checks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxlab._src.validation import (
    check_callable,
    check_int,
    check_int_sequence,
    check_key,
    check_positive_int,
    check_probability,
)
from jaxlab.rl._grpo import group_advantages, grpo
from jaxlab.rl._policy import AutoregressivePolicy, split_policy
from jaxlab.rl._problems import (
    TabularPolicy,
    hidden_quality_sequences,
    hidden_quality_win_rate,
    normalized_quality,
    tournament_bandit,
)
from jaxlab.rl._tsrl import (
    pointwise_reward,
    round_robin_reward,
    select_anchors,
    single_pairwise_reward,
    synthetic_pairwise_judge,
    synthetic_rubric_judge,
    win_rate_reward,
)

__all__ = [
    "JUDGED_REWARD_KINDS",
    "JUDGED_REWARD_RANGE",
    "TSRL_REFERENCE",
    "autoregressive_policy_batch",
    "bracket_learning_rate",
    "hidden_quality_sequence_program",
    "hidden_quality_sequence_study",
    "judge_calls_per_step",
    "judged_group_reward",
    "tournament_bandit_arms",
    "tournament_toy_arms",
    "tournament_bandit_program",
    "tsrl_reference_checks",
    "tsrl_reference_errors",
]

# The reward kinds of :func:`judged_group_reward` (its ``kind`` indexes ``kinds``).
JUDGED_REWARD_KINDS = ("pointwise", "single", "round_robin", "tsrl")


def judged_group_reward(
    kind: jax.typing.ArrayLike,
    quality_fn: Callable,
    offset_fn: Callable,
    anchors: jax.Array,
    *,
    temperature: float,
    position_bias: float,
    flip_prob: jax.typing.ArrayLike = 0.0,
    anchor_mask: jax.typing.ArrayLike | None = None,
    kinds: Sequence[str] = JUDGED_REWARD_KINDS,
) -> Callable:
    """A grouped reward ``reward_fn(key, tokens, prompts)`` of kind ``kinds[kind]`` (for GRPO).

    The kinds: ``"pointwise"`` (:func:`pointwise_reward` under :func:`synthetic_rubric_judge` of
    ``quality_fn`` with the prompt's ``offset_fn``), ``"single"`` (:func:`single_pairwise_reward`),
    ``"round_robin"`` (:func:`round_robin_reward`) and ``"tsrl"`` (:func:`win_rate_reward`
    against ``anchors[prompt]``, masked by ``anchor_mask``), the pairwise ones under a
    :func:`synthetic_pairwise_judge` (``temperature``, ``position_bias``, verdicts flipped with
    ``flip_prob``). A traced ``kind`` runs one branch; vmapped over kinds, every branch runs.

    Args:
      kind: index into ``kinds`` (a traced int32 scalar is fine).
      quality_fn: ``quality_fn(prompt, response) -> scalar``, the hidden quality.
      offset_fn: ``offset_fn(prompt) -> scalar``, the rubric's bias per prompt.
      anchors: ``[P, K, ...]`` anchor responses per prompt.
      temperature, position_bias, flip_prob: the pairwise judge's.
      anchor_mask: ``[K]`` 0/1 weights of the anchors (None: all).
      kinds: the kinds compiled into the reward, in the order ``kind`` indexes.

    Returns:
      ``reward_fn(key, tokens [B, G, L], prompts [B]) -> [B, G]``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> quality = lambda q, x: jnp.sum(x).astype(jnp.float32)
      >>> reward_fn = judged_group_reward(3, quality, lambda q: 0.0, jnp.zeros((2, 4, 1), int),
      ...                                 temperature=0.5, position_bias=0.0)
      >>> reward_fn(jax.random.key(0), jnp.ones((2, 3, 1), int), jnp.arange(2)).shape
      (2, 3)
    """
    judge = synthetic_pairwise_judge(
        quality_fn, temperature=temperature, position_bias=position_bias, flip_prob=flip_prob
    )
    rubric = synthetic_rubric_judge(quality_fn, offset_fn)

    def one(key, responses, prompt):
        k1, k2, k3, k4 = jax.random.split(key, 4)
        options = {
            "pointwise": lambda: pointwise_reward(k1, rubric, responses, prompt)[0],
            "single": lambda: single_pairwise_reward(k2, judge, responses, prompt)[0],
            "round_robin": lambda: round_robin_reward(k3, judge, responses, prompt)[0],
            "tsrl": lambda: win_rate_reward(
                k4, judge, responses, anchors[prompt], prompt, anchor_mask=anchor_mask
            )[0],
        }
        return jax.lax.switch(kind, [options[name] for name in kinds])

    def reward_fn(key, tokens, prompts):
        return jax.vmap(one)(jax.random.split(key, prompts.shape[0]), tokens, prompts)

    return reward_fn


def tournament_bandit_program(
    num_prompts: int,
    num_candidates: int,
    *,
    batch_prompts: int,
    group_size: int,
    steps: int,
    max_anchors: int,
    variance_redraws: int,
):
    """GRPO (SGD) on a :func:`tournament_bandit` with a uniform-start :class:`TabularPolicy`.

    One compiled program over arms x seeds. A seed draws the bandit, ``max_anchors`` anchors
    per prompt from the initial (uniform) policy (nested in K: an arm uses the first K through
    its mask) and the run's keys; an arm is a reward kind (:data:`JUDGED_REWARD_KINDS`), an
    anchor mask and a flip probability. The loss is the mean over ``B G`` tokens, so
    ``sgd(lr B)`` is the per-prompt step ``lr (1/G) Σ Â ∇log π``. The reward's noise variance is
    measured at the base policy: fixed groups, ``variance_redraws`` fresh judge draws.

    Returns:
      A jitted ``run(keys [S], kinds [A], masks [A, K], flips [A], lr, temperature,
      position_bias, variance_keys [S])`` returning per (arm, seed) ``{"curve", "quality",
      "win_rate", "noise_variance", "skipped_steps"}`` (normalised hidden quality per step, its
      last value, the exact win rate over the uniform policy, the reward's variance, skipped
      updates).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> run = tournament_bandit_program(4, 3, batch_prompts=2, group_size=2, steps=2,
      ...                                 max_anchors=2, variance_redraws=2)
      >>> keys = jax.random.split(jax.random.key(0), 2)
      >>> out = run(keys, jnp.array([1, 3]), jnp.ones((2, 2)), jnp.zeros(2), 0.5, 0.5, 0.5, keys)
      >>> out["quality"].shape, out["curve"].shape
      ((2, 2), (2, 2, 2))
    """
    p = check_positive_int(num_prompts, "num_prompts")
    m = check_int(num_candidates, "num_candidates", minimum=2)
    b = check_positive_int(batch_prompts, "batch_prompts")
    g = check_positive_int(group_size, "group_size")
    steps = check_positive_int(steps, "steps")
    k_max = check_positive_int(max_anchors, "max_anchors")
    redraws = check_positive_int(variance_redraws, "variance_redraws")
    policy = TabularPolicy(p, m)

    def one(key, kind, mask, flip, lr, tau, beta, redraws_key):
        task_key, anchor_key, run_key = jax.random.split(key, 3)
        bandit = tournament_bandit(task_key, p, m)
        # Anchors: K_max draws of the initial (uniform) policy per prompt, nested in K.
        anchors = select_anchors(
            anchor_key, lambda k, q: jax.random.randint(k, (1,), 0, m), jnp.arange(p), k_max
        )
        reward_fn = judged_group_reward(
            kind,
            bandit.quality_fn,
            lambda q: bandit.rubric_bias[q],
            anchors,
            temperature=tau,
            position_bias=beta,
            flip_prob=flip,
            anchor_mask=mask,
        )
        init, step = grpo(
            policy.sample, policy.log_prob, reward_fn, optax.sgd(lr * b), group_size=g
        )

        def body(state, k):
            pk, sk = jax.random.split(k)
            prompts = jax.random.permutation(pk, p)[:b]
            state, info = step(sk, state, prompts)
            probs = policy.probabilities(state.params)
            return state, normalized_quality(probs, bandit.quality)

        state, curve = jax.lax.scan(body, init(policy.init()), jax.random.split(run_key, steps))
        probs = policy.probabilities(state.params)
        uniform = jnp.full((p, m), 1.0 / m)
        # Reward noise at the base policy: fixed groups, fresh judge noise per redraw.
        gk, rk = jax.random.split(redraws_key)
        groups = jax.random.randint(gk, (p, g, 1), 0, m)
        draws = jax.vmap(lambda k: reward_fn(k, groups, jnp.arange(p)))(
            jax.random.split(rk, redraws)
        )
        return {
            "curve": curve,
            "quality": curve[-1],
            "win_rate": hidden_quality_win_rate(probs, uniform, bandit.quality),
            "noise_variance": jnp.mean(jnp.var(draws, axis=0)),
            "skipped_steps": state.skipped_count,
        }

    over_seeds = jax.vmap(one, in_axes=(0, None, None, None, None, None, None, 0))
    over_arms = jax.vmap(over_seeds, in_axes=(None, 0, 0, 0, None, None, None, None))
    return jax.jit(over_arms)


def hidden_quality_sequence_program(
    sample_fn: Callable,
    log_prob_fn: Callable,
    *,
    num_prompts: int,
    length: int,
    vocab: int,
    batch_prompts: int,
    group_size: int,
    num_anchors: int,
    temperature: float,
    position_bias: float,
    eval_samples: int,
    kinds: Sequence[str] = ("pointwise", "single", "tsrl"),
):
    """GRPO (Adam) on :func:`hidden_quality_sequences`, one compiled program for every run.

    Vmapped over seeds; the reward kind (an index into ``kinds``), the learning rate and the
    number of steps are traced scalars, so a learning-rate grid, its extensions, held-out seeds
    and a longer arm all reuse one compile. A seed draws the task, ``num_anchors`` anchors per
    prompt from its own initial policy (the same for every arm) and the run's keys. After
    training, ``eval_samples`` samples per prompt give the normalised quality (exact over every
    sequence) and the win rate (:meth:`SequenceQualityTask.evaluate`).

    Args:
      sample_fn, log_prob_fn: the policy's functions (:func:`split_policy`).
      num_prompts, length, vocab: the task's sizes.
      batch_prompts, group_size: GRPO's ``B`` and ``G``.
      num_anchors: TSRL's ``K``.
      temperature, position_bias: the pairwise judge's (no flips).
      eval_samples: samples per prompt for the final quality.
      kinds: the reward kinds compiled in (:func:`judged_group_reward`).

    Returns:
      A jitted ``run(keys [S], params [S, ...], kind, lr, steps)`` returning per seed the
      quality, the win rate, the skipped updates and the fraction of groups whose rewards were
      all equal (no gradient).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> params, sample_fn, log_prob_fn = autoregressive_policy_batch(
      ...     range(2), vocab=3, length=2, num_prompts=2, hidden=(4,))
      >>> run = hidden_quality_sequence_program(
      ...     sample_fn, log_prob_fn, num_prompts=2, length=2, vocab=3, batch_prompts=2,
      ...     group_size=2, num_anchors=2, temperature=0.5, position_bias=0.5, eval_samples=4)
      >>> keys = jax.random.split(jax.random.key(0), 2)
      >>> quality, win, skipped, flat = run(keys, params, 2, 0.01, 2)
      >>> quality.shape, skipped.tolist()
      ((2,), [0, 0])
    """
    p, length, v = num_prompts, length, vocab
    b, g, k = batch_prompts, group_size, num_anchors
    for value, name in ((p, "num_prompts"), (length, "length"), (b, "batch_prompts")):
        check_positive_int(value, name)
    for value, name in ((g, "group_size"), (k, "num_anchors"), (eval_samples, "eval_samples")):
        check_positive_int(value, name)
    check_int(v, "vocab", minimum=2)

    def one(key, params, kind, lr, steps):
        task_key, anchor_key, run_key, eval_key = jax.random.split(key, 4)
        task = hidden_quality_sequences(task_key, p, length, v)
        # Anchors: K draws of this seed's initial policy per prompt (the same for every arm).
        draw = lambda kk, q: sample_fn(params, kk, q[None], None)[0]  # noqa: E731
        anchors = select_anchors(anchor_key, draw, jnp.arange(p), k)
        reward_fn = judged_group_reward(
            kind,
            task.quality_fn,
            lambda q: task.rubric_bias[q],
            anchors,
            temperature=temperature,
            position_bias=position_bias,
            kinds=kinds,
        )
        init, step = grpo(sample_fn, log_prob_fn, reward_fn, optax.adam(lr), group_size=g)

        def body(i, carry):
            state, flat = carry
            pk, sk = jax.random.split(jax.random.fold_in(run_key, i))
            state, info = step(sk, state, jax.random.permutation(pk, p)[:b])
            # Groups whose rewards are all equal carry no gradient (the note's saturation).
            spread = jnp.max(info.rewards, -1) - jnp.min(info.rewards, -1)
            return state, flat + jnp.mean(spread == 0)

        state, flat = jax.lax.fori_loop(0, steps, body, (init(params), jnp.zeros([])))
        # Exact normalisation over all V^L sequences; E_π Q by sampling (same key for every arm).
        prompts = jnp.repeat(jnp.arange(p), eval_samples)
        samples = sample_fn(state.params, eval_key, prompts, None)
        quality, win = task.evaluate(samples.reshape(p, eval_samples, length))
        return quality, win, state.skipped_count, flat / jnp.maximum(steps, 1)

    return jax.jit(jax.vmap(one, in_axes=(0, 0, None, None, None)))


def autoregressive_policy_batch(
    seeds: Sequence[int], *, vocab: int, length: int, num_prompts: int, hidden: Sequence[int]
):
    """Initial :class:`AutoregressivePolicy` parameters, one per seed (stacked), and its functions.

    Returns:
      ``(params stacked over seeds, sample_fn, log_prob_fn)`` (:func:`split_policy`).

    Examples:
      >>> params, sample_fn, log_prob_fn = autoregressive_policy_batch(
      ...     range(3), vocab=3, length=2, num_prompts=2, hidden=(4,))
      >>> {x.shape[0] for x in jax.tree.leaves(params)}
      {3}
    """
    params = []
    for seed in seeds:
        policy = AutoregressivePolicy(
            vocab, length, num_prompts=num_prompts, hidden=tuple(hidden), rngs=nnx.Rngs(seed)
        )
        params_i, sample_fn, log_prob_fn = split_policy(policy)
        params.append(params_i)
    if not params:
        raise ValueError("seeds must hold at least one seed, got none")
    return jax.tree.map(lambda *xs: jnp.stack(xs), *params), sample_fn, log_prob_fn


def judge_calls_per_step(
    *, group_size: int, num_anchors: int, length: int, batch_prompts: int
) -> dict[str, int]:
    """Judge calls of one GRPO step per reward kind, as the library's rewards count them.

    Examples:
      >>> judge_calls_per_step(group_size=8, num_anchors=8, length=5, batch_prompts=4)
      {'pointwise': 32, 'single': 64, 'tsrl': 512}
    """
    g, k = (
        check_positive_int(group_size, "group_size"),
        check_positive_int(num_anchors, "num_anchors"),
    )
    length = check_positive_int(length, "length")
    b = check_positive_int(batch_prompts, "batch_prompts")
    quality = lambda q, x: jnp.sum(x, -1).astype(jnp.float32)  # noqa: E731  (any judge will do)
    judge, rubric = synthetic_pairwise_judge(quality), synthetic_rubric_judge(quality)

    @jax.jit  # one small program instead of many eager ops
    def per_prompt(key, responses, anchors):
        return {
            "pointwise": pointwise_reward(key, rubric, responses)[1].num_calls,
            "single": single_pairwise_reward(key, judge, responses)[1].num_calls,
            "tsrl": win_rate_reward(key, judge, responses, anchors)[1].num_calls,
        }

    responses, anchors = jnp.zeros((g, length), jnp.int32), jnp.zeros((k, length), jnp.int32)
    counts = per_prompt(jax.random.key(0), responses, anchors)
    return {kind: int(n) * b for kind, n in counts.items()}


# The TSRL note's closed-form values: the expected win rate of quality 0.5 over one anchor of
# quality 0 at τ = 0.5, β = 0.5 (½[σ(1.5) + σ(0.5)]); the same with verdicts flipped at ε = 0.2
# (0.2 + 0.6 x 0.720017); the variance 1/(8K) of the win rate at p = ½ over K anchors.
TSRL_REFERENCE = {
    "reward": 0.720017,
    "flipped": 0.632010,
    "variance": {1: 0.125, 4: 0.03125, 16: 0.0078125},
}


@jax.jit
def _reference_errors(keys):
    ident = lambda q, x: x  # noqa: E731
    judge = lambda eps, beta=0.5, tau=0.5: synthetic_pairwise_judge(  # noqa: E731
        ident, temperature=tau, position_bias=beta, flip_prob=eps
    )
    o, a, key = jnp.array([0.5]), jnp.array([0.0]), keys[0]
    expect = lambda j, x, y: win_rate_reward(key, j, x, y, sample=False)[0][0]  # noqa: E731
    # 2. Var[r | o] = 1/(8K) at p = ½ (equal qualities, no position bias); K as an anchor mask.
    counts = TSRL_REFERENCE["variance"]
    k_max = max(counts)
    masks = jnp.array([[float(i < k) for i in range(k_max)] for k in counts])
    draw = lambda kk, m: win_rate_reward(  # noqa: E731
        kk, judge(0.0, 0.0), o, jnp.full(k_max, 0.5), anchor_mask=m
    )[0][0]
    variance = jax.vmap(lambda m: jnp.var(jax.vmap(lambda kk: draw(kk, m))(keys)))(masks)
    # 3. GRPO advantages are invariant to the flip's affine map ε + (1 - 2ε) r.
    r = jax.random.uniform(keys[1], (4, 8))
    # 4. A deterministic judge: the fraction of anchors of lower quality + ½ ties.
    det = win_rate_reward(
        key,
        judge(0.0, 0.0, 1e-3),
        jnp.array([1.0, 3.0, -1.0]),
        jnp.array([0.0, 1.0, 2.0, 1.0]),
        sample=False,
    )[0]
    errors = {
        "reward": jnp.abs(expect(judge(0.0), o, a) - TSRL_REFERENCE["reward"]),
        "flipped": jnp.abs(expect(judge(0.2), o, a) - TSRL_REFERENCE["flipped"]),
        "tie_half": jnp.abs(expect(judge(0.2), a, a) - 0.5),
        "affine": jnp.max(jnp.abs(group_advantages(r) - group_advantages(0.2 + 0.6 * r))),
        "deterministic": jnp.max(jnp.abs(det - jnp.array([0.5, 1.0, 0.0]))),
    }
    return errors, variance


def tsrl_reference_errors(keys: jax.Array) -> tuple[dict[str, jax.Array], jax.Array]:
    """The TSRL note's checks 1-4 against :data:`TSRL_REFERENCE`, in one program.

    1. the expected win rate, clean and flipped at ε = 0.2, and ½ on a tie; 2. the win rate's
    variance over ``keys`` (one draw each) at p = ½ for each K of ``TSRL_REFERENCE["variance"]``
    (returned, compared by the caller); 3. GRPO advantages invariant to the flip's affine map
    ``ε + (1 - 2ε) r``; 4. a deterministic judge gives the fraction of anchors of lower quality
    plus ½ per tie.

    Returns:
      ``(absolute errors by check, the variances in the order of TSRL_REFERENCE["variance"])``.

    Examples:
      >>> import jax
      >>> errors, variance = tsrl_reference_errors(jax.random.split(jax.random.key(1), 2000))
      >>> max(float(e) for e in errors.values()) < 1e-5, variance.shape
      (True, (3,))
    """
    check_key(keys, "keys")
    if jnp.ndim(keys) != 1:
        raise ValueError(
            f"keys must be a 1-D batch of keys (jax.random.split), got shape {jnp.shape(keys)}"
        )
    return _reference_errors(keys)


# Each reward kind's range (the standardised variance divides by its square): rubric scores live
# in 1..10, win rates in [0, 1].
JUDGED_REWARD_RANGE = {"pointwise": 9.0, "single": 1.0, "round_robin": 1.0, "tsrl": 1.0}


def tournament_toy_arms(
    anchors: Sequence[int], flips: Sequence[float]
) -> list[tuple[str, str, int, float]]:
    """The TSRL note's arms ``(name, kind, K, ε)``: the baselines, TSRL at each K, and at the
    largest K with each flip probability ε beside single comparison at that ε.

    Examples:
      >>> [name for name, *_ in tournament_toy_arms((1, 4), (0.2,))][3:]
      ['tsrl_k1', 'tsrl_k4', 'tsrl_k4_eps0.2', 'single_eps0.2']
    """
    anchors = check_int_sequence(anchors, "anchors")
    for eps in flips:
        check_probability(eps, "flips")
    k_max = max(anchors)
    arms = [("pointwise", "pointwise", 0, 0.0), ("single", "single", 0, 0.0)]
    arms += [("round_robin", "round_robin", 0, 0.0)]
    arms += [(f"tsrl_k{k}", "tsrl", k, 0.0) for k in anchors]
    for eps in flips:
        arms += [(f"tsrl_k{k_max}_eps{eps:g}", "tsrl", k_max, eps)]
        arms += [(f"single_eps{eps:g}", "single", 0, eps)]
    return arms


def tournament_bandit_arms(
    rng_key: jax.Array,
    arms: Sequence[tuple[str, str, int, float]],
    *,
    num_prompts: int,
    num_candidates: int,
    batch_prompts: int,
    group_size: int,
    steps: int,
    learning_rate: float,
    seeds: int,
    temperature: float,
    position_bias: float,
    variance_redraws: int,
) -> dict[str, dict]:
    """Every arm of TSRL's toy over ``seeds`` paired seeds (:func:`tournament_bandit_program`).

    An arm is ``(name, kind, K, ε)``: a reward kind of :data:`JUDGED_REWARD_KINDS`, TSRL's
    anchor count ``K`` (the first ``max(K, 1)`` of the largest K's anchors) and the judge's flip
    probability. A seed gives every arm the same bandit, anchors and keys.

    Returns:
      ``name -> {kind, num_anchors, flip_prob, quality (per seed), quality_mean, quality_sd,
      win_rate, win_rate_mean, noise_variance, standardized_variance (the seed mean over the
      reward's squared range: 9 for rubric scores, 1 for win rates), curve_mean,
      skipped_steps}``.

    Examples:
      >>> import jax
      >>> arms = [("single", "single", 0, 0.0), ("tsrl_k2", "tsrl", 2, 0.0)]
      >>> out = tournament_bandit_arms(
      ...     jax.random.key(0), arms, num_prompts=4, num_candidates=3, batch_prompts=2,
      ...     group_size=2, steps=2, learning_rate=0.5, seeds=2, temperature=0.5,
      ...     position_bias=0.5, variance_redraws=2)
      >>> sorted(out), len(out["tsrl_k2"]["quality"])
      (['single', 'tsrl_k2'], 2)
    """
    check_positive_int(seeds, "seeds")
    if not arms:
        raise ValueError("arms must hold at least one (name, kind, K, eps) arm, got none")
    k_max = max(max(k, 1) for _, _, k, _ in arms)
    kinds = jnp.array([JUDGED_REWARD_KINDS.index(kind) for _, kind, _, _ in arms])
    masks = jnp.array([[float(i < max(k, 1)) for i in range(k_max)] for _, _, k, _ in arms])
    flips = jnp.array([eps for *_, eps in arms], jnp.float32)
    seed_key, var_key = jax.random.split(rng_key)
    keys = jax.random.split(seed_key, seeds)
    var_keys = jax.random.split(var_key, seeds)
    program = tournament_bandit_program(
        num_prompts,
        num_candidates,
        batch_prompts=batch_prompts,
        group_size=group_size,
        steps=steps,
        max_anchors=k_max,
        variance_redraws=variance_redraws,
    )
    out = program(keys, kinds, masks, flips, learning_rate, temperature, position_bias, var_keys)
    out = jax.tree.map(np.asarray, jax.block_until_ready(out))
    results = {}
    for i, (name, kind, k, eps) in enumerate(arms):
        scale = JUDGED_REWARD_RANGE[kind]
        results[name] = {
            "kind": kind,
            "num_anchors": k,
            "flip_prob": eps,
            "quality": out["quality"][i].tolist(),
            "quality_mean": float(out["quality"][i].mean()),
            "quality_sd": float(out["quality"][i].std()),
            "win_rate": out["win_rate"][i].tolist(),
            "win_rate_mean": float(out["win_rate"][i].mean()),
            "noise_variance": out["noise_variance"][i].tolist(),
            "standardized_variance": float(out["noise_variance"][i].mean() / scale**2),
            "curve_mean": out["curve"][i].mean(0).tolist(),
            "skipped_steps": out["skipped_steps"][i].tolist(),
        }
    return results


def bracket_learning_rate(
    run_lr: Callable[[float], dict],
    grid: Sequence[float],
    *,
    factor: float,
    max_extensions: int,
    score: str = "quality",
) -> dict:
    """Runs a learning-rate grid, widening it while the best lr sits on its edge.

    The best lr has the highest mean ``run_lr(lr)[score]``; while it is the grid's smallest
    (largest) and fewer than ``max_extensions`` rates were added, the next rate is the smallest
    divided (the largest multiplied) by ``factor``.

    Returns:
      ``{"grid": [{"lr", **run} sorted by lr], "best_lr", "bracketed" (best strictly inside),
      "extensions"}``.

    Examples:
      >>> out = bracket_learning_rate(lambda lr: {"quality": [-(lr - 0.3) ** 2]}, [0.01, 0.02],
      ...                             factor=4.0, max_extensions=3)
      >>> out["best_lr"], out["bracketed"], out["extensions"]
      (0.32, True, 3)
    """
    check_callable(run_lr, "run_lr")
    if len(grid) < 1:
        raise ValueError(f"grid must hold at least one learning rate, got {grid!r}")
    runs = {lr: run_lr(lr) for lr in grid}
    extensions = 0

    def best():
        lrs = sorted(runs)
        return lrs, int(np.argmax([np.mean(runs[lr][score]) for lr in lrs]))

    lrs, i = best()
    while extensions < max_extensions and i in (0, len(lrs) - 1):
        lr = lrs[0] / factor if i == 0 else lrs[-1] * factor
        runs[lr] = run_lr(lr)
        extensions += 1
        lrs, i = best()
    return {
        "grid": [{"lr": lr, **runs[lr]} for lr in lrs],
        "best_lr": lrs[i],
        "bracketed": 0 < i < len(lrs) - 1,
        "extensions": extensions,
    }


def hidden_quality_sequence_study(
    rng_key: jax.Array,
    *,
    seeds: int,
    lr_grid: Sequence[float],
    lr_factor: float,
    max_extensions: int,
    hidden: Sequence[int],
    judge_calls: dict[str, int] | None = None,
    **sizes,
) -> Callable[[str, int], dict]:
    """TSRL's sequence study: ``run_arm(kind, steps)`` trains one arm at its own best Adam lr.

    An arm's lr is bracketed (:func:`bracket_learning_rate`, by mean quality) on ``seeds``
    tuning seeds, then the arm runs at that lr on ``seeds`` held-out seeds (new tasks, anchors
    and initial policies, never seen by the lr choice). A seed gives every arm the same task,
    anchors and initial policy, so the arms' held-out results are paired. Every arm's runs share
    one :func:`hidden_quality_sequence_program` (one compilation).

    Args:
      rng_key: split into the tuning and the held-out seeds' keys.
      seeds: tuning seeds, and as many held-out seeds (policies seeded ``0..S-1``, ``S..2S-1``).
      lr_grid, lr_factor, max_extensions: the bracket's.
      hidden: the policy's hidden widths.
      judge_calls: kind -> judge calls per step (:func:`judge_calls_per_step`), recorded per
        arm with the run's total.
      **sizes: :func:`hidden_quality_sequence_program`'s keyword arguments.

    Returns:
      ``run_arm(kind, steps) -> {kind, steps, grid, best_lr, bracketed, extensions, held_out,
      seconds}`` (and ``judge_calls_per_step``, ``judge_calls`` with ``judge_calls``), each run
      ``{quality, win_rate, skipped, flat_groups}`` per seed; ``seconds`` is the arm's wall
      time.

    Examples:
      >>> import jax
      >>> run_arm = hidden_quality_sequence_study(
      ...     jax.random.key(0), seeds=2, lr_grid=(0.01, 0.03, 0.1), lr_factor=2.0,
      ...     max_extensions=0, hidden=(4,), num_prompts=2, length=2, vocab=3, batch_prompts=2,
      ...     group_size=2, num_anchors=2, temperature=0.5, position_bias=0.5, eval_samples=4)
      >>> out = run_arm("tsrl", 2)
      >>> len(out["grid"]), len(out["held_out"]["quality"])
      (3, 2)
    """
    check_key(rng_key, "rng_key")
    check_positive_int(seeds, "seeds")
    missing = [k for k in ("vocab", "length", "num_prompts") if k not in sizes]
    if missing:
        raise TypeError(f"sizes must give {missing} (hidden_quality_sequence_program's sizes)")
    kinds = tuple(sizes.get("kinds", ("pointwise", "single", "tsrl")))
    policy_sizes = dict(
        vocab=sizes["vocab"], length=sizes["length"], num_prompts=sizes["num_prompts"]
    )
    tune_params, sample_fn, log_prob_fn = autoregressive_policy_batch(
        range(seeds), hidden=hidden, **policy_sizes
    )
    # Held-out seeds: new tasks, anchors and initial policies, never seen by the lr choice.
    eval_params, *_ = autoregressive_policy_batch(
        range(seeds, 2 * seeds), hidden=hidden, **policy_sizes
    )
    tune_key, eval_key = jax.random.split(rng_key)
    by_split = {
        "tune": (jax.random.split(tune_key, seeds), tune_params),
        "eval": (jax.random.split(eval_key, seeds), eval_params),
    }
    program = hidden_quality_sequence_program(sample_fn, log_prob_fn, **sizes)

    def run(kind, steps, lr, which):
        keys, params = by_split[which]
        index = jnp.int32(kinds.index(kind))
        out = program(keys, params, index, jnp.float32(lr), jnp.int32(steps))
        quality, win, skipped, flat = (np.asarray(x).tolist() for x in jax.block_until_ready(out))
        return {"quality": quality, "win_rate": win, "skipped": skipped, "flat_groups": flat}

    def run_arm(kind: str, steps: int) -> dict:
        begin = time.perf_counter()
        tuned = bracket_learning_rate(
            lambda lr: run(kind, steps, lr, "tune"),
            lr_grid,
            factor=lr_factor,
            max_extensions=max_extensions,
        )
        held_out = run(kind, steps, tuned["best_lr"], "eval")
        result = {"kind": kind, "steps": steps, **tuned, "held_out": held_out}
        if judge_calls is not None:
            result["judge_calls_per_step"] = judge_calls[kind]
            result["judge_calls"] = judge_calls[kind] * steps
        result["seconds"] = time.perf_counter() - begin
        return result

    return run_arm


def tsrl_reference_checks(
    num_draws: int, *, tolerance: float, variance_rtol: float
) -> dict[str, object]:
    """:func:`tsrl_reference_errors` over ``num_draws`` draws, judged: every error within
    ``tolerance`` and every variance within ``variance_rtol`` (relative) of ``1/(8K)``.

    Returns:
      ``{"errors": by check, "variance": K -> measured, "passed"}``.

    Examples:
      >>> tsrl_reference_checks(20_000, tolerance=1e-5, variance_rtol=0.05)["passed"]
      True
    """
    keys = jax.random.split(jax.random.key(1), check_int(num_draws, "num_draws", minimum=2))
    errors, var = tsrl_reference_errors(keys)
    errors = {k: float(v) for k, v in errors.items()}
    exact = TSRL_REFERENCE["variance"]
    variance = {k: float(v) for k, v in zip(exact, var, strict=True)}
    var_ok = all(abs(variance[k] - v) <= variance_rtol * v for k, v in exact.items())
    passed = max(errors.values()) <= tolerance and var_ok
    return {"errors": errors, "variance": variance, "passed": bool(passed)}
