"""optax's OWN contrib test battery (``optax/contrib/_common_test.py``) run on jaxlab's transforms.

The file is read from the installed optax at test time (never copied here). Its
``@parameterized`` decorators capture the optimizer lists when the class body runs and its
factory looks names up in optax, so the source is parsed, the top-level definitions of the lists
and of ``_get_opt_factory``/``_wrap_opt`` are removed from the syntax tree (each must be found:
an optax that renames them fails here instead of silently testing optax's optimizers), and the
rest is executed in a fresh module whose namespace already holds jaxlab's lists and factory.
Its ``ContribTest`` (an absltest/unittest class) is collected by pytest.

Each case below sets ``opt_name`` to a label of ours, which never matches the names optax's test
special-cases (``momo``, ``sgd``, ``sophia``, ...); ``_get_opt_factory`` maps the label to the
PUBLIC jaxlab factory, and ``opt_kwargs`` is exactly what a user passes (a compressor object,
an inner optax transform), so ``inject_hyperparams(factory)(**opt_kwargs)`` is the natural call.
"""

import ast
import importlib.util
import pathlib
import types

import optax
import pytest

from jaxlab import optim

_COMMON_TEST = "contrib/_common_test.py"


def _common_test_path() -> pathlib.Path | None:
    spec = importlib.util.find_spec("optax")
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = pathlib.Path(location) / _COMMON_TEST
        if path.is_file():
            return path
    return None


# label -> (public jaxlab factory, opt_kwargs). Learning rates: one per transform for all four
# targets, small enough for Rosenbrock (curvature ~1000 at the optimum, so plain GD needs
# lr < 2e-3) and large enough to travel from the start within optax's 30 000 steps.
# DeVA's matrix leaves use no weight decay: decoupled decay moves the minimiser off optax's target.
_CASES: dict[str, tuple] = {
    "error_feedback_identity": (
        optim.error_feedback,
        {"learning_rate": 1e-3, "compressor": optim.identity()},
    ),
    "error_feedback_top_k": (
        optim.error_feedback,
        {"learning_rate": 1e-3, "compressor": optim.top_k(ratio=0.5)},
    ),
    "error_feedback_21_identity": (
        optim.error_feedback_21,
        {"learning_rate": 1e-3, "compressor": optim.identity()},
    ),
    "error_feedback_21_top_k": (
        optim.error_feedback_21,
        {"learning_rate": 1e-3, "compressor": optim.top_k(ratio=0.5)},
    ),
    "compressed_gradient_descent_top_k": (
        optim.compressed_gradient_descent,
        {"learning_rate": 1e-3, "compressor": optim.top_k(ratio=0.5)},
    ),
    "deva": (optim.deva, {"learning_rate": 1e-3, "weight_decay": 0.0}),
    "deva_vector": (optim.deva_vector, {"learning_rate": 1e-3}),
    "delayed_adamw": (optim.delayed, {"inner": optax.adamw(1e-3)}),
    "delayed_adamw_update_extrapolation": (
        optim.delayed,
        {"inner": optax.adamw(1e-3), "correction": "update_extrapolation", "extrapolation": 0.5},
    ),
    "delayed_muon": (optim.delayed, {"inner": optax.contrib.muon(1e-3)}),
    "delayed_muon_error_buffer": (
        optim.delayed,
        {
            "inner": optax.contrib.muon(1e-3),
            "correction": "error_buffer",
            "extrapolation": 0.5,
            "buffer_decay": 0.5,
        },
    ),
}
# Not in the list: scale_by_soap and scale_by_deva_matrix take 2-D leaves only (optax's targets
# are vectors) and end in no learning rate; they run in tests/batteries.py behind a partition.
# Nor harm / harm_sgd (issue 21): their update needs the head's activations as extra args
# (features=, logit_grads=) and optax's tests pass no extra arguments; the jaxlab battery's
# harm_sgd_head entry supplies them (test_harm_is_left_out_because_its_update_needs_extra_args).

_OPTIMIZERS = tuple(
    {"opt_name": label, "opt_kwargs": kwargs, "wrapper_name": None, "wrapper_kwargs": None}
    for label, (_, kwargs) in _CASES.items()
)


def _get_opt_factory(opt_name):
    """The public jaxlab factory of a case label (replaces optax's lookup in optax)."""
    return _CASES[opt_name][0]


def _wrap_opt(opt, wrapper_name, wrapper_kwargs):
    raise AssertionError(f"no jaxlab case uses an optax wrapper, got {wrapper_name!r}")


# Top-level names of optax's file that are replaced (assignments, the loop that fills the
# wrapper fields, and the factory functions): all must be present in the file.
_REPLACED = {
    "_MAIN_OPTIMIZERS_UNDER_TEST": _OPTIMIZERS,
    "_BASE_OPTIMIZERS": (),
    "_OTHER_OPTIMIZERS_UNDER_TEST": (),
    "_ALL_OPTIMIZERS_UNDER_TEST": _OPTIMIZERS,
    "_get_opt_factory": _get_opt_factory,
    "_wrap_opt": _wrap_opt,
}


def _assigned_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AugAssign | ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, ast.FunctionDef):
        return {node.name}
    if isinstance(node, ast.For) and isinstance(node.iter, ast.Name):
        return {node.iter.id}  # `for optimizer in _MAIN_OPTIMIZERS_UNDER_TEST: ...`
    return set()


def _is_main_guard(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    )


def _load_battery(path: pathlib.Path) -> types.ModuleType:
    tree = ast.parse(path.read_text(), filename=str(path))
    kept, removed = [], set()
    for node in tree.body:
        names = _assigned_names(node)
        if names & set(_REPLACED):
            removed |= names & set(_REPLACED)
        elif not _is_main_guard(node):
            kept.append(node)
    missing = set(_REPLACED) - removed
    if missing:
        raise RuntimeError(
            f"{path} no longer defines {sorted(missing)} at top level: update "
            "tests/test_optax_contrib.py for this optax version"
        )
    tree.body = kept
    module = types.ModuleType("optax_contrib_common_test_on_jaxlab")
    module.__file__ = str(path)
    module.__dict__.update(_REPLACED)
    exec(compile(tree, str(path), "exec"), module.__dict__)  # noqa: S102 - optax's own test file
    return module


_PATH = _common_test_path()
if _PATH is None:  # a wheel without its tests: nothing to run, say so
    pytest.skip(f"the installed optax has no {_COMMON_TEST}", allow_module_level=True)
_BATTERY = _load_battery(_PATH)


class TestOptaxContribBatteryOnJaxlab(_BATTERY.ContribTest):
    """optax's ``ContribTest`` with jaxlab's optimizer list (see the module docstring)."""


def test_harm_is_left_out_because_its_update_needs_extra_args():
    """harm / harm_sgd are not in the list above: optax's battery calls ``update(g, s, p)`` with
    no extra arguments, and the harm correction cannot run without the head's activations (the
    jaxlab battery's ``harm_sgd_head`` entry supplies them). Checked, not assumed: the plain call
    optax would make raises the documented error, and the same call with the extras runs."""
    import jax.numpy as jnp

    assert all(factory not in (optim.harm, optim.harm_sgd) for factory, _ in _CASES.values())
    tx = optim.harm_sgd(0.1, kernel_path=("w",))
    params = {"w": jnp.zeros((1, 2))}
    grads = {"w": jnp.ones((1, 2))}
    with pytest.raises(TypeError, match="features=h .* and logit_grads="):
        tx.update(grads, tx.init(params), params)
    updates, _ = tx.update(grads, tx.init(params), params, features=jnp.ones((1, 1)),
                           logit_grads=jnp.ones((1, 2)))  # fmt: skip
    assert updates["w"].shape == (1, 2)
