"""Checks of one rank of a job that spans several hosts (the namespace cluster).

    tfhvdrun -np 4 -H h1:2,h2:2 python multihost_checks.py --layout h1:2,h2:2 \
        --np 4 --transport gloo --result-dir DIR [--train SECTIONS] [--expect-env K=V]

Sections: the topology the layout implies (rank, local_rank, local_size, cross_rank,
cross_size, is_homogeneous, the host name each rank runs on); no process on any host
shows the rendezvous secret on its command line (Gloo); every collective case of
collective_cases.py exact in one tf.function; with ``--algorithms hierarchical|flat``,
the hierarchical allreduce/allgather checks (hierarchical_checks.py: exact, equal to the
flat results, and which path ran); then, with ``--train``, the training
worker's equivalence sections (train_eager.py, one process's results on the same
samples) run in this same process. Prints ``OK <n> checks`` (and the training worker's
``TRAINING OK <n> checks``) per rank.
"""

import argparse
import os
import runpy
import socket
import sys

import tensorflow as tf

import tf_hvd as hvd

import checklib
import collective_cases as cc
import hierarchical_checks

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN_EAGER = os.path.join(os.path.dirname(HERE), "training_workers", "train_eager.py")


def expected_topology(layout, rank):
    """Horovod's topology of ``rank`` when ranks fill ``layout`` ('h1:3,h2:1') in order:
    cross_rank/cross_size count the hosts that have a rank with this local_rank."""
    hosts = [(h, int(n)) for h, n in (e.split(":") for e in layout.split(","))]
    r = rank
    for index, (host, slots) in enumerate(hosts):
        if r < slots:
            local_rank = r
            break
        r -= slots
    peers = [i for i, (_, slots) in enumerate(hosts) if slots > local_rank]
    return {"host": host, "local_rank": local_rank, "local_size": slots,
            "cross_rank": peers.index(index), "cross_size": len(peers),
            "is_homogeneous": len(set(s for _, s in hosts)) == 1}


def check_topology(ck, layout, args):
    n, r = hvd.size(), hvd.rank()
    ck.equal("size", n, args.np)
    exp = expected_topology(layout, r)
    ck.equal("host name (rank placement)", socket.gethostname(), exp["host"])
    ck.equal("local_rank", hvd.local_rank(), exp["local_rank"])
    ck.equal("local_size", hvd.local_size(), exp["local_size"])
    ck.equal("cross_rank", hvd.cross_rank(), exp["cross_rank"])
    ck.equal("cross_size", hvd.cross_size(), exp["cross_size"])
    ck.equal("is_homogeneous", hvd.is_homogeneous(), exp["is_homogeneous"])
    ck.equal("mpi_enabled", hvd.mpi_enabled(), args.transport == "mpi")
    ops = tf.function(lambda: (hvd.local_rank_op(), hvd.local_size_op()))()
    ck.equal("local_rank_op, local_size_op", tuple(int(t) for t in ops),
             (exp["local_rank"], exp["local_size"]))
    # Every rank agrees on every rank's placement.
    seen = hvd.allgather_object((r, socket.gethostname(), hvd.local_rank(), hvd.cross_rank()))
    ck.equal("placement seen by all ranks", seen,
             [(q, expected_topology(layout, q)["host"],
               expected_topology(layout, q)["local_rank"],
               expected_topology(layout, q)["cross_rank"]) for q in range(n)])
    for item in args.expect_env:
        key, _, value = item.partition("=")
        ck.equal("environment %s" % key, os.environ.get(key), value)


def check_secret_hidden(ck):
    """The secret reached this rank, yet no process (on any host of the cluster: they
    share the PID namespace) carries it in its command line."""
    import psutil
    secret = os.environ.get("HOROVOD_GLOO_RENDEZVOUS_SECRET", "")
    ck.expect(len(secret) >= 32, "secret forwarded", "got %d characters" % len(secret))
    shown = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        if secret and secret in " ".join(p.info["cmdline"] or []):
            shown.append(p.info["pid"])
    ck.equal("processes showing the secret in argv", shown, [])


def main():
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--layout", required=True)
    pre.add_argument("--train", default="")
    pre.add_argument("--algorithms", choices=("hierarchical", "flat"), default="",
                     help="check that this allreduce/allgather path ran (knobs on)")
    mine, rest = pre.parse_known_args()
    args = checklib.parse_args(rest)
    hvd.init()
    n, r = hvd.size(), hvd.rank()
    ck = checklib.Checker(r, n, args.result_dir, args.only)
    ck.section("topology", check_topology, ck, mine.layout, args)
    if n != args.np:
        return ck.finish()
    if args.transport == "gloo":
        ck.section("secret", check_secret_hidden, ck)
    # (the cases' local_*_op expect one host; the topology section checks them here)
    cases = [c for c in cc.all_cases(n, r) if not c.label.startswith("local_")]
    ck.section("cases tf.function", cc.run_cases, ck, cases, "function")
    if mine.algorithms:
        ck.section("hierarchical", hierarchical_checks.check_algorithms, ck, mine.algorithms)
        ck.section("hierarchical process sets", hierarchical_checks.check_process_sets, ck)
    code = ck.finish()
    if code or not mine.train:
        hvd.shutdown()
        return code
    os.environ["TRAINING_ONLY"] = mine.train
    sys.argv = [TRAIN_EAGER, os.path.join(args.result_dir, "train-tmp-%d" % r)]
    sys.path.insert(0, os.path.dirname(TRAIN_EAGER))
    try:
        runpy.run_path(TRAIN_EAGER, run_name="__main__")
    except SystemExit as e:
        return e.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
