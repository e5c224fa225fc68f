"""Experiment ``ucpo``: uncertainty-aware advantages (UCPO) on an answer-or-abstain task.

Zeng et al. (ICML 2026): with right / wrong / uncertain rollouts, normalising the deterministic
outcomes apart from the abstentions (ternary advantage decoupling) and setting the abstentions'
advantage from the group's mix (the dynamic uncertainty gain) makes a model abstain where it
does not know, without the fixed-reward baseline's failure modes (overconfidence or collapse
into abstaining), raising the precision of the answers it gives (PAQ).

Measured (``notes/ucpo.md``): the ternary bandit (:func:`jaxlab.rl.ternary_bandit`): 64
prompts, 4 answers + abstain, knowability κ ∈ {0, 1/3, 2/3, 1} (16 prompts each: a rollout's
correct answer is the key with probability κ, else uniform, so some questions are beyond the
policy's capability). Policy: per-prompt logits plus a shared bias
(:class:`jaxlab.rl.TabularPolicy`), from a *cold* start (all 0) and a *warm* start (key +1,
abstain -2: a pretrained model that rarely abstains). :func:`jaxlab.rl.grpo` with ``B = 16``
prompts x ``G = 8``, one step per batch (ratio 1: REINFORCE with group advantages),
``θ_q += 0.1 (1/G) Σ Â ∇log π``, bias ``+= 0.1 (1/(BG)) Σ``, 1500 steps. Arms: GRPO (binary
reward), GRPO-UC with ``r_u ∈ {0.2, 0.5}`` (:func:`jaxlab.rl.ternary_rewards`), UCPO
(:func:`jaxlab.rl.ucpo_advantages`, ``w = 1``, NTF on). Metrics are exact expectations under
the final policy (:func:`jaxlab.rl.expected_answer_metrics`): accuracy, PAQ, F1 and abstention
per κ. ``full`` adds prompts, seeds and the ablations ``w ∈ {0.5, 2}`` and UCPO without NTF.

Verdict (the note's rule, part by part for each start): (a) PAQ(UCPO) > PAQ(GRPO) + 0.05;
(b) UCPO's abstention is non-increasing in κ with abstain(κ=0) >= 3 abstain(κ=1); (c) UCPO's
overall abstention < 0.5 and accuracy >= 0.65 x GRPO's (no collapse into abstaining); (d)
GRPO-UC is r_u-sensitive (warm, r_u = 0.2: abstain(κ=0) < 0.5; cold, r_u = 0.5:
abstain(κ=1/3) > 0.9). *Supported*: all; *partly*: (a) and (c) but not (b) or (d); *not
supported*: (a) or (c) fails. F1 (the note's prototype found UCPO's below GRPO's) is reported
beside every part and in the verdict's reason. (e) The note's reference table.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from matplotlib.figure import Figure

from jaxlab._src.experiments import ExperimentConfig, Progress, Result, check, register
from jaxlab.rl import (
    RIGHT,
    UNCERTAIN,
    WRONG,
    TabularPolicy,
    dynamic_uncertainty_gain,
    expected_answer_metrics,
    group_advantages,
    grpo,
    ternary_bandit,
    ternary_labels,
    ternary_rewards,
    ucpo_advantages,
)

__all__ = ["UCPOConfig", "run"]

CLAIM = (
    "Zeng et al. (ICML 2026, UCPO): ternary advantage decoupling with a dynamic uncertainty "
    "reward makes GRPO abstain on questions beyond the model's capability, raising the precision "
    "of the answers it gives (PAQ), without the fixed uncertainty reward's overconfidence or "
    "collapse into abstaining."
)

# The note's calibrated rule (seed means).
MIN_PAQ_GAIN = 0.05  # (a) PAQ(UCPO) - PAQ(GRPO) (prototype: +0.09 warm, +0.07 cold)
MIN_ABSTAIN_CONTRAST = 3.0  # (b) abstain(κ=0) / abstain(κ=1) (prototype 22 warm, 6 cold)
MAX_ABSTAIN = 0.5  # (c) overall abstention: no collapse (prototype 0.31 warm, 0.36 cold)
MIN_ACCURACY_RATIO = 0.65  # (c) acc(UCPO) / acc(GRPO) (prototype 0.79 warm, 0.71 cold)
MAX_UC_LOW_ABSTAIN = 0.5  # (d) warm GRPO-UC(0.2) at κ = 0 stays overconfident (prototype 0.02)
MIN_UC_HIGH_ABSTAIN = 0.9  # (d) cold GRPO-UC(0.5) at κ = 1/3 collapses (prototype 0.97)
LOW_UNCERTAIN_REWARD, HIGH_UNCERTAIN_REWARD = 0.2, 0.5
WARM_KEY_LOGIT, WARM_ABSTAIN_LOGIT = 1.0, -2.0  # the note's pretrained start
# The note's reference table: (n_R, n_W, n_U) -> Â_U (r_u 0.2), Â_U (r_u 0.5), TAD Â_R, Â_W,
# γ, UCPO Â_U (R = 1, W = 0, population std, ε = 1e-6, w = 1, G = 8).
REFERENCE_TABLE = {
    (6, 1, 1): (-1.4635, -0.8980, 0.4082, -2.4495, 0.3304, 0.1349),
    (1, 6, 1): (0.1525, 0.8980, 2.4495, -0.4082, 0.7321, 1.7934),
    (3, 3, 2): (-0.4977, 0.0000, 1.0000, -1.0000, 0.3250, 0.3250),
    (4, 2, 2): (-0.7683, -0.3015, 0.7071, -1.4142, 0.2083, 0.1473),
    (2, 2, 4): (-0.3906, 0.0000, 1.0000, -1.0000, -0.0833, -0.0833),
    (1, 1, 6): (-0.2662, 0.0000, 1.0000, -1.0000, -0.3393, -0.3393),
    (2, 1, 5): (-0.4774, -0.2085, 0.7071, -1.4142, -0.3542, -0.2504),
}
REFERENCE_TOL = 1.5e-4  # the table's four decimals (± 0.5e-4) plus float32

_KINDS = ("grpo", "grpo_uc", "ucpo")
STARTS = ("cold", "warm")


@dataclasses.dataclass(frozen=True)
class UCPOConfig(ExperimentConfig):
    """Sizes of ``ucpo``.

    Attributes:
      num_prompts, num_answers, knowability: the bandit (the note: 64, 4, four levels).
      batch_prompts, group_size, steps: GRPO (the note: 16, 8, 1500).
      prompt_learning_rate, bias_learning_rate: the note's per-prompt and shared-bias steps.
      seeds: seeds (instance and sampling), vmapped with arms and starts.
      suppression_weight: UCPO's ``w``.
      ablations: also run UCPO with ``w ∈ {0.5, 2}`` and without NTF (reported, not gated).
      record_every: steps between recorded abstention curves.
    """

    num_prompts: int = 64
    num_answers: int = 4
    knowability: tuple[float, ...] = (0.0, 1 / 3, 2 / 3, 1.0)
    batch_prompts: int = 16
    group_size: int = 8
    steps: int = 1500
    prompt_learning_rate: float = 0.1
    bias_learning_rate: float = 0.1
    seeds: int = 5
    suppression_weight: float = 1.0
    ablations: bool = False
    record_every: int = 50

    @classmethod
    def smoke(cls):
        return cls(num_prompts=8, batch_prompts=4, steps=6, seeds=2, record_every=3)

    @classmethod
    def quick(cls):
        return cls()

    @classmethod
    def full(cls):
        return cls(num_prompts=256, batch_prompts=32, steps=4000, seeds=10, ablations=True)


def _arms(config: UCPOConfig) -> list[tuple[str, str, float, float, bool]]:
    """(name, kind, r_u, w, NTF) of every arm."""
    w = config.suppression_weight
    arms = [("grpo", "grpo", 0.0, w, True)]
    arms += [(f"grpo_uc_{r:g}", "grpo_uc", r, w, True) for r in (0.2, 0.5)]
    arms += [("ucpo", "ucpo", 0.0, w, True)]
    if config.ablations:
        arms += [("ucpo_w0.5", "ucpo", 0.0, 0.5, True), ("ucpo_w2", "ucpo", 0.0, 2.0, True)]
        arms += [("ucpo_no_ntf", "ucpo", 0.0, w, False)]
    return arms


def _program(config: UCPOConfig):
    q, k, b, g = config.num_prompts, config.num_answers, config.batch_prompts, config.group_size
    policy = TabularPolicy(q, k + 1, shared_bias=True)
    levels = jnp.asarray(config.knowability, jnp.float32)
    # Loss = mean over B G tokens: sgd(lr B) on the logits is the note's lr (1/G) Σ per prompt,
    # sgd(lr) on the shared bias its lr (1/(BG)) Σ over the batch.
    labels_tree = {"logits": "logits", "bias": "bias"}

    def one(key, kind, uncertain_reward, weight, ntf, warm, lr_prompt, lr_bias):
        task_key, run_key = jax.random.split(key)
        bandit = ternary_bandit(task_key, q, k, config.knowability)

        def reward_fn(kk, tokens, prompts):
            prompt_grid = jnp.broadcast_to(prompts[:, None], tokens.shape[:2])
            return ternary_labels(kk, bandit, prompt_grid, tokens[..., 0])

        def advantage_fn(labels):
            binary = group_advantages((labels == RIGHT).astype(jnp.float32))
            fixed = group_advantages(ternary_rewards(labels, uncertain_reward=uncertain_reward))
            kept = ucpo_advantages(labels, suppression_weight=weight)[0]
            unfiltered = ucpo_advantages(
                labels, suppression_weight=weight, filter_non_ternary=False
            )
            ucpo = jnp.where(ntf, kept, unfiltered[0])
            return jnp.stack([binary, fixed, ucpo])[kind]

        tx = optax.multi_transform(
            {"logits": optax.sgd(lr_prompt * b), "bias": optax.sgd(lr_bias)}, labels_tree
        )
        init, step = grpo(
            policy.sample, policy.log_prob, reward_fn, tx, group_size=g, advantage=advantage_fn
        )
        logits = jnp.zeros((q, k + 1))
        logits = logits.at[jnp.arange(q), bandit.key_answer].set(warm * WARM_KEY_LOGIT)
        logits = logits.at[:, k].set(warm * WARM_ABSTAIN_LOGIT)

        def body(state, kk):
            pk, sk = jax.random.split(kk)
            state, _ = step(sk, state, jax.random.permutation(pk, q)[:b])
            unsure = policy.probabilities(state.params)[:, k]
            by_level = jnp.array(
                [jnp.mean(unsure, where=bandit.knowability == lv) for lv in levels]
            )
            return state, by_level

        state, curve = jax.lax.scan(
            body, init(policy.init(logits)), jax.random.split(run_key, config.steps)
        )
        return (
            policy.probabilities(state.params),
            curve[:: config.record_every],
            state.skipped_count,
        )

    over_seeds = jax.vmap(one, in_axes=(0, None, None, None, None, None, None, None))
    over_starts = jax.vmap(over_seeds, in_axes=(None,) * 5 + (0, None, None))
    return jax.jit(jax.vmap(over_starts, in_axes=(None, 0, 0, 0, 0, None, None, None)))


def _train(config: UCPOConfig, rng_key) -> dict:
    arms = _arms(config)
    columns = list(zip(*arms, strict=True))
    kinds = jnp.array([_KINDS.index(kd) for kd in columns[1]])
    start = time.perf_counter()
    keys = jax.random.split(rng_key, config.seeds)
    probs, curves, nonfinite = _program(config)(
        keys, kinds, jnp.array(columns[2], jnp.float32), jnp.array(columns[3], jnp.float32),
        jnp.array(columns[4]), jnp.array([0.0, 1.0]), config.prompt_learning_rate,
        config.bias_learning_rate,
    )  # fmt: skip
    probs, curves = np.asarray(probs), np.asarray(curves)
    nonfinite = np.asarray(nonfinite)
    seconds = time.perf_counter() - start
    bandits = [
        ternary_bandit(
            jax.random.split(kk)[0], config.num_prompts, config.num_answers, config.knowability
        )  # fmt: skip
        for kk in keys
    ]
    out = {}
    for i, (name, *_rest) in enumerate(arms):
        for j, start_name in enumerate(STARTS):
            per_seed = [
                expected_answer_metrics(bandits[s], jnp.asarray(probs[i, j, s]))
                for s in range(config.seeds)
            ]
            levels = list(per_seed[0]["abstain_by_knowability"])
            mean = {
                m: float(np.mean([r[m] for r in per_seed]))
                for m in ("accuracy", "paq", "f1", "uncertainty_ratio")
            }
            mean["abstain_by_knowability"] = [
                float(np.mean([r["abstain_by_knowability"][lv] for r in per_seed])) for lv in levels
            ]
            out[f"{start_name}/{name}"] = {
                "mean": mean,
                "per_seed": [
                    {
                        **{m: r[m] for m in mean if m != "abstain_by_knowability"},
                        "abstain_by_knowability": list(r["abstain_by_knowability"].values()),
                    }
                    for r in per_seed
                ],  # fmt: skip
                "abstain_curve": curves[i, j].mean(0).tolist(),
                "nonfinite_steps": int(nonfinite[i, j].sum()),
            }
    return {"arms": out, "levels": [round(v, 6) for v in config.knowability], "seconds": seconds}


def _reference_checks() -> dict:
    rows = list(REFERENCE_TABLE)
    labels = jnp.array([[RIGHT] * r + [WRONG] * w + [UNCERTAIN] * u for r, w, u in rows], jnp.int32)
    uc = [group_advantages(ternary_rewards(labels, uncertain_reward=ru)) for ru in (0.2, 0.5)]
    tad, _ = ucpo_advantages(labels)
    gain = dynamic_uncertainty_gain(labels)
    got = []
    for i, (r, _, _) in enumerate(rows):
        last = -1  # an uncertain rollout sits last in every row
        got.append(
            (float(uc[0][i, last]), float(uc[1][i, last]), float(tad[i, 0]), float(tad[i, r]),
             float(gain[i]), float(tad[i, last]))
        )  # fmt: skip
    expected = np.array(list(REFERENCE_TABLE.values()))
    error = float(np.max(np.abs(np.array(got) - expected)))
    # Properties: no uncertain rollout -> TAD equals GRPO; NTF masks n_R n_W = 0 exactly.
    plain = jnp.array([[RIGHT, WRONG, WRONG, RIGHT, RIGHT, WRONG, RIGHT, RIGHT]])
    grpo_gap = float(
        jnp.max(jnp.abs(ucpo_advantages(plain)[0] - group_advantages((plain == RIGHT) * 1.0)))
    )
    masks = ucpo_advantages(jnp.array([[RIGHT, UNCERTAIN], [WRONG, UNCERTAIN], [RIGHT, WRONG]]))[1]
    mask_ok = masks.tolist() == [False, False, True]
    return {
        "table_error": error,
        "tad_equals_grpo_error": grpo_gap,
        "ntf_mask_ok": mask_ok,
        "passed": bool(error <= REFERENCE_TOL and grpo_gap <= 1e-5 and mask_ok),
    }


def accuracy_ratio(arms: dict, start: str) -> float:
    """UCPO's accuracy over GRPO's (part c)."""
    return arms[f"{start}/ucpo"]["mean"]["accuracy"] / arms[f"{start}/grpo"]["mean"]["accuracy"]


def note_parts_pass(arms: dict, start: str) -> dict[str, bool]:
    """Parts (a)-(c) of the note's rule for one start, from the seed-mean metrics."""
    u, g = arms[f"{start}/ucpo"]["mean"], arms[f"{start}/grpo"]["mean"]
    by = u["abstain_by_knowability"]
    return {
        "a": u["paq"] > g["paq"] + MIN_PAQ_GAIN,
        "b": all(x >= y for x, y in zip(by, by[1:], strict=False))
        and by[0] >= MIN_ABSTAIN_CONTRAST * by[-1],
        "c": u["uncertainty_ratio"] < MAX_ABSTAIN
        and u["accuracy"] >= MIN_ACCURACY_RATIO * g["accuracy"],
    }


def sensitivity_part_passes(arms: dict, levels: list[float]) -> bool:
    """Part (d): warm GRPO-UC(0.2) abstains < 0.5 at κ = 0, cold GRPO-UC(0.5) > 0.9 at κ = 1/3."""
    third = min(range(len(levels)), key=lambda i: abs(levels[i] - 1 / 3))
    low = arms[f"warm/grpo_uc_{LOW_UNCERTAIN_REWARD:g}"]["mean"]["abstain_by_knowability"][0]
    high = arms[f"cold/grpo_uc_{HIGH_UNCERTAIN_REWARD:g}"]["mean"]["abstain_by_knowability"][third]
    return low < MAX_UC_LOW_ABSTAIN and high > MIN_UC_HIGH_ABSTAIN


def _figure(config, runs):
    fig = Figure(figsize=(13, 4))
    axes = fig.subplots(1, 3)
    levels = runs["levels"]
    names = [n for n in runs["arms"] if n.startswith("cold/")]
    for ax, start in zip(axes[:2], STARTS, strict=True):
        for name in names:
            arm = name.split("/", 1)[1]
            ax.plot(levels, runs["arms"][f"{start}/{arm}"]["mean"]["abstain_by_knowability"],
                    "o-", label=arm)  # fmt: skip
        ax.set_xlabel("knowability κ")
        ax.set_ylabel("abstention")
        ax.set_title(f"{start} start, {config.steps} steps")
        ax.legend(fontsize=7)
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        arm = name.split("/", 1)[1]
        for j, start in enumerate(STARTS):
            m = runs["arms"][f"{start}/{arm}"]["mean"]
            axes[2].bar(np.arange(3) + 4 * j + i * width, [m["accuracy"], m["paq"], m["f1"]],
                        width, label=arm if j == 0 else None, color=f"C{i}")  # fmt: skip
    axes[2].set_xticks(
        [x + 4 * j + 0.4 for j in range(2) for x in range(3)],
        [f"{s}\n{m}" for s in STARTS for m in ("acc", "PAQ", "F1")],
        fontsize=7,
    )
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    return {"ucpo": fig}


@register("ucpo", config=UCPOConfig, claim=CLAIM)
def run(config: UCPOConfig, rng_key: jax.Array, progress: Progress) -> Result:
    """Trains every arm from both starts; the note's verdict part by part, F1 beside it."""
    start_time = time.perf_counter()
    reference = _reference_checks()
    (runs,) = [_train(config, rng_key) for _ in progress.track([0], description="arms")]
    seconds = time.perf_counter() - start_time
    arms, levels = runs["arms"], runs["levels"]

    def line(start, arm):
        m = arms[f"{start}/{arm}"]["mean"]
        by = "/".join(f"{v:.2f}" for v in m["abstain_by_knowability"])
        return (
            f"{arm}: acc {m['accuracy']:.3f}, PAQ {m['paq']:.3f}, F1 {m['f1']:.3f}, abstain "
            f"{m['uncertainty_ratio']:.3f} (by κ {by})"
        )

    parts, held = [], {}
    for start in STARTS:
        ok = note_parts_pass(arms, start)
        held[start] = ok
        u, g = line(start, "ucpo"), line(start, "grpo")
        parts.append(check(
            f"(note a, {start} start) UCPO's PAQ exceeds GRPO's by more than {MIN_PAQ_GAIN}",
            f"{u}; {g}; GRPO-UC: {line(start, 'grpo_uc_0.2')}; {line(start, 'grpo_uc_0.5')}",
            ok["a"],
        ))  # fmt: skip
        parts.append(check(
            f"(note b, {start} start) UCPO's abstention falls as κ rises, abstain(κ=0) >= "
            f"{MIN_ABSTAIN_CONTRAST:g} abstain(κ=1)",
            f"{u} (κ = {', '.join(f'{lv:.3g}' for lv in levels)})",
            ok["b"],
        ))  # fmt: skip
        parts.append(check(
            f"(note c, {start} start) no collapse: UCPO abstains on < {MAX_ABSTAIN} overall with "
            f"accuracy >= {MIN_ACCURACY_RATIO} x GRPO's",
            f"UCPO abstain {arms[f'{start}/ucpo']['mean']['uncertainty_ratio']:.3f}, accuracy "
            f"ratio {accuracy_ratio(arms, start):.3f}; {u}; {g}",
            ok["c"],
        ))  # fmt: skip
    d_ok = sensitivity_part_passes(arms, levels)
    parts.append(check(
        f"(note d) GRPO-UC is r_u-sensitive: warm, r_u = {LOW_UNCERTAIN_REWARD}: abstain(κ=0) < "
        f"{MAX_UC_LOW_ABSTAIN}; cold, r_u = {HIGH_UNCERTAIN_REWARD}: abstain(κ=1/3) > "
        f"{MIN_UC_HIGH_ABSTAIN}",
        f"warm {line('warm', 'grpo_uc_0.2')}; cold {line('cold', 'grpo_uc_0.5')}",
        d_ok,
    ))  # fmt: skip
    parts.append(check(
        "the note's reference table (GRPO-UC, TAD, γ, UCPO advantages) and properties",
        f"max table error {reference['table_error']:.1e}, TAD-vs-GRPO without U "
        f"{reference['tad_equals_grpo_error']:.1e}, NTF mask {reference['ntf_mask_ok']}",
        reference["passed"],
    ))  # fmt: skip
    a_c = all(held[s]["a"] and held[s]["c"] for s in STARTS)
    b_d = all(held[s]["b"] for s in STARTS) and d_ok
    level = "supported" if a_c and b_d else "partly supported" if a_c else "not supported"
    f1 = "; ".join(
        f"{s}: UCPO {arms[f'{s}/ucpo']['mean']['f1']:.3f} vs GRPO "
        f"{arms[f'{s}/grpo']['mean']['f1']:.3f}"
        for s in STARTS
    )
    warm_uc = arms["warm/grpo_uc_0.5"]["mean"]["paq"]
    reason = (
        f"note's rule: {level}; F1 beside it: {f1}; in this bandit GRPO-UC(0.5) from the warm "
        f"start reaches PAQ {warm_uc:.3f} against UCPO's {arms['warm/ucpo']['mean']['paq']:.3f}: "
        "the toy checks the mechanisms, not the LLM-scale gains"
    )
    failed = [p.claim for p in parts if not p.passed]
    if failed:
        reason += "; failed: " + "; ".join(failed)
    metrics = {
        "note_verdict": level,
        "f1": {
            s: {a.split("/")[1]: v["mean"]["f1"] for a, v in arms.items() if a.startswith(s)}
            for s in STARTS
        },  # fmt: skip
        "reference_checks": reference,
        "runs": runs,
        "nonfinite_steps": sum(a["nonfinite_steps"] for a in arms.values()),
        "seconds": seconds,
        "config": dataclasses.asdict(config),
    }
    return Result(metrics=metrics, parts=parts, figures=_figure(config, runs), reason=reason)
