"""The authors' RAMBO sampler on given standardized data (the torch side of ``peers_rambo``).

Run by :mod:`benchmarks.peers_rambo` with the torch interpreter (``JAXLAB_TORCH_PYTHON``), never
imported by jaxlab (it needs torch and the authors' checkout, ``JAXLAB_RAMBO_PEER``)::

    python _rambo_peer_torch.py CHECKOUT DATA.npz OUT.npz

``DATA.npz`` holds ``xs``, ``ys`` (already standardized by jaxlab), ``alpha``, ``sweeps``,
``optim_every``, ``seed``. The loop is the authors' ``DPMGPR.fit`` step for step (k-means start,
a permutation sweep of ``_sample_cluster_assignment``, ``_cleanup_empty_clusters``, 30 Adam
steps of ``_optimize_hyperparameters`` every ``optim_every`` sweeps, ``_total_log_likelihood``
every sweep), calling their methods; only the standardization is skipped, because ``fit``
standardizes with the unbiased spread (``torch.std``) while jaxlab uses the population one, and
the comparison needs both samplers on the same numbers. Writes each sweep's assignments
(relabelled by their cleanup, so only the partition is meaningful) and its wall time.
"""

from __future__ import annotations

import sys
import time

import numpy as np


def main(checkout: str, data_path: str, out_path: str) -> None:
    sys.path.insert(0, checkout)
    import torch
    from models.rambo import DPMGPR  # the authors' code

    data = np.load(data_path)
    seed = int(data["seed"])
    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.set_num_threads(1)
    model = DPMGPR(alpha=float(data["alpha"]), device="cpu")
    model.X = torch.tensor(data["xs"], dtype=torch.float32)
    model.y = torch.tensor(data["ys"], dtype=torch.float32)
    model.n = len(model.y)
    model._initialize_clusters()
    sweeps, every = int(data["sweeps"]), int(data["optim_every"])
    assignments = np.zeros((sweeps, model.n), np.int64)
    seconds = np.zeros(sweeps)
    for iteration in range(sweeps):
        start = time.perf_counter()
        perm = torch.randperm(model.n)
        for i in perm:
            model.z[i.item()] = model._sample_cluster_assignment(i.item())
        model._cleanup_empty_clusters()
        if (iteration + 1) % every == 0:
            for k in range(model.K):
                model._optimize_hyperparameters(k, n_steps=30, lr=0.01)
        model._total_log_likelihood()
        seconds[iteration] = time.perf_counter() - start
        assignments[iteration] = model.z.numpy()
        if (iteration + 1) % 50 == 0:
            print(f"authors' sampler: sweep {iteration + 1}/{sweeps}, K={model.K}", flush=True)
    np.savez(out_path, assignments=assignments, seconds=seconds, torch=torch.__version__)


if __name__ == "__main__":
    main(*sys.argv[1:4])
