"""One rank of the engines benchmark: the same Keras fit whoever started the rank.

    python engine_fit.py --config '{"batch_per_worker": 64, ...}' --launch-t 1700000000.0

Started by tfhvdrun or srun as a script (prints one ``ENGINE_FIT {json}`` line per rank),
or called in a Ray actor as ``fit_rank(config, launch_t)`` (returns the same dict).
The model, data and optimizer are training_bench's (MLP 784-512-512-10, synthetic data,
batch per worker, SGD + momentum, tf_hvd.keras DistributedOptimizer and callbacks).
Throughput is measured inside the rank: global batch x timed steps / wall time of those
steps, timed from the end of the last warm-up step, so start-up (launcher, interpreter,
imports, hvd.init(), graph tracing) is not in it; start-up is reported apart, as seconds
from ``launch_t`` (the orchestrator's clock when it started the engine's command; all
namespace hosts share one clock) to hvd.init() done and to the first timed step.
"""

import argparse
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MARK = "ENGINE_FIT "


def fit_rank(config, launch_t):
    """Runs the fit on this rank; returns what it measured (a JSON-able dict)."""
    entered = time.time()
    wall_offset = entered - time.perf_counter()  # the step stamps are perf_counter's
    import keras
    import tensorflow as tf  # noqa: F401 - imported before hvd.init(), as users do
    import tf_hvd as hvd
    import tf_hvd.keras as hvd_keras
    import training_bench
    from tf_hvd import tf_threads
    hvd.init()
    init_done = time.time()
    keras.utils.set_random_seed(1234)  # the same initial weights on every engine
    batch, warmup, steps = (config["batch_per_worker"], config["warmup"], config["steps"])
    ds = training_bench.dataset(tf, config["model"], batch, seed=100 + hvd.rank())
    model = training_bench.build_model(config["model"])
    # "compression": none (default), fp16 or bf16: what the gradients cross the wire as.
    compression = getattr(hvd.Compression, config.get("compression", "none"))
    opt = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(
        learning_rate=config["learning_rate"] * hvd.size(), momentum=config["momentum"]),
        compression=compression)
    times = training_bench._StepTimes()
    callbacks = [hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0),
                 hvd_keras.callbacks.MetricAverageCallback(),
                 training_bench._keras_timer(keras, times)]
    model.compile(optimizer=opt, loss=training_bench._loss(keras), metrics=["accuracy"])
    history = model.fit(ds, steps_per_epoch=warmup + steps, epochs=1, verbose=0,
                        callbacks=callbacks)
    samples_per_s, durations = times.summary(warmup, steps, batch * hvd.size())
    first_timed = wall_offset + (times.stamps[warmup - 1] if warmup > 0 else times.stamps[0])
    durations = sorted(durations or [])
    return {"rank": hvd.rank(), "size": hvd.size(), "local_size": hvd.local_size(),
            "host": socket.gethostname(), "pid": os.getpid(),
            "samples_per_s": samples_per_s, "timed_steps": len(durations),
            "step_ms_median": 1e3 * durations[len(durations) // 2] if durations else None,
            "final_loss": float(history.history["loss"][-1]),
            "compression": config.get("compression", "none"),
            "start_to_init_s": init_done - launch_t if launch_t else None,
            "start_to_timed_s": first_timed - launch_t if launch_t else None,
            "imports_and_init_s": init_done - entered,
            "transport": "gloo" if hvd.gloo_enabled() else
                         "mpi" if hvd.mpi_enabled() else "none",
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "niceness": os.nice(0),  # Ray starts its workers at 15 (worker_niceness)
            "tf_threads": tf_threads.tf_thread_settings()}


def parse_results(text):
    """The ENGINE_FIT records in a job's output (any line prefix), by rank."""
    found = {}
    for line in text.splitlines():
        at = line.find(MARK)
        if at >= 0:
            try:
                rec = json.loads(line[at + len(MARK):])
            except ValueError:
                continue
            found[rec["rank"]] = rec
    return [found[r] for r in sorted(found)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True, help="the fit's settings, JSON")
    p.add_argument("--launch-t", type=float, default=None)
    args = p.parse_args(argv)
    rec = fit_rank(json.loads(args.config), args.launch_t)
    sys.stdout.write(MARK + json.dumps(rec) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
