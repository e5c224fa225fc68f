"""The routing-sparsity sweep's problems: a model family over top-K, its data, loss and FLOPs.

A :class:`MoETopKProblem` bundles what a sweep over the number of active experts needs: a model
per K, a training-batch sampler, the task and balance losses, a fixed evaluation batch and the
FLOP account ``cost(K) = c₀ + c₁K``. Two are built here: the teacher–student regression of
:func:`jaxlab.nn.moe_teacher_student_task` (:func:`moe_teacher_student_problem`) and a byte-level
:class:`jaxlab.nn.SimpleGPT` whose every FFN is an MoE (:func:`moe_language_model_problem`).
:func:`moe_top_k_trainer` trains one K over vmapped seeds with Adam, and
:func:`moe_compute_axis` sets the analytic account beside the FLOPs each dispatch executes.

References:
  Zhu et al., "Rethinking Convergence in MoE Training: The Role of Routing Sparsity", ICML 2026.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from jaxlab._src.training import scan_train
from jaxlab._src.validation import check_instance, check_positive_int
from jaxlab.nn._moe import MixtureOfExperts
from jaxlab.nn._moe_theory import MoETeacherStudentTask, moe_transformer_flop_constants
from jaxlab.nn._simplegpt import GPTConfig, SimpleGPT, ffn_hidden_size
from jaxlab.nn._text import sample_batch

__all__ = [
    "MoETopKProblem",
    "moe_compute_axis",
    "moe_language_model_problem",
    "moe_teacher_student_problem",
    "moe_top_k_trainer",
]


class MoETopKProblem(NamedTuple):
    """One top-K sweep's ingredients.

    Attributes:
      make_model: ``(top_k, rng_key) -> nnx.Module``.
      sample: ``rng_key -> batch`` (a training batch; jit-friendly).
      losses: ``(model, batch) -> (task_loss, balance_loss)``.
      eval_batch: the fixed evaluation batch.
      overhead_flops: ``c₀``, forward FLOPs per token that do not scale with K.
      flops_per_expert: ``c₁``, forward FLOPs per token of one more active expert.
      moe_features: ``(d, h)`` of every MoE layer of the model.
      moe_layers: MoE layers in a token's forward pass.
      tokens_per_batch: ``N``, tokens in one MoE call of a training step.
      info: a JSON-able description (``"task"``, ``"loss"``, ...).

    Examples:
      >>> MoETopKProblem._fields[:3]
      ('make_model', 'sample', 'losses')
    """

    make_model: Callable[[int, jax.Array], nnx.Module]
    sample: Callable[[jax.Array], Any]
    losses: Callable[[nnx.Module, Any], tuple[jax.Array, jax.Array]]
    eval_batch: Any
    overhead_flops: int
    flops_per_expert: int
    moe_features: tuple[int, int]
    moe_layers: int
    tokens_per_batch: int
    info: dict[str, Any]


def moe_teacher_student_problem(
    task: MoETeacherStudentTask,
    *,
    in_features: int,
    hidden_features: int,
    num_experts: int,
    gate: str = "softmax_topk",
    router_init_std: float = 0.1,
    batch_size: int = 256,
) -> MoETopKProblem:
    """A student :class:`MixtureOfExperts` per K fitting a teacher–student task.

    The task loss is the squared error summed over the outputs and averaged over samples (the
    note's scale); the balance loss the Switch loss of the student's routing. ``(c₀, c₁)`` come
    from the layer's own analytic count at K = 1 and 2.

    Args:
      task: :func:`jaxlab.nn.moe_teacher_student_task`.
      in_features: ``d`` of the task.
      hidden_features: ``h`` of every student expert.
      num_experts: the student's ``M``.
      gate: the student's gate.
      router_init_std: std of the student's router weights.
      batch_size: fresh samples per training step.

    Returns:
      a :class:`MoETopKProblem`.

    Examples:
      >>> import jax
      >>> from jaxlab.nn import moe_teacher_student_task
      >>> task = moe_teacher_student_task(jax.random.key(0), in_features=4, hidden_features=4,
      ...                                 num_experts=2, top_k=1, eval_samples=8)
      >>> problem = moe_teacher_student_problem(task, in_features=4, hidden_features=4,
      ...                                       num_experts=4, batch_size=8)
      >>> problem.flops_per_expert > 0, problem.moe_layers
      (True, 1)
    """
    check_instance(task, MoETeacherStudentTask, "task")
    batch_size = check_positive_int(batch_size, "batch_size")

    def student(top_k, key):
        return MixtureOfExperts(
            in_features,
            hidden_features,
            num_experts,
            top_k,
            gate=gate,
            router_init_std=router_init_std,
            rngs=nnx.Rngs(key),
        )

    def sample(key):
        return task.sample(key, batch_size)

    def losses(model, batch):
        x, y = batch
        y_hat, stats = model(x)
        return jnp.mean(jnp.sum((y_hat - y) ** 2, axis=-1)), stats.load_balancing_loss

    one, two = (
        nnx.eval_shape(lambda k=k: student(k, jax.random.key(0))).flops_per_token() for k in (1, 2)
    )
    return MoETopKProblem(
        make_model=student,
        sample=sample,
        losses=losses,
        eval_batch=task.eval_batch,
        overhead_flops=one - (two - one),
        flops_per_expert=two - one,
        moe_features=(in_features, hidden_features),
        moe_layers=1,
        tokens_per_batch=batch_size,
        info={"task": "teacher_student", "loss": "eval squared error"},
    )


def moe_language_model_problem(
    config: GPTConfig, train_data: jax.Array, eval_batch: Any, *, batch_size: int
) -> MoETopKProblem:
    """A byte-level :class:`SimpleGPT` whose every FFN is an MoE, one model per K.

    The model for K is ``config`` with ``experts_top_k = K``; the task loss is the next-byte
    cross-entropy, the balance loss the model's MoE auxiliary loss; ``(c₀, c₁)`` are
    :func:`jaxlab.nn.moe_transformer_flop_constants` (attention, router and head in ``c₀``).

    Args:
      config: a :class:`GPTConfig` with ``num_experts > 0`` (its ``experts_top_k`` is replaced).
      train_data: 1-D tokens the training windows are drawn from.
      eval_batch: ``(tokens, targets)`` of the evaluation.
      batch_size: windows per training step.

    Returns:
      a :class:`MoETopKProblem`.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.nn import GPTConfig, sample_batch
      >>> data = jnp.arange(200) % 256
      >>> gpt = GPTConfig(256, 32, 1, 2, max_len=8, multiple_of=16, num_experts=4)
      >>> problem = moe_language_model_problem(gpt, data, sample_batch(jax.random.key(0), data,
      ...                                      4, 8), batch_size=2)
      >>> problem.moe_layers, problem.tokens_per_batch
      (1, 16)
    """
    check_instance(config, GPTConfig, "config")
    batch_size = check_positive_int(batch_size, "batch_size")
    if config.num_experts < 1:
        raise ValueError(f"config.num_experts must be >= 1 (MoE FFNs), got {config.num_experts}")
    seq_len = config.max_len

    def sample(key):
        return sample_batch(key, train_data, batch_size, seq_len)

    def losses(model, batch):
        _, parts = model.loss_and_aux(*batch)
        return parts["cross_entropy"], parts["moe_aux"]

    gpt = dataclasses.replace(config, experts_top_k=1)
    c0, c1 = moe_transformer_flop_constants(gpt)
    return MoETopKProblem(
        make_model=lambda top_k, key: SimpleGPT(
            dataclasses.replace(config, experts_top_k=top_k), rngs=nnx.Rngs(key)
        ),
        sample=sample,
        losses=losses,
        eval_batch=eval_batch,
        overhead_flops=c0,
        flops_per_expert=c1,
        moe_features=(gpt.d_model, ffn_hidden_size(gpt)),  # every block's FFN
        moe_layers=gpt.num_layers,
        tokens_per_batch=batch_size * seq_len,  # [B, T] tokens per MoE call
        info={
            "task": "language_model",
            "loss": "eval cross-entropy (nats/byte)",
            "expert_hidden": ffn_hidden_size(gpt),
        },
    )


def moe_top_k_trainer(
    problem: MoETopKProblem, top_k: int, *, learning_rate: float, aux_weight: float
) -> tuple[Callable, Callable, Callable]:
    """``(init, train, evaluate)`` for top-``top_k``, all vmapped over seeds and jitted.

    ``init(keys)`` draws each seed's model and Adam state; ``train(carry, data_keys, start,
    num_steps)`` continues every seed's run by ``num_steps`` Adam steps on
    ``task + aux_weight · balance`` (:func:`jaxlab.nn.scan_train`; traced step counts, so one
    compilation serves every stop), step ``s`` on the batch of key ``fold_in(data_key, s)``, so
    stopping at intermediate step counts does not change the run; ``evaluate(carry)`` returns
    ``{"loss", "grad_norm", "balance_loss"}`` on the evaluation batch (the gradient of the task
    loss).

    Args:
      problem: a :class:`MoETopKProblem`.
      top_k: active experts per token.
      learning_rate: Adam's constant learning rate.
      aux_weight: ``α``, the balance loss's weight.

    Returns:
      ``(init, train, evaluate)``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.nn import moe_teacher_student_task
      >>> task = moe_teacher_student_task(jax.random.key(0), in_features=4, hidden_features=4,
      ...                                 num_experts=2, top_k=1, eval_samples=8)
      >>> problem = moe_teacher_student_problem(task, in_features=4, hidden_features=4,
      ...                                       num_experts=4, batch_size=8)
      >>> init, train, evaluate = moe_top_k_trainer(problem, 2, learning_rate=1e-2,
      ...                                           aux_weight=1e-2)
      >>> keys = jax.random.split(jax.random.key(1), 2)
      >>> carry = train(init(keys), keys, jnp.int32(0), jnp.int32(5))
      >>> evaluate(carry)["loss"].shape
      (2,)
    """
    check_instance(problem, MoETopKProblem, "problem")
    abstract = nnx.eval_shape(lambda: problem.make_model(top_k, jax.random.key(0)))
    graphdef, _, _ = nnx.split(abstract, nnx.Param, ...)
    tx = optax.adam(learning_rate)

    def init(key):
        _, params, rest = nnx.split(problem.make_model(top_k, key), nnx.Param, ...)
        return params, rest, tx.init(params)

    def objective(params, rest, batch):
        task, balance = problem.losses(nnx.merge(graphdef, params, rest), batch)
        return task + aux_weight * balance, (task, balance)

    def train(carry, data_key, start, num_steps):
        params, rest, opt_state = carry
        trained = scan_train(
            lambda p, batch: objective(p, rest, batch)[0],
            params,
            tx,
            lambda step: problem.sample(jax.random.fold_in(data_key, step)),
            num_steps,
            opt_state=opt_state,
            start_step=start,
        )
        return trained.params, rest, trained.opt_state

    def evaluate(carry):
        params, rest, _ = carry
        task_loss = lambda p: objective(p, rest, problem.eval_batch)[1]
        (task, balance), grads = jax.value_and_grad(task_loss, has_aux=True)(params)
        grad_norm = jnp.sqrt(sum(jnp.sum(g**2) for g in jax.tree.leaves(grads)))
        return {"loss": task, "grad_norm": grad_norm, "balance_loss": balance}

    return (
        jax.jit(jax.vmap(init)),
        jax.jit(jax.vmap(train, in_axes=(0, 0, None, None))),
        jax.jit(jax.vmap(evaluate)),
    )


def moe_compute_axis(
    problem: MoETopKProblem,
    top_k_grid: Sequence[int],
    budget: float,
    *,
    num_experts: int,
    gate: str = "softmax_topk",
    capacity_factors: Sequence[float] = (1.0, 1.25),
) -> dict[str, Any]:
    """Per K: the analytic ``cost(K)`` beside the forward FLOPs per token each dispatch executes.

    Executed cost = the account's part outside the MoE layers (attention and head; 0 for the
    teacher–student) + ``layers ·`` ``MixtureOfExperts.dispatch_flops_per_token`` at the
    training batch's ``N`` tokens, for dense (masked) dispatch and for sparse dispatch with
    capacity buffers of ``ceil(c·K·N/M)`` slots per expert at each ``c`` in
    ``capacity_factors``; ``steps`` is ``T_K = round(budget / cost)`` under that account.

    Args:
      problem: a :class:`MoETopKProblem`.
      top_k_grid: the K values.
      budget: the FLOP budget ``R`` (per token, times steps).
      num_experts: ``M``.
      gate: the MoE layers' gate.
      capacity_factors: the sparse dispatch's capacity factors.

    Returns:
      ``{"tokens_per_batch", "moe_layers", "budget_R", "capacity_factors", "by_top_k", "note"}``.

    Examples:
      >>> import jax
      >>> from jaxlab.nn import moe_teacher_student_task
      >>> task = moe_teacher_student_task(jax.random.key(0), in_features=4, hidden_features=4,
      ...                                 num_experts=2, top_k=1, eval_samples=8)
      >>> problem = moe_teacher_student_problem(task, in_features=4, hidden_features=4,
      ...                                       num_experts=4, batch_size=8)
      >>> axis = moe_compute_axis(problem, (1, 4), 1e4, num_experts=4)
      >>> axis["by_top_k"][4]["dense_masked"]["ratio_to_analytic"]
      1.0
    """
    check_instance(problem, MoETopKProblem, "problem")
    c0, c1 = problem.overhead_flops, problem.flops_per_expert
    layers, num_tokens = problem.moe_layers, problem.tokens_per_batch

    def account(flops, analytic):
        return {
            "flops_per_token": flops,
            "ratio_to_analytic": flops / analytic,
            "steps": max(1, round(budget / flops)),
        }

    by_top_k = {}
    for top_k in top_k_grid:
        analytic = c0 + c1 * top_k
        entry: dict[str, Any] = {"analytic": account(analytic, analytic)}
        for name, capacity_factor, dispatch in (
            ("dense_masked", None, "dense"),
            *((f"sparse_c{c}", c, "sparse") for c in capacity_factors),
        ):
            # Abstract (shapes only): the FLOP account needs the sizes, not weights.
            layer = nnx.eval_shape(
                lambda: MixtureOfExperts(
                    *problem.moe_features,
                    num_experts,
                    top_k,
                    gate=gate,
                    capacity_factor=capacity_factor,
                    dispatch=dispatch,
                    rngs=nnx.Rngs(0),
                )
            )
            outside = analytic - layers * layer.flops_per_token()
            executed = outside + layers * layer.dispatch_flops_per_token(num_tokens)
            entry[name] = account(executed, analytic)
            if dispatch == "sparse":
                capacity = layer.capacity(num_tokens)
                entry[name]["capacity"] = capacity
                entry[name]["experts_per_token"] = num_experts * capacity / num_tokens
        by_top_k[top_k] = entry
    return {
        "tokens_per_batch": num_tokens,
        "moe_layers": layers,
        "budget_R": budget,
        "capacity_factors": list(capacity_factors),
        "by_top_k": by_top_k,
        "note": "forward FLOPs per token; the runs execute dense_masked, the budget and the "
        "verdict use analytic; sparse_c* is what dispatch='sparse' would execute (reported, "
        "not gating)",
    }
