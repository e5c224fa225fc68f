"""Model steps shared by the benchmarks: one jitted SimpleGPT training step under an optimizer."""

from __future__ import annotations

import jax
import optax
from flax import nnx

from benchmarks._timing import compiled_and_compile_time
from jaxlab.nn import GPTConfig, SimpleGPT, language_model_loss

__all__ = ["LanguageModelStep"]


class LanguageModelStep:
    """A :class:`jaxlab.nn.SimpleGPT` training step (forward, backward, ``tx``), jitted once.

    Each call runs ``steps`` steps on the fixed batch, continuing from the state the previous
    call left (a zero-argument callable for :func:`benchmarks._timing.interleaved_times`).

    Args:
      config: the model's :class:`jaxlab.nn.GPTConfig` (weights from ``nnx.Rngs(0)``).
      tx: the optimizer.
      batch: ``(tokens, targets)``.
      steps: steps per call.
      donate: donate the params and the optimizer state to the step, as an efficient training
        loop does.

    Attributes:
      params, opt_state: the current state.
      num_parameters: the model's parameter count.
      compile_time_s: seconds to lower and compile the step.
    """

    def __init__(
        self,
        config: GPTConfig,
        tx: optax.GradientTransformation,
        batch: tuple[jax.Array, jax.Array],
        *,
        steps: int = 1,
        donate: bool = False,
    ):
        graphdef, params = nnx.split(SimpleGPT(config, rngs=nnx.Rngs(0)), nnx.Param)

        def step(params, opt_state, tokens, targets):
            loss, grads = jax.value_and_grad(
                lambda p: language_model_loss(nnx.merge(graphdef, p), tokens, targets)
            )(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss

        self.params, self.opt_state = params, tx.init(params)
        self.batch, self.steps = batch, steps
        self.num_parameters = sum(x.size for x in jax.tree.leaves(params))
        self.step, self.compile_time_s = compiled_and_compile_time(
            jax.jit(step, donate_argnums=(0, 1) if donate else ()),
            self.params,
            self.opt_state,
            *batch,
        )

    def __call__(self):
        for _ in range(self.steps):
            self.params, self.opt_state, loss = self.step(self.params, self.opt_state, *self.batch)
        return loss
