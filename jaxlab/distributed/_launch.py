"""Runs a function in several fresh local JAX processes joined by ``jax.distributed``.

Multi-controller JAX on one machine: each child process sets its CPU device count and gloo CPU
collectives before any JAX operation, joins the others through ``jax.distributed.initialize``
with a coordinator on a free loopback port, runs the function and sends its (pickled) return
value back through a pipe. Failures of any kind (an exception, a dead process, a hang) end every
child and raise in the parent within the timeout.
"""

from __future__ import annotations

import math
import multiprocessing
import multiprocessing.connection
import os
import pickle
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jaxlab._src import validation

__all__ = ["launch"]

# Seconds a child that already sent its result gets to exit by itself before it is killed.
_EXIT_GRACE_S = 10.0
# Seconds between a child's checks that its parent is still alive.
_ORPHAN_POLL_S = 1.0


def _free_port() -> int:
    """A loopback TCP port that was free a moment ago (the OS picks it when binding port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _exit_when_orphaned(parent_pid: int) -> None:
    """Ends this child once its parent has died, so no child outlives a killed parent."""
    while os.getppid() == parent_pid:
        time.sleep(_ORPHAN_POLL_S)
    os._exit(1)


def _child_main(
    conn: multiprocessing.connection.Connection,
    process_id: int,
    num_processes: int,
    port: int,
    local_device_count: int,
    jax_config: tuple[tuple[str, Any], ...],
    initialization_timeout: int,
    payload: bytes,
    parent_pid: int,
) -> None:
    """Body of one launched process: configure JAX, join the others, run, report."""
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
    try:
        import jax

        # All of this must precede the first JAX operation (which initialises the backend).
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_num_cpu_devices", local_device_count)
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        for name, value in jax_config:
            jax.config.update(name, value)
        jax.distributed.initialize(
            coordinator_address=f"127.0.0.1:{port}",
            num_processes=num_processes,
            process_id=process_id,
            coordinator_bind_address=f"127.0.0.1:{port}",
            initialization_timeout=initialization_timeout,
        )
        # Unpickling imports fn's module; doing it after initialize keeps module-level JAX work
        # there from initialising the backend too early.
        fn, args = pickle.loads(payload)
        value = fn(*args)
        try:
            result = pickle.dumps(value)
        except Exception as error:
            raise TypeError(
                f"the return value of fn in process {process_id} cannot be pickled "
                f"({type(value).__name__}); return numpy arrays or plain Python values"
            ) from error
        jax.distributed.shutdown()
    except BaseException:
        try:
            conn.send(("error", traceback.format_exc()))
            conn.close()
        except OSError:  # the parent is gone; nobody is left to tell
            pass
        sys.stdout.flush()
        sys.stderr.flush()
        # Skip interpreter teardown: jax's atexit shutdown would wait on the other processes.
        os._exit(1)
    conn.send(("ok", result))
    conn.close()


def _check_fn_picklable(fn: Callable[..., Any]) -> None:
    validation.check_callable(fn, "fn")
    main = sys.modules.get("__main__")
    if getattr(fn, "__module__", None) == "__main__" and not getattr(main, "__file__", None):
        raise TypeError(
            f"fn {getattr(fn, '__qualname__', fn)!r} is defined in an interactive __main__; the "
            "spawned processes cannot import it: define fn at module level in an importable module"
        )
    try:
        pickle.dumps(fn)
    except Exception as error:
        raise TypeError(
            f"fn must be a picklable module-level function (processes are started with 'spawn'), "
            f"got {fn!r}: {error}"
        ) from None


def _stop(processes: Sequence[multiprocessing.process.BaseProcess]) -> None:
    """Kills every child still running and reaps them all.

    SIGKILL rather than SIGTERM: once JAX's distributed runtime is up it installs a SIGTERM
    handler (its preemption notifier) that records the signal and keeps running.
    """
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(5.0)  # SIGKILL cannot be caught; this only waits for the OS to reap


def _receive(conn: multiprocessing.connection.Connection) -> tuple[str, Any] | None:
    """The child's message if one is waiting, else None (also for a closed, empty pipe)."""
    try:
        if conn.poll(0):
            return conn.recv()
    except (EOFError, OSError):
        pass
    return None


def launch(
    fn: Callable[..., Any],
    num_processes: int,
    *,
    args: Sequence[Any] = (),
    timeout: float = 120.0,
    local_device_count: int = 1,
    jax_config: Mapping[str, Any] | None = None,
) -> list[Any]:
    """Runs ``fn(*args)`` in ``num_processes`` fresh local processes joined by ``jax.distributed``.

    Process ``i`` (``jax.process_index() == i``) starts with the ``spawn`` method, configures
    JAX on CPU with ``local_device_count`` devices and gloo collectives, calls
    ``jax.distributed.initialize(coordinator_address="127.0.0.1:<free port>",
    num_processes=num_processes, process_id=i)`` and then ``fn(*args)``. Inside ``fn``,
    ``jax.devices()`` lists all ``num_processes * local_device_count`` devices, so a mesh over
    them (:func:`jaxlab.distributed.worker_mesh`) spans every process and ``jax.shard_map``
    collectives cross process boundaries, exactly as on a multi-host cluster.

    ``fn`` and ``args`` must be picklable (a module-level function in an importable module; a
    script's ``__main__`` works if its top level does no JAX work and its entry point sits under
    ``if __name__ == "__main__":``). Return values travel back pickled: return numpy arrays
    (e.g. :func:`jaxlab.distributed.global_to_process_local`) or plain Python values. The
    children always run on CPU whatever accelerator the parent has.

    Args:
      fn: module-level function to run in every process.
      num_processes: number of processes, ``>= 1``.
      args: positional arguments passed to ``fn`` in every process.
      timeout: seconds, ``> 0`` and finite, for the whole launch (start-up included); past it
        every child is ended and ``TimeoutError`` raised.
      local_device_count: CPU devices per process, ``>= 1``.
      jax_config: extra ``jax.config.update(name, value)`` settings applied in every child
        before ``jax.distributed.initialize`` (e.g. ``{"jax_enable_x64": True}``).

    Returns:
      The return values of ``fn``, in process order.

    Raises:
      TypeError: ``fn`` or ``args`` cannot be pickled, or an argument has the wrong type.
      ValueError: ``num_processes < 1``, ``timeout`` not in ``(0, inf)`` or
        ``local_device_count < 1``.
      RuntimeError: a child raised (the message names the process and carries its traceback) or
        exited without returning (the message names the process and its exit code).
      TimeoutError: the processes did not all finish within ``timeout`` seconds.

    Examples:
      >>> import math
      >>> from jaxlab.distributed import launch
      >>> launch(math.factorial, 1, args=(5,))
      [120]

      Two processes, each one worker of a data-parallel SGD step over a mesh axis spanning
      both (``worker`` must live at module level in an importable file)::

        import jax, numpy as np, optax
        from jaxlab.distributed import (
            global_to_process_local, launch, process_local_to_global, run_sharded, worker_mesh)

        def sgd_step(params, grad):
            grad = jax.lax.pmean(grad, "workers")       # averaged over both processes
            tx = optax.sgd(0.1)
            updates, _ = tx.update(grad, tx.init(params), params)
            return optax.apply_updates(params, updates)

        def worker():
            mesh = worker_mesh()                          # 2 devices, one per process
            rank = jax.process_index()
            params = process_local_to_global(np.ones((1, 3)), mesh, "workers")
            grad = process_local_to_global(np.full((1, 3), rank + 1.0), mesh, "workers")
            return global_to_process_local(run_sharded(sgd_step, mesh, "workers", params, grad))

      >>> launch(worker, 2)  # doctest: +SKIP
      [array([[0.85, 0.85, 0.85]], dtype=float32), array([[0.85, 0.85, 0.85]], dtype=float32)]

    References:
      JAX documentation, "Introduction to multi-controller JAX" (``jax.distributed``).
    """
    _check_fn_picklable(fn)
    if isinstance(args, str | bytes) or not isinstance(args, Sequence):
        raise TypeError(f"args must be a sequence (tuple) of arguments, got {args!r}")
    args = tuple(args)
    try:
        payload = pickle.dumps((fn, args))
    except Exception as error:
        raise TypeError(f"args must be picklable to reach the spawned processes: {error}") from None
    num_processes = validation.check_int(num_processes, "num_processes", minimum=1)
    validation.check_positive(timeout, "timeout")  # seconds; finite (inf and nan rejected)
    local_device_count = validation.check_int(local_device_count, "local_device_count", minimum=1)
    jax_config = dict(jax_config or {})
    if not all(isinstance(name, str) for name in jax_config):
        raise TypeError(f"jax_config keys must be JAX option names, got {list(jax_config)!r}")

    context = multiprocessing.get_context("spawn")
    port = _free_port()
    start = time.monotonic()
    deadline = start + float(timeout)
    processes: list[multiprocessing.process.BaseProcess] = []
    connections: list[multiprocessing.connection.Connection] = []
    try:
        for process_id in range(num_processes):
            receiver, sender = context.Pipe(duplex=False)
            process = context.Process(
                target=_child_main,
                args=(
                    sender,
                    process_id,
                    num_processes,
                    port,
                    local_device_count,
                    tuple(jax_config.items()),
                    max(1, math.ceil(timeout)),
                    payload,
                    os.getpid(),
                ),
                name=f"jaxlab-launch-{process_id}",
            )
            process.start()
            sender.close()  # the child holds the only writer, so its death closes the pipe
            processes.append(process)
            connections.append(receiver)

        results: list[Any] = [None] * num_processes
        pending = set(range(num_processes))
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"launch: process(es) {sorted(pending)} of {num_processes} did not finish "
                    f"within timeout={timeout} s; all processes were killed"
                )
            waitables = [connections[i] for i in pending] + [processes[i].sentinel for i in pending]
            ready = set(multiprocessing.connection.wait(waitables, timeout=remaining))
            failures = []
            for i in sorted(pending):
                if connections[i] not in ready and processes[i].sentinel not in ready:
                    continue
                message = _receive(connections[i])
                if message is None:
                    if processes[i].is_alive():
                        continue
                    processes[i].join()
                    failures.append(
                        f"process {i} exited with code {processes[i].exitcode} before returning "
                        "a result"
                    )
                    continue
                status, body = message
                if status == "error":
                    failures.append(f"process {i} raised:\n{body}")
                    continue
                results[i] = pickle.loads(body)
                pending.discard(i)
            if failures:
                # Other processes may have failed at the same moment; report what is there too.
                for i in sorted(pending):
                    message = _receive(connections[i])
                    if message is not None and message[0] == "error":
                        text = f"process {i} raised:\n{message[1]}"
                        if text not in failures:
                            failures.append(text)
                raise RuntimeError(
                    f"launch: {len(failures)} of {num_processes} process(es) failed; all "
                    "processes were killed.\n" + "\n".join(failures)
                )
        # Every result is in and children exit right after sending: let them end on their own
        # (flushing their output) before `finally` kills any straggler.
        exit_deadline = min(deadline, time.monotonic() + _EXIT_GRACE_S)
        for process in processes:
            process.join(max(0.0, exit_deadline - time.monotonic()))
        return results
    finally:
        _stop(processes)
        for connection in connections:
            connection.close()
