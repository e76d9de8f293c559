"""The Ray driver of test_ray_cluster.py (runs on the head's host h1).

    python cluster_driver.py fit|elastic --address 10.213.0.2:6379 --out result.json

fit: RayExecutor with 2 nodes x 2 workers fits a Keras model; the driver also fits the
single-process reference. elastic: ElasticRayExecutor on every slot of the cluster
(min_np 2), one worker killed. Writes what it saw as JSON for the test to check.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ray  # noqa: E402

import ray_train_fns as fns  # noqa: E402


def fit(args):
    from tf_hvd.ray import RayExecutor
    settings = RayExecutor.create_settings(timeout_s=120, verbose=True)
    executor = RayExecutor(settings, num_hosts=2, num_workers_per_host=args.per_host,
                           cpus_per_worker=1)
    t0 = time.time()
    executor.start()
    started = time.time() - t0
    try:
        ranks = executor.run(fns.keras_fit_rank, args=[args.passes, args.batch, args.epochs,
                                                        args.lr])
    finally:
        executor.shutdown()
    run_s = time.time() - t0 - started
    size = 2 * args.per_host
    reference = fns.keras_fit_reference(size, args.passes, args.batch, args.epochs, args.lr)
    return {"start_s": started, "run_s": run_s, "ranks": ranks, "reference": reference,
            "hosts": executor_hosts(ranks)}


def executor_hosts(ranks):
    return [r["host"] for r in ranks]


def elastic(args):
    from tf_hvd.ray import ElasticRayExecutor
    settings = ElasticRayExecutor.create_settings(min_np=2, max_np=4, elastic_timeout=120,
                                                  timeout_s=120)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()
    t0 = time.time()
    try:
        results = executor.run(lambda: fns.elastic_train(
            args.steps, args.victim, args.kill_at, args.lr, 0.3, args.regrow_at, args.marker))
    finally:
        executor.shutdown()
    return {"run_s": time.time() - t0, "results": results, "lost": executor.lost,
            "resets": executor.resets,
            "reference": fns.elastic_reference(args.steps, args.lr)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["fit", "elastic"])
    parser.add_argument("--address", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--per-host", type=int, default=2)
    parser.add_argument("--passes", type=int, default=6)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--victim", type=int, default=3)
    parser.add_argument("--kill-at", type=int, default=5)
    parser.add_argument("--regrow-at", type=int, default=None)
    parser.add_argument("--marker", default=None)
    args = parser.parse_args()
    ray.init(address=args.address, log_to_driver=False)
    try:
        result = fit(args) if args.mode == "fit" else elastic(args)
    finally:
        ray.shutdown()
    with open(args.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
