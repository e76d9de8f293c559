"""What a checkpoint costs a training step: hvd.Checkpointer's save against np.save of the same
bytes, np=2, in interleaved rounds.

    python python/benchmarks/checkpoint_bench.py [--quick] [--rounds 5] [--iters 5]
        [--sharded] [--np 2] [--dir DIR]

One job of N ranks (tf_hvd's launcher, Gloo) trains an MLP 1024-2048-2048-1024 (8.4 M
float32 parameters, 33.6 MB) with ``hvd.DistributedOptimizer(Adam)``: weights and Adam's
two slots come to 100.7 MB of saved state. A step is ``model.train_on_batch`` on a fixed
batch (32 rows per rank, MSE). In every round each contender runs ``--iters`` iterations,
each one a barrier (a one-element allreduce), then the step, then the contender's save,
timed on every rank (step, save, step + save); the contenders' order flips from round to
round (rounds.round_order):

  step                 the training step alone
  step+ckpt.save       the step, then ``ckpt.save(step)`` on every rank (hvd.Checkpointer,
                       keep=2): rank 0 gathers the state, writes model.npz, fsyncs,
                       leaves its record and publishes; rank N-1 leaves an empty record
  step+np.save         the step, then on rank 0 every variable's ``.numpy()`` (the model's
                       and the optimizer's, the same arrays model.npz holds) np.save()d
                       one after the other into one fresh file (the file of two saves
                       before removed, as keep=2 does); the other ranks write their own
                       part of a step alone (an empty StepWriter record): what their
                       part of any save costs
  step+np.save+fsync   the same, then fsync of the file
  (--sharded) sharded step, sharded step+ckpt.save: the same model with
                       ``DistributedOptimizer(Adam, sharded=True)`` (the save gathers the
                       slots first: an allgather)

Per round and contender a figure is the median iteration; over the rounds, median [min-max].
The goals (issue 59): rank 0's save adds no more than 10% over np.save of the same bytes
(judged per round against np.save and against np.save+fsync: the protocol fsyncs by design,
so np.save+fsync is the baseline it has to meet), and a rank that writes nothing waits no
longer than its own part's write (rank N-1's ckpt.save minus its own part's write, within
10% of rank 0's np.save+fsync). Every round's ratio must clear a goal for "met"
(rounds.verdict). The checkpoints go to --dir (default: a temporary folder under the
results' runs/, on disk) and are removed at the end. Writes <results>/checkpoint.json and
.png (--tag changes the prefix).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from lib import jsonio, paths, rounds, tables  # noqa: E402

LAYERS = (1024, 2048, 2048, 1024)
CONTENDERS = ("step", "step+ckpt.save", "step+np.save", "step+np.save+fsync")
SHARDED = ("sharded step", "sharded step+ckpt.save")
GOAL = 1.10          # rank 0's save / np.save(+fsync) of the same bytes
WAIT_GOAL = 0.10     # rank N-1's wait beyond its own part, as a fraction of np.save+fsync
ROUNDS, QUICK_ROUNDS = 5, 2
ITERS, QUICK_ITERS = 5, 2


# ---------------------------------------------------------------------------
# The worker: every rank of the job


def _build(keras, hvd, sharded, batch):
    keras.utils.set_random_seed(1234)
    model = keras.Sequential([keras.Input((LAYERS[0],))] +
                             [keras.layers.Dense(n) for n in LAYERS[1:]])
    opt = hvd.DistributedOptimizer(keras.optimizers.Adam(1e-4), sharded=sharded)
    model.compile(optimizer=opt, loss="mse")
    rng = np.random.default_rng(7 + hvd.rank())
    x = rng.standard_normal((batch, LAYERS[0]), dtype=np.float32)
    y = rng.standard_normal((batch, LAYERS[-1]), dtype=np.float32)
    model.train_on_batch(x, y)  # builds the optimizer's slots
    return model, opt, x, y


def _np_save(path, model, opt, fsync):
    """np.save of every variable's value, one after the other, into one new file."""
    with open(path, "wb") as f:
        for v in list(model.variables) + list(opt.variables):
            np.save(f, v.numpy())
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    return os.path.getsize(path)


class _Files(object):
    """Fresh file names for the np.save baseline; the one of two saves before is
    removed (keep=2)."""

    def __init__(self, directory):
        self.directory = directory
        self.count = 0
        self.kept = []

    def fresh(self):
        self.count += 1
        path = os.path.join(self.directory, "npsave-%06d.npy" % self.count)
        self.kept.append(path)
        if len(self.kept) > 2:
            os.remove(self.kept.pop(0))
        return path


def worker(args):
    import keras
    import tensorflow as tf
    import tf_hvd
    import tf_hvd.keras as hvd
    from tf_hvd.checkpoint import StepWriter
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    names = list(CONTENDERS) + (list(SHARDED) if args.sharded else [])
    setups = {False: _build(keras, hvd, False, args.batch)}
    if args.sharded:
        setups[True] = _build(keras, hvd, True, args.batch)
    ckpts = {}
    for sharded, (model, opt, _, _) in setups.items():
        ckpts[sharded] = tf_hvd.Checkpointer(os.path.join(args.dir, "sharded" if sharded
                                                       else "plain"), model, opt, keep=2)
        ckpts[sharded].restore()
    state_bytes = sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize
                      for v in list(setups[False][0].variables) + list(setups[False][1].variables))
    scratch = os.path.join(args.dir, "npsave")
    os.makedirs(scratch, exist_ok=True)
    files = _Files(scratch)
    barrier = tf.zeros([1])
    step_no = [0]  # the checkpoints' steps: the same on every rank
    own_no = [0]   # the own-part steps of the ranks that write nothing in the baseline
    records = []

    def iteration(name):
        sharded = name.startswith("sharded")
        model, opt, x, y = setups[sharded]
        rec = {"save_s": None, "own_part_s": None, "file_bytes": None}
        hvd.allreduce(barrier, name="checkpoint_bench_barrier")
        t0 = time.perf_counter()
        model.train_on_batch(x, y)
        t1 = time.perf_counter()
        if name.endswith("ckpt.save"):
            step_no[0] += 1
            published = ckpts[sharded].save(step_no[0])
            t2 = time.perf_counter()
            rec["save_s"] = t2 - t1
            if published:
                rec["file_bytes"] = os.path.getsize(os.path.join(published, "model.npz"))
        elif name.startswith("step+np.save"):
            if rank == 0:
                rec["file_bytes"] = _np_save(files.fresh(), model, opt,
                                             fsync=name.endswith("fsync"))
            else:  # this rank's own part of a save: an empty record, nothing else
                own_no[0] += 1
                writer = StepWriter(os.path.join(args.dir, "own-part"), own_no[0], rank,
                                    size, "bench")
                writer.finish()
                shutil.rmtree(writer.directory)
            t2 = time.perf_counter()
            rec["save_s" if rank == 0 else "own_part_s"] = t2 - t1
        else:
            t2 = t1
        rec.update(step_s=t1 - t0, iteration_s=t2 - t0)
        return rec

    for name in names:  # warm-up: one iteration of each
        iteration(name)
    for index in range(args.rounds):
        for name in rounds.round_order(names, index):
            for i in range(args.iters):
                rec = iteration(name)
                rec.update(round=index + 1, contender=name, iteration=i, rank=rank)
                records.append(rec)
            if rank == 0:
                mine = [r for r in records if r["round"] == index + 1
                        and r["contender"] == name]
                print("round %d %-24s step+save %7.1f ms  save %s ms" % (
                    index + 1, name, 1e3 * statistics.median(r["iteration_s"] for r in mine),
                    "%.1f" % (1e3 * statistics.median(r["save_s"] for r in mine))
                    if mine[0]["save_s"] is not None else "-"), flush=True)
    with open("%s.rank%d" % (args.out, rank), "w") as f:
        json.dump({"rank": rank, "size": size, "state_bytes": state_bytes,
                   "records": records, "threads": [tf.config.threading.get_intra_op_parallelism_threads(),
                                                   tf.config.threading.get_inter_op_parallelism_threads()]}, f)


# ---------------------------------------------------------------------------
# The driver: per-round medians, spreads over the rounds, the verdicts


def _per_round(records, rank, contender, field, n_rounds):
    """[median of field over the iterations of round r] for r in 1..n_rounds."""
    out = []
    for r in range(1, n_rounds + 1):
        found = [x[field] for x in records if x["rank"] == rank and x["round"] == r
                 and x["contender"] == contender and x[field] is not None]
        out.append(statistics.median(found) if found else None)
    return out


def _ratio(a, b):
    return [x / y if x is not None and y else None for x, y in zip(a, b)]


def summarize(records, names, n_rounds, last_rank):
    """The figures per contender and the two goals' ratios and verdicts."""
    ms = lambda values: [None if v is None else v * 1e3 for v in values]  # noqa: E731
    figures = {}
    for name in names:
        entry = {}
        for rank, who in ((0, "rank0"), (last_rank, "rank%d" % last_rank)):
            for field in ("step_s", "save_s", "iteration_s", "own_part_s"):
                values = ms(_per_round(records, rank, name, field, n_rounds))
                if any(v is not None for v in values):
                    entry["%s_%s_ms" % (who, field[:-2])] = rounds.spread(values)
        figures[name] = entry
    pr = lambda name, field, rank=0: _per_round(records, rank, name, field, n_rounds)  # noqa
    ckpt = pr("step+ckpt.save", "save_s")
    base = {"np.save": pr("step+np.save", "save_s"),
            "np.save+fsync": pr("step+np.save+fsync", "save_s")}
    goals = {}
    for label, values in base.items():
        ratios = _ratio(ckpt, values)
        goals["save_over_" + label] = {
            "ratio": rounds.spread(ratios), "goal": "<= %.2f" % GOAL,
            "verdict": rounds.verdict(ratios, "<=", GOAL),
            "save_ms": rounds.spread(ms(ckpt)), "baseline_ms": rounds.spread(ms(values))}
    wait = pr("step+ckpt.save", "save_s", last_rank)
    own = [statistics.median(v for v in (a, b) if v is not None)
           if (a, b) != (None, None) else None
           for a, b in zip(pr("step+np.save", "own_part_s", last_rank),
                           pr("step+np.save+fsync", "own_part_s", last_rank))]
    beyond = [w - o if w is not None and o is not None else None for w, o in zip(wait, own)]
    fraction = _ratio(beyond, base["np.save+fsync"])
    goals["rank%d_wait" % last_rank] = {
        "wait_ms": rounds.spread(ms(wait)), "own_part_ms": rounds.spread(ms(own)),
        "beyond_own_part_ms": rounds.spread(ms(beyond)),
        "beyond_over_np.save+fsync": rounds.spread(fraction),
        "goal": "beyond own part <= %.2f x rank 0's np.save+fsync" % WAIT_GOAL,
        "verdict": rounds.verdict(fraction, "<=", WAIT_GOAL)}
    if "sharded step+ckpt.save" in names:
        s = pr("sharded step+ckpt.save", "save_s")
        goals["sharded_save_over_np.save+fsync"] = {
            "ratio": rounds.spread(_ratio(s, base["np.save+fsync"])), "goal": "<= %.2f" % GOAL,
            "verdict": rounds.verdict(_ratio(s, base["np.save+fsync"]), "<=", GOAL),
            "save_ms": rounds.spread(ms(s)), "baseline_ms": rounds.spread(ms(base["np.save+fsync"]))}
    return figures, goals


def print_tables(figures, goals, last_rank):
    rows = []
    for name, f in figures.items():
        rows.append([name] + [rounds.fmt_spread(f.get(k)) for k in (
            "rank0_step_ms", "rank0_save_ms", "rank0_iteration_ms",
            "rank%d_save_ms" % last_rank, "rank%d_own_part_ms" % last_rank,
            "rank%d_iteration_ms" % last_rank)])
    tables.print_table(
        "ms per iteration (barrier, step, save), median [min-max] over the rounds of each "
        "round's median iteration",
        ["contender", "r0 step", "r0 save", "r0 step+save", "r%d save" % last_rank,
         "r%d own part" % last_rank, "r%d step+save" % last_rank], rows)
    rows = []
    for name, g in goals.items():
        if "ratio" in g:
            rows.append([name, rounds.fmt_spread(g["ratio"]),
                         "save %s ms, baseline %s ms" % (
                             rounds.fmt_spread(g["save_ms"]),
                             rounds.fmt_spread(g.get("baseline_ms"))), g["goal"],
                         g["verdict"] or "-"])
        else:
            rows.append([name, rounds.fmt_spread(g["beyond_over_np.save+fsync"]),
                         "wait %s ms, own part %s ms" % (rounds.fmt_spread(g["wait_ms"]),
                                                         rounds.fmt_spread(g["own_part_ms"])),
                         g["goal"], g["verdict"] or "-"])
    tables.print_table("The goals, per-round ratios, median [min-max]",
                       ["goal", "ratio", "detail (rank 0 unless named)", "goal", "verdict"],
                       rows)


def plot(figures, header, path, last_rank):
    plt = tables.pyplot()
    fig, ax = plt.subplots(figsize=(9, 5))
    names = list(figures)
    for offset, (key, label, color) in enumerate((
            ("rank0_step_ms", "rank 0: step", "#7f7f7f"),
            ("rank0_save_ms", "rank 0: save", "#1f77b4"),
            ("rank%d_save_ms" % last_rank, "rank %d: save (own part for np.save)" % last_rank,
             "#ff7f0e"))):
        xs, ys, lo, hi = [], [], [], []
        for i, name in enumerate(names):
            s = figures[name].get(key)
            if key.startswith("rank%d" % last_rank) and not s:
                s = figures[name].get("rank%d_own_part_ms" % last_rank)
            if s and s.get("median") is not None:
                xs.append(i + (offset - 1) * 0.27)
                ys.append(s["median"])
                lo.append(s["median"] - s["min"])
                hi.append(s["max"] - s["median"])
        ax.bar(xs, ys, width=0.27, color=color, label=label, yerr=[lo, hi], capsize=3)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel("ms, median round [min-max] (lower is better)")
    ax.set_title("A training step and a save of ~100 MB of state, np=%s" % header.get("np"))
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.text(0.5, 0.005, tables.caption(header), ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _load_note(header):
    """The machine's load over the run, in words (other work on it skews the figures)."""
    m = header.get("machine", {})
    start, end = m.get("loadavg"), m.get("loadavg_end")
    return ("1-minute load average %.1f at the start, %.1f at the end, on %s CPUs; this job "
            "itself keeps about %d busy" % (start[0] if start else -1, end[0] if end else -1,
                                              m.get("cpus"), header.get("np") or 0))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=None,
                        help="interleaved rounds (default %d, %d with --quick)"
                        % (ROUNDS, QUICK_ROUNDS))
    parser.add_argument("--iters", type=int, default=None,
                        help="iterations per contender and round (default %d, %d with "
                             "--quick)" % (ITERS, QUICK_ITERS))
    parser.add_argument("--batch", type=int, default=32, help="rows per rank and step")
    parser.add_argument("--sharded", action="store_true",
                        help="also the sharded DistributedOptimizer's step and save")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--dir", default=None,
                        help="where the checkpoints go (default: a temporary folder under "
                             "<results>/runs, removed at the end)")
    parser.add_argument("--results-dir", default=paths.DEFAULT_RESULTS_DIR)
    parser.add_argument("--tag", default=None, help="file name prefix (default checkpoint)")
    parser.add_argument("--timeout", type=float, default=1200.0)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (QUICK_ROUNDS if args.quick else ROUNDS)
    args.iters = args.iters or (QUICK_ITERS if args.quick else ITERS)
    if args.worker:
        return worker(args)
    tag = args.tag or "checkpoint"
    results_dir = paths.ensure_dir(os.path.abspath(args.results_dir))
    run_dir = paths.ensure_dir(os.path.join(results_dir, "runs"))
    ckpt_dir = args.dir or tempfile.mkdtemp(prefix="checkpoint_bench-", dir=run_dir)
    out = os.path.join(run_dir, "%s.worker" % tag)
    header = jsonio.run_header("checkpoint", args)
    names = list(CONTENDERS) + (list(SHARDED) if args.sharded else [])
    header["config"] = {"layers": LAYERS, "optimizer": "Adam", "batch_per_rank": args.batch,
                        "rounds": args.rounds, "iterations_per_round": args.iters,
                        "contenders": names, "checkpoint_dir": ckpt_dir, "keep": 2}
    cmd = [sys.executable, "-m", "tf_hvd.runner", "-np", str(args.np), sys.executable,
           os.path.abspath(__file__), "--worker", "--out", out, "--dir", ckpt_dir,
           "--rounds", str(args.rounds), "--iters", str(args.iters),
           "--batch", str(args.batch)] + (["--sharded"] if args.sharded else [])
    header["worker_command"] = " ".join(cmd)
    started = time.time()
    try:
        subprocess.run(cmd, check=True, timeout=args.timeout, cwd=paths.REPO_ROOT)
        per_rank = []
        for r in range(args.np):
            with open("%s.rank%d" % (out, r)) as f:
                per_rank.append(json.load(f))
            os.remove("%s.rank%d" % (out, r))
    finally:
        if not args.dir:
            shutil.rmtree(ckpt_dir, ignore_errors=True)
    jsonio.finish_header(header)
    records = [rec for part in per_rank for rec in part["records"]]
    last = args.np - 1
    figures, goals = summarize(records, names, args.rounds, last)
    print_tables(figures, goals, last)
    saved = [r["file_bytes"] for r in records if r["contender"] == "step+ckpt.save"
             and r["file_bytes"]]
    data = dict(header)
    data.update({"seconds": round(time.time() - started, 1),
                 "state_bytes": per_rank[0]["state_bytes"],
                 "model_npz_bytes": saved[0] if saved else None,
                 "tf_threads_per_rank": per_rank[0].get("threads"),
                 "figures_ms": figures, "goals": goals, "records": records})
    data["load_note"] = _load_note(header)
    jsonio.write_json(os.path.join(results_dir, tag + ".json"), data)
    plot(figures, header, os.path.join(results_dir, tag + ".png"), last)
    tables.log("%s\nstate %.1f MB, model.npz %s bytes; wrote %s/%s.json and .png"
               % (data["load_note"], per_rank[0]["state_bytes"] / 1e6,
                  data["model_npz_bytes"], results_dir, tag))
    return 0


if __name__ == "__main__":
    sys.exit(main())
