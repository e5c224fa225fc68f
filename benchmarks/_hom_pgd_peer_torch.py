"""Torch side of ``benchmarks/peers_hom_pgd.py``: the authors' INN and INN-PGD on given instances.

Run by ``peers_hom_pgd`` with the torch interpreter (``JAXLAB_TORCH_PYTHON``), never imported by
jaxlab. It imports the authors' code (assembled outside this repository, ``homopt_peer`` in the
``JAXLAB_HOMPGD_PEER`` folder), trains their conditional INN with their QCQP settings, runs
their INN-PGD from the latent centre on each exported instance, and measures the same things
jaxlab's side measures: the best feasible value reachable through the map (dense latent sample,
then INN-PGD from its best feasible points), the invertibility error and ε_inn.

Usage: ``python _hom_pgd_peer_torch.py PEER_DIR IN.npz OUT.json``.
"""

import json
import sys
import time

import numpy as np


def main(peer_dir: str, path_in: str, path_out: str) -> int:
    sys.path.insert(0, peer_dir)
    import homopt_peer as peer  # the authors' code
    import torch

    torch.set_num_threads(1)
    spec = np.load(path_in)
    n, m = int(spec["n"]), int(spec["m"])
    conditions = torch.tensor(spec["conditions"], dtype=torch.float32)
    objectives = torch.tensor(spec["objectives"], dtype=torch.float32)
    latents = torch.tensor(spec["latents"], dtype=torch.float32)
    model, data, train_s = peer.build_and_train(
        n, m, int(spec["steps"]), int(spec["batch_size"]), int(spec["seed"])
    )
    paras = dict(learning_rate=0.1, max_iterations=int(spec["hom_iters"]), lr_decay=0.999,
                 min_lr=1e-6, proj_eps=1e-5, proj_max_steps=10, step_size=0.5,
                 feasibility_eps=1e-5, momentum=0.0)  # fmt: skip
    refine = dict(paras, max_iterations=int(spec["refine_iters"]))
    num_refine, tol = int(spec["num_refine"]), 1e-5
    rows = []
    for i in range(conditions.shape[0]):
        c, q = conditions[i : i + 1], objectives[i : i + 1]
        start = time.perf_counter()
        _, _, value, violation = peer.inn_pgd(model, data, c, q, paras)
        seconds = time.perf_counter() - start
        with torch.no_grad():
            c_emb = model.embed_condition(c, 1)
            emb = c_emb.expand(latents.shape[0], -1)
            x = data.scale(c, model.forward_embedded(latents, emb))
            many = c.expand(latents.shape[0], *c.shape[1:])
            values = data.objective_xy(many, x, q).reshape(-1).numpy()
            violations = data.violations(many, x).reshape(-1).numpy()
            # round trip through the authors' own inverse (u = (x - lb) / half - 1 first)
            u = (x - torch.as_tensor(data.fixed_L)) / 5.0 - 1.0
            back = model.inverse_embedded(u[:512], emb[:512])
            inverse_error = float((back - latents[:512]).abs().amax(-1).max())
        feasible = violations <= tol
        reachable = float(values[feasible].min()) if feasible.any() else float("inf")
        if feasible.any():
            order = np.argsort(np.where(feasible, values, np.inf))[
                : min(num_refine, feasible.sum())
            ]
            # one batched run (their loop shares the adaptive step across a batch; bisection
            # stays per row)
            k = len(order)
            _, _, v, viol = peer.inn_pgd(
                model,
                data,
                c.expand(k, *c.shape[1:]),
                q.expand(k, -1),
                refine,
                initial_z=latents[torch.as_tensor(order)],
            )
            ok = viol.numpy() <= tol
            if ok.any():
                reachable = min(reachable, float(v.numpy()[ok].min()))
        rows.append(dict(value=float(value.max()), violation=float(violation.max()),
                         reachable=reachable, inverse_error=inverse_error,
                         eps_inn=float(np.mean(~feasible)), seconds=seconds))  # fmt: skip
    report = dict(train_time_s=train_s, seconds_per_step=train_s / int(spec["steps"]), rows=rows)
    with open(path_out, "w") as f:
        json.dump(report, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
