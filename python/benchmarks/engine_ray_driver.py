"""The Ray contender of the engines benchmark: one RayExecutor job on a running cluster.

    python engine_ray_driver.py --address 10.213.0.2:6379 --hosts 2 --per-host 1 \\
        --config '{...}' --launch-t 1700000000.0

Connects to the cluster, starts a RayExecutor (``--hosts`` nodes x ``--per-host``
workers, one CPU each), runs engine_fit.fit_rank on every rank, shuts the executor down,
and prints each rank's record as an ``ENGINE_FIT`` line (like the script does under
tfhvdrun and srun) plus one ``ENGINE_RAY`` line with the driver's own timings.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import engine_fit  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--address", required=True)
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--per-host", type=int, default=1)
    p.add_argument("--config", required=True)
    p.add_argument("--launch-t", type=float, default=None)
    p.add_argument("--timeout", type=float, default=300.0)
    args = p.parse_args(argv)
    import ray
    from tf_hvd.ray import RayExecutor
    t0 = time.time()
    ray.init(address=args.address, log_to_driver=False)
    connected = time.time()
    settings = RayExecutor.create_settings(timeout_s=args.timeout)
    executor = RayExecutor(settings, num_hosts=args.hosts, num_workers_per_host=args.per_host,
                           cpus_per_worker=1)
    executor.start()
    started = time.time()
    try:
        ranks = executor.run(engine_fit.fit_rank, args=[json.loads(args.config), args.launch_t])
    finally:
        executor.shutdown()
    for rec in ranks:
        sys.stdout.write(engine_fit.MARK + json.dumps(rec) + "\n")
    sys.stdout.write("ENGINE_RAY " + json.dumps({
        "connect_s": connected - t0, "executor_start_s": started - connected,
        "run_and_shutdown_s": time.time() - started}) + "\n")
    sys.stdout.flush()
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
