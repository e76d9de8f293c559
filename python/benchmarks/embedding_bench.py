"""A DLRM-like model with sharded tables (DistributedEmbedding) against replicated ones.

    python python/benchmarks/embedding_bench.py [--rounds 3] [--tables 8] [--rows 1000000]
                                                [--dim 64] [--batch 4096] [--np 2]
                                                [--hosts 2 --rate-mbit 1000]

The model: ``--tables`` categorical features, one Zipf-distributed id each
(``--zipf`` exponent, ids taken modulo the table's rows), into tables of
``--rows`` x ``--dim``; 13 dense features through a bottom MLP (256, dim); the
concatenation through a top MLP (256, 1), binary cross-entropy; Adagrad (the
recommender's usual choice), ``--batch`` samples per rank, model.fit. Two variants
of the same model in the same processes:

* ``replicated``: ``keras.layers.Embedding`` tables (every rank holds every row and
  Adagrad's accumulator of every row) + ``hvd.DistributedOptimizer``, the tables'
  IndexedSlices gradients allgathered;
* ``sharded``: one ``tf_hvd.keras.layers.DistributedEmbedding`` ("mod" rows, 1/N of
  every table and accumulator per rank), ids and rows exchanged by alltoall.

Interleaved rounds (lib/rounds.py: the order flips every round); each variant is
built afresh (same seed), runs ``--warmup`` steps and then ``--steps`` timed steps
(time per step on rank 0, between the ends of consecutive steps). Reported per
variant: median step time and its spread over the rounds, the ratio sharded /
replicated per round (median, spread), the bytes of tables and optimizer slots each
rank holds, the process's resident memory after the variant's steps, and the bytes
each rank sends per step, computed from the step's ids and the collectives'
algorithms (alltoall: only what goes to other ranks; allgather and ring allreduce:
(N-1)/N of the gathered or reduced bytes per rank). Writes
<results>/embedding.json, or embedding-<K>hosts.json with ``--hosts K`` (root:
tools/clusters/netns_cluster.py hosts, one rank each, links shaped to ``--rate-mbit``).
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from lib import rounds  # noqa: E402

VARIANTS = ("replicated", "sharded")
DENSE = 13
HIDDEN = 256


def batches(args, rank, count):
    """``count`` batches of rank ``rank``: (dense [B, 13], ids [tables][B], labels)."""
    rs = np.random.RandomState(1000 + rank)
    out = []
    for _ in range(count):
        dense = rs.rand(args.batch, DENSE).astype(np.float32)
        ids = [((rs.zipf(args.zipf, size=args.batch) - 1) % args.rows).astype(np.int32)
               for _ in range(args.tables)]
        labels = (rs.rand(args.batch, 1) < 0.25).astype(np.float32)
        out.append((dense, ids, labels))
    return out


def build(keras, args, variant):
    from tf_hvd.keras.layers import DistributedEmbedding, FeatureConfig, TableConfig
    dense_in = keras.Input((DENSE,), name="numeric")
    id_in = [keras.Input((), dtype="int32", name="c%d" % t) for t in range(args.tables)]
    bottom = keras.layers.Dense(HIDDEN, activation="relu")(dense_in)
    bottom = keras.layers.Dense(args.dim, activation="relu")(bottom)
    init = keras.initializers.RandomUniform(-0.05, 0.05)
    if variant == "sharded":
        features = {"c%d" % t: FeatureConfig(
            "c%d" % t, TableConfig("t%d" % t, args.rows, args.dim, initializer=init),
            (None,), (None, args.dim)) for t in range(args.tables)}
        emb = DistributedEmbedding(features, name="tables")
        out = emb({"c%d" % t: id_in[t] for t in range(args.tables)})
        vectors = [out["c%d" % t] for t in range(args.tables)]
    else:
        vectors = [keras.layers.Embedding(args.rows, args.dim, embeddings_initializer=init,
                                          name="t%d" % t)(id_in[t])
                   for t in range(args.tables)]
    top = keras.layers.Concatenate()([bottom] + vectors)
    top = keras.layers.Dense(HIDDEN, activation="relu")(top)
    top = keras.layers.Dense(1, activation="sigmoid")(top)
    return keras.Model([dense_in] + id_in, top)


def table_bytes(model, variant):
    """Bytes of the tables and their Adagrad accumulators this rank holds."""
    total = 0
    for layer in model.layers:
        if variant == "sharded" and hasattr(layer, "_hvd"):
            for state in layer._hvd.tables.values():
                for v in [state.shard] + list(state.slots.values()):
                    total += int(np.prod(v.shape)) * 4
        elif variant == "replicated" and layer.name.startswith("t") and hasattr(
                layer, "embeddings"):
            total += 2 * int(np.prod(layer.embeddings.shape)) * 4  # table + accumulator
    return total


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


def worker(args):
    import keras
    import tensorflow as tf
    import tf_hvd.keras as hvd
    from training_bench import _StepTimes, _keras_timer
    hvd.init()
    size, rank = hvd.size(), hvd.rank()
    data = batches(args, rank, 4)
    total = args.warmup + args.steps

    def dataset():
        xs = {"numeric": np.concatenate([d for d, _, _ in data])}
        for t in range(args.tables):
            xs["c%d" % t] = np.concatenate([ids[t] for _, ids, _ in data])
        ys = np.concatenate([y for _, _, y in data])
        return tf.data.Dataset.from_tensor_slices((xs, ys)).batch(args.batch).repeat()

    records = []
    for index in range(args.rounds):
        for variant in rounds.round_order(VARIANTS, index):
            keras.backend.clear_session()
            gc.collect()
            keras.utils.set_random_seed(1234)
            model = build(keras, args, variant)
            opt = hvd.DistributedOptimizer(keras.optimizers.Adagrad(0.01))
            model.compile(optimizer=opt, loss="binary_crossentropy")
            times = _StepTimes()
            hvd.allreduce(tf.zeros([1]), name="embedding_bench_barrier")
            model.fit(dataset(), steps_per_epoch=total, epochs=1, verbose=0,
                      callbacks=[_keras_timer(keras, times)])
            _, durations = times.summary(args.warmup, args.steps, args.batch * size)
            rec = {"round": index + 1, "variant": variant, "workers": size,
                   "median_step_s": float(np.median(durations)),
                   "step_s": [float(d) for d in durations],
                   "table_and_slot_bytes": table_bytes(model, variant),
                   "rss_bytes": rss_bytes()}
            records.append(rec)
            if rank == 0:
                print("round %d %-10s median step %7.3f s  tables+slots %6.0f MB  RSS %6.0f MB"
                      % (index + 1, variant, rec["median_step_s"],
                         rec["table_and_slot_bytes"] / 1e6, rec["rss_bytes"] / 1e6),
                      flush=True)
            del model, opt
    everyone = hvd.allgather_object(records)
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(everyone, f)


def dense_params(args):
    bottom = DENSE * HIDDEN + HIDDEN + HIDDEN * args.dim + args.dim
    top_in = args.dim * (args.tables + 1)
    return bottom + top_in * HIDDEN + HIDDEN + HIDDEN + 1


def bytes_per_step(args, n):
    """Mean bytes one rank sends in one step, per variant, from the ids of the
    batches every rank uses (first batch of each)."""
    ids = [batches(args, r, 1)[0][1] for r in range(n)]
    row = args.dim * 4
    dense = 2.0 * (n - 1) / n * dense_params(args) * 4         # ring allreduce
    # replicated: each table's IndexedSlices (values + int64 indices) allgathered
    replicated = dense + (n - 1) * args.tables * args.batch * (row + 8)
    sharded = []
    for r in range(n):
        sent = dense
        for t in range(args.tables):
            unique = np.unique(ids[r][t])
            remote = int(np.sum(unique % n != r))
            # ids (with the 2-number header to each other rank) and row gradients
            # back to their owners
            sent += (remote + 2 * (n - 1)) * 8 + remote * row
            # rows this rank owns that the others asked for
            for q in range(n):
                if q != r:
                    theirs = np.unique(ids[q][t])
                    sent += int(np.sum(theirs % n == r)) * row
        sharded.append(sent)
    return {"replicated": replicated, "sharded": float(np.mean(sharded))}


def summarize(records, n):
    ratios = []
    for index in sorted(set(r["round"] for r in records)):
        by = dict((r["variant"], r["median_step_s"]) for r in records if r["round"] == index)
        ratios.append(by["sharded"] / by["replicated"]
                      if by.get("sharded") and by.get("replicated") else None)
    steps = dict((v, rounds.spread([r["median_step_s"] for r in records
                                    if r["variant"] == v])) for v in VARIANTS)
    held = dict((v, max(r["table_and_slot_bytes"] for r in records if r["variant"] == v))
                for v in VARIANTS)
    rss = dict((v, rounds.spread([r["rss_bytes"] for r in records if r["variant"] == v]))
               for v in VARIANTS)
    return {"step_s": steps, "ratio_step_sharded_over_replicated": rounds.spread(ratios),
            "speed_verdict_vs_1.0": rounds.verdict(ratios, "<=", 1.0),
            "table_and_slot_bytes_per_rank": held,
            "memory_share": held["sharded"] / held["replicated"],
            "memory_verdict": "met" if held["sharded"] / held["replicated"] <= 1.0 / n + 0.01
            else "not met",
            "rss_bytes_after_steps": rss}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tables", type=int, default=8)
    parser.add_argument("--rows", type=int, default=1000000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=0,
                        help="run on this many shaped namespace hosts, one rank each")
    parser.add_argument("--rate-mbit", type=float, default=1000.0)
    parser.add_argument("--results", default=os.path.join(HERE, "results"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    fd, out = tempfile.mkstemp(suffix=".json", prefix="embedding_bench_")
    os.close(fd)
    n = args.hosts or args.np
    cmd = [sys.executable, "-m", "tf_hvd.runner", "-np", str(n), sys.executable,
           os.path.abspath(__file__), "--worker", "--out", out]
    for flag in ("rounds", "tables", "rows", "dim", "batch", "zipf", "steps", "warmup"):
        cmd += ["--" + flag, str(getattr(args, flag))]
    started = time.time()
    load_before = os.getloadavg()
    link = None
    root = os.path.dirname(os.path.dirname(HERE))
    if args.hosts:
        sys.path.insert(0, os.path.join(root, "tools", "clusters"))
        import netns_cluster
        with netns_cluster.Cluster(args.hosts, name="tfeb", rate_mbit=args.rate_mbit) as c:
            layout = ",".join("%s:1" % h for h in c.hosts)
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, HERE]))
            subprocess.run(c.exec_argv("h1", cmd[:5] + ["-H", layout] + cmd[5:]), check=True,
                           env=env, cwd=root)
            link = c.shaping()
    else:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, HERE]))
        subprocess.run(cmd, check=True, env=env)
    with open(out) as f:
        everyone = json.load(f)
    os.unlink(out)
    rank0 = everyone[0]
    summary = summarize(rank0, n)
    summary["bytes_sent_per_rank_per_step"] = bytes_per_step(args, n)
    summary["table_and_slot_bytes_by_rank"] = [
        max(r["table_and_slot_bytes"] for r in recs if r["variant"] == "sharded")
        for recs in everyone]
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    result = {"benchmark": "embedding", "np": n, "hosts": args.hosts or 1, "link": link,
              "config": dict((k, getattr(args, k)) for k in (
                  "rounds", "tables", "rows", "dim", "batch", "zipf", "steps", "warmup")),
              "optimizer": "Adagrad(0.01)", "uptime_after": uptime,
              "loadavg_before": load_before, "seconds": time.time() - started,
              "summary": summary, "records": everyone}
    os.makedirs(args.results, exist_ok=True)
    path = os.path.join(args.results, "embedding-%dhosts.json" % args.hosts if args.hosts
                        else "embedding.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    s = summary
    print("step s: replicated %s, sharded %s; sharded / replicated %s (%s rounds), %s vs 1.0"
          % (rounds.fmt_spread(s["step_s"]["replicated"]), rounds.fmt_spread(s["step_s"]["sharded"]),
             rounds.fmt_spread(s["ratio_step_sharded_over_replicated"]),
             s["ratio_step_sharded_over_replicated"]["n"], s["speed_verdict_vs_1.0"]))
    print("tables+slots per rank: replicated %.0f MB, sharded %.0f MB (%.4f, goal <= 1/%d + 0.01:"
          " %s)" % (s["table_and_slot_bytes_per_rank"]["replicated"] / 1e6,
                    s["table_and_slot_bytes_per_rank"]["sharded"] / 1e6, s["memory_share"], n,
                    s["memory_verdict"]))
    print("bytes sent per rank per step: replicated %.2f MB, sharded %.2f MB"
          % (s["bytes_sent_per_rank_per_step"]["replicated"] / 1e6,
             s["bytes_sent_per_rank_per_step"]["sharded"] / 1e6))
    print("uptime: %s\nwrote %s" % (uptime, path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
