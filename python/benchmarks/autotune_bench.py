"""Autotune against the defaults on the fusion workload: steps per second.

    python python/benchmarks/autotune_bench.py [--np 2] [--reps 3] [--steps 40]

One step = 200 tensors of 16 KiB plus 4 of 4 MiB (float32), one hvd.allreduce
per tensor in one tf.function (compare.py's fusion workload), summed over the
ranks and checked. Each repetition runs two jobs under tfhvdrun, alternating
their order: the defaults, and HOROVOD_AUTOTUNE=1 (Horovod's default sample
settings), which first trains until the tuner has kept its best values and is
then timed over the same number of steps. Reports both rates (median and
spread over the repetitions), the values the tuner kept, and how long tuning
took. Writes <results>/autotune.json.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from lib import formats, jsonio, paths, tables

SMALL = (200, 16 * formats.KiB)
LARGE = (4, 4 * formats.MiB)


# -- one rank ------------------------------------------------------------------------------

def worker(args):
    import numpy as np
    import tensorflow as tf

    import tf_hvd as hvd
    from tf_hvd._library import lib as _hvd

    hvd.init()
    n, r = hvd.size(), hvd.rank()
    sizes = [SMALL[1] // 4] * SMALL[0] + [LARGE[1] // 4] * LARGE[0]
    inputs = [tf.fill([s], float(r + 1 + i % 7)) for i, s in enumerate(sizes)]
    want = [float(n * (n + 1) // 2 + n * (i % 7)) for i in range(len(sizes))]

    @tf.function
    def step(tensors):
        return [hvd.allreduce(t, op=hvd.Sum, name="g%d" % i) for i, t in enumerate(tensors)]

    def check(outs):
        for i in (0, len(outs) // 2, len(outs) - 1):
            if not np.all(outs[i].numpy() == want[i]):
                raise AssertionError("tensor %d: wrong sum" % i)

    autotune = os.environ.get("HOROVOD_AUTOTUNE") == "1"
    max_samples = int(os.environ.get("HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "20"))
    t0 = time.perf_counter()
    tuning_steps = 0
    for _ in range(5):  # compile and warm up
        check(step(inputs))
    if autotune:
        while True:
            check(step(inputs))
            tuning_steps += 1
            done = float(r == 0 and len(_hvd.autotune_history()) >= max_samples)
            if tuning_steps >= args.max_tuning_steps:
                done = 1.0
            if hvd.allreduce(tf.constant([done]), op=hvd.Max, name="tuned").numpy()[0]:
                break
    tuning_s = time.perf_counter() - t0
    start = time.perf_counter()
    for _ in range(args.steps):
        outs = step(inputs)
    check(outs)
    seconds = time.perf_counter() - start
    history = _hvd.autotune_history()
    if r == 0:
        with open(args.out, "w") as f:
            json.dump({"steps_per_s": args.steps / seconds, "tuning_s": tuning_s,
                       "tuning_steps": tuning_steps, "switches": len(history),
                       "final": history[-1] if history else None}, f)
    hvd.shutdown()


# -- the driver ----------------------------------------------------------------------------

def run_job(np_, steps, autotune, max_tuning_steps, log_path):
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    for k in list(env):
        if k.startswith("HOROVOD_AUTOTUNE"):
            del env[k]
    if autotune:
        env["HOROVOD_AUTOTUNE"] = "1"
        env["HOROVOD_AUTOTUNE_LOG"] = log_path
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [sys.executable, "-m", "tf_hvd.runner", "-np", str(np_), sys.executable,
           os.path.abspath(__file__), "--worker", "--steps", str(steps), "--out", out,
           "--max-tuning-steps", str(max_tuning_steps)]
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError("job failed (%d):\n%s" % (proc.returncode, proc.stdout[-4000:]))
    result = jsonio.read_json(out)
    os.unlink(out)
    return result


def summarize_runs(runs):
    """Median and spread of each mode's rates, the values the tuner kept, the ratio."""
    summary = {}
    for mode, results in runs.items():
        rates = [r["steps_per_s"] for r in results]
        summary[mode] = {"median_steps_per_s": statistics.median(rates), "min": min(rates),
                         "max": max(rates), "n": len(rates)}
    summary["autotune"]["kept"] = [
        {"fusion_threshold_mib": r["final"][1] / formats.MiB, "cycle_time_ms": r["final"][2],
         "response_cache": r["final"][3], "tuning_s": r["tuning_s"]}
        for r in runs["autotune"] if r["final"]]
    summary["ratio_autotune_over_defaults"] = (summary["autotune"]["median_steps_per_s"] /
                                               summary["defaults"]["median_steps_per_s"])
    return summary


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--steps", type=int, default=40, help="timed steps per job")
    p.add_argument("--max-tuning-steps", type=int, default=2000)
    p.add_argument("--results", default=paths.DEFAULT_RESULTS_DIR)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    header = jsonio.run_header("autotune", args)
    runs = {"defaults": [], "autotune": []}
    logs = []
    for rep in range(args.reps):
        order = ("defaults", "autotune") if rep % 2 == 0 else ("autotune", "defaults")
        for mode in order:
            log_path = os.path.join(tempfile.gettempdir(), "autotune_bench_%d.csv" % rep)
            res = run_job(args.np, args.steps, mode == "autotune", args.max_tuning_steps,
                          log_path)
            if mode == "autotune":
                with open(log_path) as f:
                    res["log"] = f.read().splitlines()
                os.unlink(log_path)
            runs[mode].append(res)
            tables.log("rep %d %-8s %.2f steps/s%s" % (
                rep, mode, res["steps_per_s"],
                "  tuned in %.1fs: %s" % (res["tuning_s"], res["final"])
                if mode == "autotune" else ""))
    summary = summarize_runs(runs)
    tables.print_table("fusion workload (200 x 16 KiB + 4 x 4 MiB), np=%d" % args.np,
                       ["mode", "median steps/s", "min", "max"],
                       [[m, formats.fmt(summary[m]["median_steps_per_s"]),
                         formats.fmt(summary[m]["min"]), formats.fmt(summary[m]["max"])]
                        for m in ("defaults", "autotune")])
    for k in summary["autotune"]["kept"]:
        print("kept: %s" % k)
    path = os.path.join(args.results, "autotune.json")
    jsonio.write_json(path, {"header": jsonio.finish_header(header), "summary": summary,
                             "runs": runs})
    print("wrote %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
