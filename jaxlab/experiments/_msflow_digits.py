"""The ``msflow`` experiment's second study, the digits tasks (:mod:`jaxlab.experiments.msflow`
holds the configuration, the 2-D toy, the verdict and the figures).

A :class:`jaxlab.inverse.VelocityMLP` trained by flow matching on scikit-learn's digits; per task
and N the arms (:class:`jaxlab.inverse.SingleShooting` storing every step or checkpointed,
:class:`jaxlab.inverse.MSFlow`) as :class:`jaxlab.inverse.BatchedReconstructor` s (the compiled
memory of one vmapped step on the first task), then per seed the least-squares baselines and
every arm's reconstructions, summarised (PSNR, residual, non-finite images, time per step).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxlab._src.experiments import Progress
from jaxlab.inverse import (
    BatchedReconstructor,
    MSFlow,
    Reconstruction,
    SingleShooting,
    VelocityMLP,
    digits_images,
    least_squares_baseline,
    measure,
    psnr,
    split_velocity,
    task_operator,
    train_flow_matching,
)
from jaxlab.solvers import SolverStatus

if TYPE_CHECKING:
    from jaxlab.experiments.msflow import MSFlowConfig

__all__ = ["IMAGE_RANGE", "NOISE_STD", "digits_study"]

NOISE_STD = 0.05  # the note's σ, both problems (the toy's too)
IMAGE_RANGE = 2.0  # PSNR peak for images in [-1, 1]


def _arms(config: MSFlowConfig, n: int, velocity_fn) -> dict[str, Any]:
    """The solvers compared at N = n (every setting on the solver)."""
    s = config.num_segments
    if n % s:
        raise ValueError(f"every N must be a multiple of num_segments={s}, got {n}")
    common = dict(noise_std=NOISE_STD, maxiter=config.iterations)
    arms = {"dflow_every_step": SingleShooting(velocity_fn, num_steps=n, **common)}
    if n in config.checkpointed_steps:
        arms["dflow_checkpointed"] = SingleShooting(
            velocity_fn, num_steps=n, adjoint="checkpointed", **common
        )
    arms["msflow"] = MSFlow(velocity_fn, num_segments=s, steps_per_segment=n // s, **common)
    if config.vjp_arm:
        arms["msflow_vjp"] = MSFlow(
            velocity_fn, num_segments=s, steps_per_segment=n // s, jacobian="vjp", **common
        )
    return arms


def _residual_norm(x, y, op):
    m = jnp.asarray(op.num_measurements, x.dtype)
    return jnp.linalg.norm(jax.vmap(op.matvec)(x) - y, axis=-1) / (NOISE_STD * jnp.sqrt(m))


def _summarise(x_true, y, op, rec, run: Reconstruction | None = None) -> dict:
    row = {
        "psnr": np.asarray(psnr(rec, x_true, IMAGE_RANGE)).tolist(),
        "residual": np.asarray(_residual_norm(rec, y, op)).tolist(),
        "num_nonfinite": int(np.sum(~np.all(np.isfinite(np.asarray(rec)), axis=-1))),
    }
    row["mean_psnr"] = float(np.mean(row["psnr"]))  # NaN if any image is non-finite
    if run is not None:
        row["nonfinite_status"] = int(np.sum(np.asarray(run.status) == SolverStatus.NONFINITE))
        row["nonfinite_updates"] = int(np.sum(np.asarray(run.nonfinite_count)))
        row["step_seconds"] = run.step_seconds
    if run is not None and run.resimulated is not None:
        row["resimulated_psnr"] = float(np.mean(np.asarray(psnr(run.resimulated, x_true))))
        row["mean_stitching_gap"] = float(np.mean(np.asarray(run.stitching_gap)))
    return row


def _mean_over_seeds(seeds: list[dict]) -> dict:
    mean = {}
    for name in seeds[0]:
        rows = [r[name] for r in seeds]
        mean[name] = {
            "mean_psnr": float(np.mean([r["mean_psnr"] for r in rows])),
            "per_seed_psnr": [r["mean_psnr"] for r in rows],
            "mean_residual": float(np.mean([np.mean(r["residual"]) for r in rows])),
            "num_nonfinite": int(sum(r["num_nonfinite"] for r in rows)),
        }
        for key in ("step_seconds", "resimulated_psnr", "mean_stitching_gap"):
            if key in rows[0]:
                mean[name][key] = float(np.mean([r[key] for r in rows]))
    return mean


def digits_study(config: MSFlowConfig, rng_key: jax.Array, progress: Progress) -> dict:
    """The digits study: the flow prior trained, the memory grid and every task's arms."""
    split_key, init_key, train_key, seed_key = jax.random.split(rng_key, 4)
    split = digits_images(split_key, num_train=config.num_train, scale=config.image_scale)
    d = split.train.shape[1]
    model = VelocityMLP(
        d, config.hidden, rngs=nnx.Rngs(int(jax.random.randint(init_key, (), 0, 2**31 - 1)))
    )
    start = time.perf_counter()
    history = train_flow_matching(
        model,
        split.train,
        steps=config.train_steps,
        batch_size=config.batch_size,
        learning_rate=config.train_learning_rate,
        rng_key=train_key,
        progress=progress,
    )
    train_seconds = time.perf_counter() - start
    velocity_fn, vparams = split_velocity(model)
    x_true = split.test[: config.test_images]
    b = x_true.shape[0]
    out = {
        "train_seconds": train_seconds,
        "train_loss_first_last": [
            float(np.mean(history["train_loss"][:50])),
            float(np.mean(history["train_loss"][-50:])),
        ],
        "train_loss_finite": bool(np.all(np.isfinite(history["train_loss"]))),
        "dimension": d,
        "memory": {},
        "tasks": {},
        "examples": {"x_true": np.asarray(x_true[:4]).tolist(), "image_shape": split.image_shape},
    }
    steps = sorted(set(config.memory_steps) | set(config.psnr_steps))
    jobs = [(task, n) for task in config.tasks for n in steps]
    arms_cache: dict = {}
    for task, n in progress.track(jobs, total=len(jobs), description="tasks x N"):
        op = task_operator(task, split.image_shape, ct_angles=config.ct_angles)
        on_memory_task = task == config.tasks[0] and n in config.memory_steps
        if not on_memory_task and n not in config.psnr_steps:
            continue
        arms = {
            name: BatchedReconstructor(solver, vparams, op, b)
            for name, solver in _arms(config, n, velocity_fn).items()
            # The checkpointed arm is run at the verdict's N only (its memory: on the first task).
            if on_memory_task or name != "dflow_checkpointed" or n == config.verdict_steps
        }
        if on_memory_task:
            out["memory"][str(n)] = {name: arm.memory.summary() for name, arm in arms.items()}
        arms_cache[(task, n)] = arms
    for task in config.tasks:
        op = task_operator(task, split.image_shape, ct_angles=config.ct_angles)
        task_out: dict = {"seeds": []}
        for seed in range(config.seeds):
            key = jax.random.fold_in(seed_key, seed)
            noise_key, z_key = jax.random.split(jax.random.fold_in(key, config.tasks.index(task)))
            y = jax.vmap(lambda k, x, op=op: measure(k, x, op, NOISE_STD))(
                jax.random.split(noise_key, b), x_true
            )
            z0 = jax.random.normal(z_key, x_true.shape)
            rows = {}
            zero = jax.vmap(lambda yi, op=op: least_squares_baseline(yi, op, NOISE_STD))(y)
            rows["least_squares"] = _summarise(x_true, y, op, zero)
            smooth = jax.vmap(
                lambda yi, op=op: least_squares_baseline(
                    yi, op, NOISE_STD, smoothness=config.smoothness, image_shape=split.image_shape
                )
            )(y)
            rows["smooth_least_squares"] = _summarise(x_true, y, op, smooth)
            examples = {"least_squares": np.asarray(zero[:4]).tolist()}
            for n in config.psnr_steps:
                for name, arm in arms_cache[(task, n)].items():
                    if name == "dflow_checkpointed" and n != config.verdict_steps:
                        continue
                    run = arm.reconstruct(z0, y)
                    rows[f"{name}@{n}"] = _summarise(x_true, y, op, run.reconstruction, run)
                    if n == config.verdict_steps:
                        examples[name] = np.asarray(run.reconstruction[:4]).tolist()
            task_out["seeds"].append(rows)
            if seed == 0:
                task_out["examples"] = examples
        task_out["mean"] = _mean_over_seeds(task_out["seeds"])
        out["tasks"][task] = task_out
    return out
