"""TSRL's training programs (``jaxlab.rl._tournament_runs``) against closed forms and the rewards
they dispatch to."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import rl


def test_judged_group_reward_is_the_reward_of_its_kind():
    quality = lambda q, x: x[..., 0].astype(jnp.float32)  # noqa: E731
    anchors = jnp.array([[[0], [2]], [[1], [1]]])
    tokens, prompts = jnp.array([[[0], [1], [2]], [[2], [0], [1]]]), jnp.arange(2)
    key = jax.random.key(4)
    common = dict(temperature=0.7, position_bias=0.3, flip_prob=0.1)
    judge = rl.synthetic_pairwise_judge(quality, **common)
    direct = {
        "single": lambda k, r, q: rl.single_pairwise_reward(k, judge, r, q)[0],
        "tsrl": lambda k, r, q: rl.win_rate_reward(k, judge, r, anchors[q], q)[0],
    }
    for kind, reward in direct.items():
        reward_fn = rl.judged_group_reward(
            rl.JUDGED_REWARD_KINDS.index(kind), quality, lambda q: 0.0, anchors, **common
        )
        # The same per-prompt keys: split by prompt, then four ways (one per kind).
        keys = jax.random.split(key, 2)
        slot = {"single": 1, "tsrl": 3}[kind]
        expected = jnp.stack(
            [reward(jax.random.split(keys[i], 4)[slot], tokens[i], prompts[i]) for i in range(2)]
        )
        np.testing.assert_allclose(reward_fn(key, tokens, prompts), expected, rtol=1e-6)


@pytest.mark.parametrize(("g", "k", "b"), [(8, 8, 4), (4, 3, 2)])
def test_judge_calls_per_step_closed_form(g, k, b):
    # Rubric: one call per response; single comparison: both orders; TSRL: both orders per anchor.
    calls = rl.judge_calls_per_step(group_size=g, num_anchors=k, length=3, batch_prompts=b)
    assert calls == {"pointwise": b * g, "single": 2 * b * g, "tsrl": 2 * b * g * k}


def test_bracket_learning_rate_widens_to_an_interior_best_and_stops_at_its_limit():
    peak = lambda lr: {"quality": [-(np.log(lr / 0.5) ** 2)]}  # noqa: E731  (best at 0.5)
    out = rl.bracket_learning_rate(peak, [0.01, 0.02, 0.04], factor=2.0, max_extensions=10)
    assert out["bracketed"] and out["extensions"] == 5 and out["best_lr"] == pytest.approx(0.64)
    stuck = rl.bracket_learning_rate(peak, [0.01, 0.02], factor=2.0, max_extensions=1)
    assert not stuck["bracketed"] and stuck["best_lr"] == 0.04
    assert [row["lr"] for row in stuck["grid"]] == [0.01, 0.02, 0.04]


def test_tournament_program_at_lr_zero_stays_uniform():
    # The uniform policy's normalised quality is 0 (closed form) at every step.
    arms = rl.tournament_toy_arms((1, 2), (0.2,))
    assert [a[0] for a in arms][:4] == ["pointwise", "single", "round_robin", "tsrl_k1"]
    out = rl.tournament_bandit_arms(
        jax.random.key(0),
        arms[:4],
        num_prompts=4,
        num_candidates=3,
        batch_prompts=2,
        group_size=2,
        steps=2,
        learning_rate=0.0,
        seeds=2,
        temperature=0.5,
        position_bias=0.5,
        variance_redraws=4,
    )
    for arm in out.values():
        np.testing.assert_allclose(arm["quality"], 0.0, atol=1e-6)
        np.testing.assert_allclose(arm["curve_mean"], 0.0, atol=1e-6)
        assert arm["skipped_steps"] == [0, 0]


def test_tsrl_reference_checks_fail_on_a_tolerance_below_the_noise():
    out = rl.tsrl_reference_checks(4000, tolerance=1e-5, variance_rtol=0.1)
    assert out["passed"] and set(out["variance"]) == set(rl.TSRL_REFERENCE["variance"])
    assert not rl.tsrl_reference_checks(4000, tolerance=1e-5, variance_rtol=0.0)["passed"]
