"""The Ray driver of test_ray_cluster.py (runs on the head's host h1).

    python cluster_driver.py fit|elastic --address 10.213.0.2:6379 --out result.json

fit: RayExecutor with 2 nodes x 2 workers fits a Keras model; the driver also fits the
single-process reference. elastic: ElasticRayExecutor on every slot of the cluster
(min_np 2), one worker killed. elastic-epochs: ElasticRayExecutor runs Horovod's elastic
test loop (epoch records in log.jsonl next to --out) while the test changes the nodes. tensorflow-trainer: Ray Train's own TensorflowTrainer runs
a tf_hvd Keras fit (hvd.init() reads the TF_CONFIG Ray sets). Writes what it saw as JSON for the test to check.
"""

import argparse
import json
import os
import secrets
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


def elastic_epochs(args):
    """ElasticRayExecutor (min_np 2, max_np 4) runs ray_train_fns.elastic_epochs (Horovod's
    elastic test loop); the test adds and kills nodes and workers around it. A failure of
    ``run`` is recorded, not raised."""
    from tf_hvd.ray import ElasticRayExecutor
    settings = ElasticRayExecutor.create_settings(min_np=2, max_np=4, elastic_timeout=120,
                                                  timeout_s=120)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()
    t0 = time.time()
    job_dir = os.path.dirname(args.out)
    error, results = None, None
    try:
        results = executor.run(lambda: fns.elastic_epochs(
            os.path.join(job_dir, "log.jsonl"), job_dir, epochs=args.epochs,
            slow_from=args.slow_from, slow_start=args.slow_start, grow_at=args.grow_at))
    except Exception as e:  # noqa: BLE001 - the test reads the failure
        error = "%s: %s" % (type(e).__name__, e)
    finally:
        executor.shutdown()
    return {"run_s": time.time() - t0, "results": results, "error": error,
            "lost": executor.lost}


def tensorflow_trainer(args):
    """Ray Train's TensorflowTrainer (MultiWorkerMirroredStrategy's launcher) runs a tf_hvd
    Keras fit; the worker processes write their results into ``--out``'s folder."""
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.tensorflow import TensorflowTrainer
    out_dir = os.path.join(os.path.dirname(args.out), "ranks")
    os.makedirs(out_dir, exist_ok=True)
    config = {"passes": args.passes, "batch": args.batch, "epochs": args.epochs, "lr": args.lr,
              "out_dir": out_dir, "victim": args.victim if args.marker else None,
              "marker": args.marker}
    trainer = TensorflowTrainer(
        fns.tensorflow_trainer_loop, train_loop_config=config,
        scaling_config=ScalingConfig(num_workers=args.workers),
        run_config=RunConfig(name="tf_hvd", storage_path=os.path.dirname(args.out),
                             failure_config=FailureConfig(max_failures=args.max_failures)))
    t0 = time.time()
    error = None
    try:
        trainer.fit()
    except Exception as e:  # noqa: BLE001 - the test reads Ray's failure
        error = "%s: %s" % (type(e).__name__, e)
    ranks = []
    for name in sorted(os.listdir(out_dir)):
        with open(os.path.join(out_dir, name)) as f:
            ranks.append(json.load(f))
    ranks.sort(key=lambda r: r["rank"])
    return {"run_s": time.time() - t0, "error": error, "ranks": ranks,
            "reference": fns.keras_fit_reference(args.workers, args.passes, args.batch,
                                                 args.epochs, args.lr)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["fit", "elastic", "elastic-epochs",
                                         "tensorflow-trainer"])
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
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--slow-from", type=int, default=None)
    parser.add_argument("--slow-start", type=float, default=0.0)
    parser.add_argument("--grow-at", type=int, default=None)
    parser.add_argument("--max-failures", type=int, default=0)
    parser.add_argument("--secret", action="store_true",
                        help="hand the workers a fresh rendezvous secret in the job's "
                             "runtime_env (how a Ray user gives every worker the same one)")
    args = parser.parse_args()
    runtime_env = None
    if args.secret:
        runtime_env = {"env_vars": {"HOROVOD_GLOO_RENDEZVOUS_SECRET": secrets.token_hex(32)}}
    ray.init(address=args.address, log_to_driver=args.mode == "tensorflow-trainer",
             runtime_env=runtime_env)
    try:
        result = {"fit": fit, "elastic": elastic, "elastic-epochs": elastic_epochs,
                  "tensorflow-trainer": tensorflow_trainer}[args.mode](args)
    finally:
        ray.shutdown()
    with open(args.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
