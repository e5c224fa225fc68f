"""The top-K sweep's problems and trainer (jaxlab/nn/_moe_problems.py)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxlab import nn as jnn


def _teacher_student(batch_size=16):
    task = jnn.moe_teacher_student_task(
        jax.random.key(0), in_features=4, hidden_features=4, num_experts=2, top_k=1, eval_samples=32
    )
    return jnn.moe_teacher_student_problem(
        task, in_features=4, hidden_features=4, num_experts=4, batch_size=batch_size
    )


def test_teacher_student_flop_account_is_the_layers_own():
    problem = _teacher_student()
    for top_k in (1, 2, 4):
        layer = nnx.eval_shape(lambda k=top_k: problem.make_model(k, jax.random.key(0)))
        assert layer.flops_per_token() == problem.overhead_flops + problem.flops_per_expert * top_k
    axis = jnn.moe_compute_axis(problem, (1, 4), 1e5, num_experts=4, capacity_factors=(1.0,))
    analytic = axis["by_top_k"][4]["analytic"]
    assert analytic["steps"] == round(1e5 / analytic["flops_per_token"])
    assert set(axis["by_top_k"][1]) == {"analytic", "dense_masked", "sparse_c1.0"}


def test_trainer_stops_do_not_change_the_run_and_training_helps():
    problem = _teacher_student()
    init, train, evaluate = jnn.moe_top_k_trainer(problem, 2, learning_rate=1e-2, aux_weight=1e-2)
    keys = jax.random.split(jax.random.key(1), 2)
    start = init(keys)
    once = train(start, keys, jnp.int32(0), jnp.int32(8))
    twice = train(train(start, keys, jnp.int32(0), jnp.int32(3)), keys, jnp.int32(3), jnp.int32(5))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), once, twice)
    assert bool(jnp.all(evaluate(once)["loss"] < evaluate(start)["loss"]))


def test_language_model_problem_uses_the_transformer_account():
    gpt = jnn.GPTConfig(256, 32, 2, 2, max_len=8, multiple_of=16, num_experts=4)
    data = jnp.arange(300) % 256
    problem = jnn.moe_language_model_problem(
        gpt, data, jnn.sample_batch(jax.random.key(0), data, 4, 8), batch_size=2
    )
    assert (problem.overhead_flops, problem.flops_per_expert) == jnn.moe_transformer_flop_constants(
        dataclasses.replace(gpt, experts_top_k=1)
    )
    assert (problem.moe_layers, problem.tokens_per_batch) == (2, 16)
    model = problem.make_model(3, jax.random.key(0))
    assert model.config.experts_top_k == 3
    with pytest.raises(ValueError, match="num_experts"):
        jnn.moe_language_model_problem(
            jnn.GPTConfig(256, 32, 2, 2, max_len=8, multiple_of=16), data, None, batch_size=2
        )
