"""Training throughput (samples per second) of Keras 3 models, side by side.

    python python/benchmarks/training_bench.py [--quick] [--np 2] [--models mlp,cnn]

Models on synthetic data (random inputs and labels, the same on every contender):
an MLP 784-512-512-10 and a small CNN (28x28x1: conv 32, pool, conv 64, pool,
dense 10); SGD with momentum; batch 64 per worker; 200 timed steps (800 for the MLP,
whose steps are ~4x shorter: a window of comparable length) after a warm-up.
Two ways of training:

  fit    model.fit with the contender's usual set-up: tf_hvd.keras
         DistributedOptimizer + BroadcastGlobalVariablesCallback +
         MetricAverageCallback; for MWMS the model compiled under strategy.scope()
         (Keras 3 needs mwms_keras3_patch for that, applied and reported)
  tape   a tf.function training step: hvd.DistributedGradientTape; for MWMS
         strategy.run of the step (Keras' optimizer sums the gradients across replicas)

Contenders: tf_hvd over Gloo and MPI, MWMS (RING), one process with the global
batch (64 x N) as the reference, and N processes that train without any allreduce
(tf_hvd's launcher and thread settings, the plain optimizer): the compute bound of
N-process data parallelism here, which no communication library can pass. Each tf_hvd
contender also measures that bound in its own processes (same_processes_bound in its
records: the same steps without any allreduce, right before or after its own run,
alternating), which keeps the machine's drift between separate jobs out of the ratio.
Throughput counts all workers' samples: global batch x timed steps / wall time of those
steps on rank 0; for the bound, whose ranks do not keep in step, the sum of every
rank's rate over the time all ranks were in their timed windows (rank_samples_per_s
and bound_window in the JSON): a rank that finishes first frees its core, and its
peer's steps after that are not what the two could compute together.
Writes <results>/training.json and training.png.
"""

import argparse
import sys
import time

import numpy as np

from lib import formats, launch, rounds, tables, timing
from lib import report as report_lib

PART = "training"
KINDS = ("hvd", "hvd_bound", "mwms", "single")
CONTENDERS = ("tf_hvd_gloo", "tf_hvd_mpi", "mwms_ring", "single_process", "no_allreduce")
MODELS = ("mlp", "cnn")
MODES = ("fit", "tape")
DATASET_BATCHES = 16  # distinct synthetic batches per worker, repeated


# An MLP step takes ~2-3 ms here, a CNN step ~9-10 ms: the MLP times this many times
# more steps, so that both measure a window of comparable length (a 60-step MLP window
# is 0.15 s, where one scheduler hiccup moves the figure by tens of percent).
MODEL_STEP_FACTOR = {"mlp": 4, "cnn": 1}


def make_config(quick, models=MODELS, modes=MODES, batch=64, steps=None, warmup=None):
    return {"models": list(models), "modes": list(modes), "batch_per_worker": int(batch),
            # quick: fewer timed steps, the same warm-up (the first steps after
            # tracing are slow; a short warm-up made quick figures read low)
            "steps": int(steps or (60 if quick else 200)),
            # timed steps per model: steps x MODEL_STEP_FACTOR unless --steps was given
            "steps_per_model": dict((m, int(steps or (60 if quick else 200)
                                            * (1 if steps else MODEL_STEP_FACTOR.get(m, 1))))
                                    for m in models),
            "warmup": int(warmup or 10), "quick": bool(quick),
            "learning_rate": 0.01, "momentum": 0.9}


def model_config(cfg, model):
    """cfg with the timed steps of this model."""
    return dict(cfg, steps=(cfg.get("steps_per_model") or {}).get(model, cfg["steps"]))


def build_model(name):
    import keras
    from keras import layers
    if name == "mlp":
        return keras.Sequential([keras.Input((784,)),
                                 layers.Dense(512, activation="relu"),
                                 layers.Dense(512, activation="relu"),
                                 layers.Dense(10)], name="mlp")
    if name == "cnn":
        return keras.Sequential([keras.Input((28, 28, 1)),
                                 layers.Conv2D(32, 3, activation="relu"),
                                 layers.MaxPooling2D(),
                                 layers.Conv2D(64, 3, activation="relu"),
                                 layers.MaxPooling2D(),
                                 layers.Flatten(),
                                 layers.Dense(10)], name="cnn")
    raise ValueError("unknown model %r" % name)


def synthetic_arrays(name, n, seed):
    rng = np.random.default_rng(seed)
    shape = (n, 784) if name == "mlp" else (n, 28, 28, 1)
    return rng.random(shape, dtype=np.float32), rng.integers(0, 10, n).astype(np.int32)


def dataset(tf, name, batch, seed):
    x, y = synthetic_arrays(name, batch * DATASET_BATCHES, seed)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch, drop_remainder=True)
    return ds.prefetch(tf.data.AUTOTUNE)


def _loss(keras, reduction="sum_over_batch_size"):
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)


class _StepTimes(object):
    """Timestamps at the end of every training step."""

    def __init__(self):
        self.stamps = []

    def mark(self):
        self.stamps.append(time.perf_counter())

    def window(self, warmup, steps):
        # the timed window starts at the end of the last warm-up step
        window = self.stamps[warmup - 1:warmup + steps] if warmup > 0 else None
        return window if window and len(window) >= 2 else None

    def summary(self, warmup, steps, global_batch):
        window = self.window(warmup, steps)
        if not window:
            return None, None
        durations = [b - a for a, b in zip(window, window[1:])]
        elapsed = window[-1] - window[0]
        return len(durations) * global_batch / elapsed, durations


def common_window(bounds, min_share=0.5):
    """[(first, last) stamp of every rank's window] -> (start, end) of the time all
    ranks were in their windows, or None where that is under min_share of the
    shortest window (clocks of separate hosts, or ranks that hardly overlapped)."""
    start, end = max(b[0] for b in bounds), min(b[1] for b in bounds)
    shortest = min(b[1] - b[0] for b in bounds)
    return (start, end) if shortest > 0 and end - start >= min_share * shortest else None


def rate_within(window, start, end, batch):
    """Samples/s of one rank over its steps that ran wholly inside [start, end]."""
    inside = [t for t in window if start <= t <= end]
    if len(inside) < 2:
        return None
    return (len(inside) - 1) * batch / (inside[-1] - inside[0])


def _keras_timer(keras, times):
    class StepTimer(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            times.mark()
    return StepTimer()


def _record(ctx, cfg, model, mode, times, workers, batch, final_loss, extra=None, label=""):
    global_batch = batch * workers
    throughput, durations = times.summary(cfg["warmup"], cfg["steps"], global_batch)
    rec = {"contender": ctx.contender, "model": model, "mode": mode, "workers": workers,
           "batch_per_worker": batch, "global_batch": global_batch, "warmup": cfg["warmup"],
           "steps": len(durations or []), "samples_per_s": throughput,
           "step_ms": timing.scaled(timing.summarize(durations or []), 1e3),
           "final_loss": final_loss, "finite_loss": bool(np.isfinite(final_loss))}
    rec.update(extra or {})
    ctx.log("%-4s %-5s %10.0f samples/s  median step %8.2f ms  loss %.4f%s"
            % (model, mode, throughput or 0, rec["step_ms"]["median"] or 0, final_loss,
               "  (%s)" % label if label else ""))
    return rec


# ---------------------------------------------------------------------------
# Workers


def run_worker(ctx, cfg):
    import keras
    runner = {"hvd": _run_hvd, "hvd_bound": _run_hvd, "mwms": _run_mwms,
              "single": _run_single}[ctx.kind]
    records = []
    base = cfg
    for index, (model, mode) in enumerate((m, md) for m in cfg["models"] for md in cfg["modes"]):
        cfg = model_config(base, model)
        if ctx.kind != "hvd":
            records.append(_fresh(keras, ctx, lambda: runner(ctx, cfg, model, mode)))
            continue
        # tf_hvd also measures its own bound: the same processes, right before or
        # after (alternating), the same steps without any allreduce. Its ratio has
        # no drift between separate jobs in it.
        runs = {}
        for communicate in ((True, False) if index % 2 == 0 else (False, True)):
            runs[communicate] = _fresh(keras, ctx, lambda: _run_hvd(ctx, cfg, model, mode,
                                                                    communicate))
        rec, bound = runs[True], runs[False]
        rec["same_processes_bound"] = {
            "samples_per_s": bound["samples_per_s"], "step_ms": bound["step_ms"],
            "rank_samples_per_s": bound.get("rank_samples_per_s"),
            "finite_loss": bound["finite_loss"], "ran_first": index % 2 == 1}
        records.append(rec)
    return records


def _fresh(keras, ctx, run):
    keras.backend.clear_session()
    keras.utils.set_random_seed(1234)  # the same initial weights everywhere
    ctx.barrier()
    return run()


def _sgd(keras, cfg, scale):
    return keras.optimizers.SGD(learning_rate=cfg["learning_rate"] * scale,
                                momentum=cfg["momentum"])


def _run_hvd(ctx, cfg, model_name, mode, communicate=None):
    """communicate: with tf_hvd's allreduce (default for kind hvd) or the same
    work without any (kind hvd_bound, and tf_hvd's own bound)."""
    import keras
    import tf_hvd.keras as hvd_keras
    tf, hvd = ctx.tf, ctx.hvd
    if communicate is None:
        communicate = ctx.kind == "hvd"
    batch, total = cfg["batch_per_worker"], cfg["warmup"] + cfg["steps"]
    ds = dataset(tf, model_name, batch, seed=100 + ctx.rank)
    model = build_model(model_name)
    times = _StepTimes()
    if mode == "fit":
        opt = _sgd(keras, cfg, ctx.size)
        callbacks = [_keras_timer(keras, times)]
        if communicate:
            opt = hvd_keras.DistributedOptimizer(opt)
            callbacks[:0] = [hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0),
                             hvd_keras.callbacks.MetricAverageCallback()]
        model.compile(optimizer=opt, loss=_loss(keras), metrics=["accuracy"])
        history = model.fit(ds, steps_per_epoch=total, epochs=1, verbose=0,
                            callbacks=callbacks)
        final_loss = float(history.history["loss"][-1])
    else:
        opt = _sgd(keras, cfg, ctx.size)
        loss_fn = _loss(keras)

        @tf.function
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            if communicate:
                tape = hvd.DistributedGradientTape(tape)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        iterator = iter(ds)
        loss = None
        for step in range(total):
            x, y = next(iterator)
            loss = train_step(x, y)
            if step == 0 and communicate:
                hvd.broadcast_variables(model.variables + opt.variables, root_rank=0)
            times.mark()
        final_loss = float(loss)
    rec = _record(ctx, cfg, model_name, mode, times, ctx.size, batch, final_loss,
                  label="" if communicate or ctx.kind != "hvd" else "no allreduce")
    if not communicate and rec["samples_per_s"]:
        _bound_rates(ctx, rec, times.window(cfg["warmup"], cfg["steps"]), batch)
    return rec


def _bound_rates(ctx, rec, window, batch):
    """Ranks that never communicate do not keep in step: a busy core slows only the
    rank on it, and a rank that finishes first frees its core for the others. The
    bound is the sum of every rank's rate over the time all of them were still in
    their timed windows (perf_counter is the host's monotonic clock, shared by the
    ranks of one host), not N x rank 0's, nor the sum over windows that did not
    overlap. Where the windows overlap too little (separate hosts' clocks), each
    rank's whole window (bound_window: "own")."""
    tf, hvd = ctx.tf, ctx.hvd
    bounds = hvd.allgather(tf.constant([[window[0], window[-1]]], tf.float64),
                           name="bound_windows").numpy().tolist()
    shared = common_window(bounds)
    own = rec["samples_per_s"] / ctx.size
    mine = rate_within(window, shared[0], shared[1], batch) if shared else own
    rates = hvd.allgather(tf.constant([mine if mine else own], tf.float64),
                          name="bound_rates").numpy()
    rec["rank_samples_per_s"] = [float(v) for v in rates]
    rec["samples_per_s"] = float(sum(rates))
    rec["bound_window"] = ({"kind": "shared", "seconds": shared[1] - shared[0],
                            "rank_seconds": [b[1] - b[0] for b in bounds]}
                           if shared else {"kind": "own"})


def _run_mwms(ctx, cfg, model_name, mode):
    import keras
    tf, strategy = ctx.tf, ctx.strategy
    batch, total = cfg["batch_per_worker"], cfg["warmup"] + cfg["steps"]
    global_batch = batch * ctx.size
    # Each worker reads the global batch and keeps its share (tf.data DATA sharding).
    ds = dataset(tf, model_name, global_batch, seed=100)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA)
    ds = ds.with_options(options)
    times = _StepTimes()
    with strategy.scope():
        model = build_model(model_name)
        opt = _sgd(keras, cfg, ctx.size)
        if mode == "fit":
            model.compile(optimizer=opt, loss=_loss(keras), metrics=["accuracy"])
    if mode == "fit":
        history = model.fit(ds, steps_per_epoch=total, epochs=1, verbose=0,
                            callbacks=[_keras_timer(keras, times)])
        final_loss = float(history.history["loss"][-1])
    else:
        loss_fn = _loss(keras, reduction=None)
        dist_ds = strategy.experimental_distribute_dataset(ds)

        def replica_step(x, y):
            with tf.GradientTape() as tape:
                per_example = loss_fn(y, model(x, training=True))
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        @tf.function
        def train_step(iterator):
            per_replica = strategy.run(replica_step, args=next(iterator))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        iterator = iter(dist_ds)
        loss = None
        for _ in range(total):
            loss = train_step(iterator)
            times.mark()
        final_loss = float(loss)
    extra = {"keras3_patch": ctx.runtime.get("keras3_patch")} if mode == "fit" else None
    if mode == "fit":
        note = "MWMS model.fit ran with mwms_keras3_patch: " + ctx.runtime["keras3_patch"]
        if note not in ctx.notes:
            ctx.notes.append(note)
    return _record(ctx, cfg, model_name, mode, times, ctx.size, batch, final_loss, extra)


def _run_single(ctx, cfg, model_name, mode):
    import keras
    tf = ctx.tf
    workers = int(cfg.get("reference_workers", 2))
    batch, total = cfg["batch_per_worker"] * workers, cfg["warmup"] + cfg["steps"]
    ds = dataset(tf, model_name, batch, seed=100)
    model = build_model(model_name)
    opt = _sgd(keras, cfg, 1)
    times = _StepTimes()
    if mode == "fit":
        model.compile(optimizer=opt, loss=_loss(keras), metrics=["accuracy"])
        history = model.fit(ds, steps_per_epoch=total, epochs=1, verbose=0,
                            callbacks=[_keras_timer(keras, times)])
        final_loss = float(history.history["loss"][-1])
    else:
        loss_fn = _loss(keras)

        @tf.function
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        iterator = iter(ds)
        loss = None
        for _ in range(total):
            x, y = next(iterator)
            loss = train_step(x, y)
            times.mark()
        final_loss = float(loss)
    return _record(ctx, cfg, model_name, mode, times, 1, batch, final_loss)


# ---------------------------------------------------------------------------
# Report


def find(records, contender, model, mode):
    for rec in records:
        if (rec["contender"], rec["model"], rec["mode"]) == (contender, model, mode):
            return rec
    return None


def print_tables(records, contenders, notes=()):
    rows = []
    for rec in sorted(records, key=lambda r: (r["model"], r["mode"],
                                              launch.ORDER.index(r["contender"]))):
        name = rec["contender"]
        mwms = find(records, "mwms_ring", rec["model"], rec["mode"])
        ratio = None
        if mwms and mwms["samples_per_s"] and rec["samples_per_s"]:
            ratio = rec["samples_per_s"] / mwms["samples_per_s"]
        st = rec["step_ms"]
        own = (rec.get("same_processes_bound") or {}).get("samples_per_s")
        rows.append([rec["model"], rec["mode"],
                     contenders[name].label if name in contenders else name,
                     rec["workers"], rec["global_batch"], rec["steps"],
                     formats.fmt(rec["samples_per_s"]), formats.fmt(st["median"]),
                     formats.fmt(st["max"]), formats.fmt(ratio),
                     formats.fmt(rec["samples_per_s"] / own if own and rec["samples_per_s"]
                                else None),
                     formats.fmt(rec["final_loss"]), rounds.fmt_spread(rec.get("rounds"))])
    tables.print_table("Training throughput (samples/s over all workers, synthetic data)",
                       ["model", "mode", "contender", "workers", "global_batch", "steps",
                        "samples/s", "median_step_ms", "max_step_ms", "x MWMS",
                        "x own bound", "loss", "rounds: samples/s [min-max]"], rows)
    for note in notes:
        tables.log("note: " + note)


def plot_axes(ax, records, contenders):
    groups = [(m, md) for m in MODELS for md in MODES
              if any(r["model"] == m and r["mode"] == md for r in records)]
    names = [n for n in launch.ORDER if any(r["contender"] == n for r in records)]
    width = 0.8 / max(1, len(names))
    for j, name in enumerate(names):
        xs, ys = [], []
        for i, (model, mode) in enumerate(groups):
            rec = find(records, name, model, mode)
            if rec and rec["samples_per_s"]:
                xs.append(i + (j - (len(names) - 1) / 2.0) * width)
                ys.append(rec["samples_per_s"])
        color = tables.style(name)[0]
        bars = ax.bar(xs, ys, width, color=color,
                      label=contenders[name].label if name in contenders else name)
        for bar, y in zip(bars, ys):
            ax.text(bar.get_x() + bar.get_width() / 2, y, "%.0f" % y, ha="center",
                    va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(["%s %s" % g for g in groups])
    ax.set_ylabel("samples per second (all workers; higher is better)")
    ax.set_title("Keras 3 training throughput, batch 64 per worker")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    top = max([r["samples_per_s"] or 0 for r in records] + [1])
    ax.set_ylim(0, top * 1.2)


def plot(records, contenders, header, path):
    plt = tables.pyplot()
    fig, ax = plt.subplots(figsize=(10, 6))
    plot_axes(ax, records, contenders)
    fig.text(0.5, 0.005, tables.caption(header), ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(header, contenders, runs, results_dir, tag="training", records=None):
    """Prints the tables, writes <tag>.json/.png; records: the part's records
    (default: those in runs; compare.py passes the medians of its rounds)."""
    notes = []
    for run in runs.values():
        for note in (run.get("result") or {}).get("notes", []):
            if note not in notes:
                notes.append(note)
    return report_lib.write_part(sys.modules[__name__], header, contenders, runs, results_dir,
                                 tag, records, extra={"notes": notes}, table_args=(notes,))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    launch.add_common_arguments(parser, CONTENDERS)
    parser.add_argument("--models", default=",".join(MODELS), help="mlp, cnn")
    parser.add_argument("--modes", default=",".join(MODES), help="fit, tape")
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default 200)")
    parser.add_argument("--batch", type=int, default=64, help="batch per worker")
    args = parser.parse_args(argv)
    cfg = make_config(args.quick, formats.parse_list(args.models), formats.parse_list(args.modes),
                      args.batch, args.steps)
    cfg["reference_workers"] = args.np
    return report_lib.run_part(sys.modules[__name__], "training", args, cfg)


if __name__ == "__main__":
    sys.exit(main())
