"""Scaling across hosts: tf_hvd and MultiWorkerMirroredStrategy at 2, 4 and 8 hosts,
one rank per host, every link shaped to 1 Gbit/s, and a model fitted to the points.

    sudo python python/benchmarks/scaling_bench.py --quick      # ~10-14 min on 2 busy cores
    python python/benchmarks/scaling_bench.py [--hosts 2,4,8] [--rounds 3]
        [--rate-mbit 1000] [--sizes 1M,16M,64M] [--fit-steps 120]

Needs root. For every host count N it makes a namespace cluster of N hosts
(tools/clusters/netns_cluster.py; tbf on both ends of every veth), and then:

  link          plain TCP through the shaped links (link_stream.py), before and after
                the rounds: one stream h2 -> h1, and a ring of streams (every host
                sends to the next one at once, as a ring allreduce does): what TCP
                itself moves through the shaping, the reference besides the nominal rate
  rounds        (interleaved: the order of the contenders flips every round)
    tf_hvd_gloo   tfhvdrun -np N -H h1:1,...,hN:1: allreduce latency and bus bandwidth
                  in a tf.function per size (the ring at these sizes), and Keras fit of
                  the MLP (batch 64 per worker)
    tf_hvd_gloo_nospin  the same with HOROVOD_SPIN_US=0: the N "hosts" share this
                  machine's cores, which real hosts do not; a rank that spins while it
                  waits takes the core another host's rank needs (see the notes)
    mwms_ring     MultiWorkerMirroredStrategy (RING), one worker per host: the same
    no_allreduce  tfhvdrun, the same fit without any allreduce: the compute per step of
                  N ranks on this machine, which the model needs

The target: tf_hvd's bus bandwidth at 64 MiB >= 0.9x the link rate at every N, "met"
only when every round clears it (rounds.verdict). The model (scaling_model.py) is
fitted to the allreduce points (per-hop latency and bandwidth) and to the fit steps
(overlap), measured vs predicted per point, then projects to 64-512 workers on
25 Gbit/s links. Writes python/benchmarks/results/scaling.json.

MPI is left out: MPICH does not carry its messages over the shaped link between the
namespace hosts (multihost_bench.MPI_NOTE).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools", "clusters"))

import allreduce_bench  # noqa: E402
from lib import formats, jsonio, launch, machine, paths, tables  # noqa: E402
import multihost_bench  # noqa: E402
import netns_cluster  # noqa: E402
from lib import rounds as rounds_lib  # noqa: E402
import scaling_model  # noqa: E402
import training_bench  # noqa: E402

LINK_STREAM_PY = os.path.join(HERE, "link_stream.py")
LINK_PORT = 5301
MWMS_PORT = 23456
# (warm-up, timed calls) per size: fewer than allreduce_bench's, as every figure here is
# the median of rounds and one 64 MiB call takes 0.5-1.2 s on these links
ITERATIONS = {False: {formats.MiB: (5, 60), 16 * formats.MiB: (2, 10), 64 * formats.MiB: (2, 8)},
              True: {formats.MiB: (3, 20), 16 * formats.MiB: (2, 4), 64 * formats.MiB: (2, 4)}}
TARGET = 0.9                     # busbw / link rate at TARGET_BYTES
TARGET_BYTES = 64 * formats.MiB
CONTENDERS = ("tf_hvd_gloo", "tf_hvd_gloo_nospin", "mwms_ring", "no_allreduce")
TF_HVD = ("tf_hvd_gloo", "tf_hvd_gloo_nospin")
NOSPIN_ENV = {"HOROVOD_SPIN_US": "0"}
# The MLP's gradients (784-512-512-10, fp32): what one fit step allreduces.
MLP_GRAD_BYTES = 4 * (784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10)


# The core's ring moves each chunk in pieces of at most RING_PIECE_BYTES, and in at
# least 3 pieces from 3 * RING_MIN_PIECE_BYTES on (RingAllreduce::PiecesPerChunk,
# cc/common/algorithms/ring_allreduce.h), with up to two pieces in flight.
RING_PIECE_BYTES = formats.MiB
RING_MIN_PIECE_BYTES = 64 * 1024


def ring_pieces(nbytes, n, elem=4):
    """Pieces per chunk of the core's ring for an allreduce of nbytes over n ranks."""
    largest = -(-(nbytes // elem) // n)
    chunk = largest * elem
    pieces = max(-(-chunk // RING_PIECE_BYTES), min(3, chunk // RING_MIN_PIECE_BYTES))
    return max(1, min(pieces, largest))


def contenders(n, hvd_env=None):
    layout = layout_of(n)
    return {
        "tf_hvd_gloo": launch.Contender(
            "tf_hvd_gloo", "hvd", "tf_hvd (Gloo)",
            "tfhvdrun -np %d -H %s (Gloo ring)" % (n, layout), n, hvd_env),
        "tf_hvd_gloo_nospin": launch.Contender(
            "tf_hvd_gloo_nospin", "hvd", "tf_hvd (Gloo), no spin",
            "HOROVOD_SPIN_US=0 tfhvdrun -np %d -H %s (Gloo ring; waiting ranks sleep at "
            "once)" % (n, layout), n, dict(hvd_env or {}, **NOSPIN_ENV)),
        "mwms_ring": launch.Contender(
            "mwms_ring", "mwms", "MWMS (RING)",
            "MultiWorkerMirroredStrategy RING, one worker per host (TF_CONFIG)", n),
        "no_allreduce": launch.Contender(
            "no_allreduce", "hvd_bound", "no allreduce",
            "tfhvdrun -np %d -H %s, each rank fits its own batch, no allreduce: the "
            "compute per step" % (n, layout), n)}


def layout_of(n):
    return ",".join("h%d:1" % i for i in range(1, n + 1))


def commands_on(cluster, n):
    """launch._commands for a cluster of n hosts, one rank on each."""
    py = sys.executable
    layout = layout_of(n)

    def commands(contender, worker_args, hvd_launcher_args):
        worker = [py, launch.WORKER_PY] + worker_args
        if contender.kind in ("hvd", "hvd_bound"):
            return [(cluster.exec_argv("h1", [py, "-m", "tf_hvd.runner", "-np", str(n),
                                              "-H", layout] + worker), {}, "")]
        # One worker per host: every worker can listen on the same port.
        return multihost_bench.mwms_runs(cluster, cluster.hosts,
                                         [MWMS_PORT] * len(cluster.hosts), worker)

    return commands


# ---------------------------------------------------------------------------
# The link reference: plain TCP through the shaping


def measure_link(cluster, seconds, ring):
    """MB/s that plain TCP receives per host: ring=True every host streams to the next
    at once; ring=False one stream h2 -> h1. Returns {"per_host": [...], "min",
    "median"} (MB = 10^6 bytes)."""
    py = sys.executable
    hosts = cluster.hosts
    start_at = time.time() + 2.0 + 0.1 * len(hosts)
    procs = []
    for i, host in enumerate(hosts):
        nxt = hosts[(i + 1) % len(hosts)]
        args = [py, LINK_STREAM_PY, "--port", str(LINK_PORT), "--seconds", str(seconds),
                "--start-at", repr(start_at)]
        if ring:
            args += ["--send-to", "%s:%d" % (cluster.address(nxt), LINK_PORT)]
        elif host == "h2":
            args += ["--send-to", "%s:%d" % (cluster.address("h1"), LINK_PORT), "--receive",
                     "0"]
        elif host != "h1":
            continue
        procs.append(subprocess.Popen(cluster.exec_argv(host, args), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, start_new_session=True))
    rates = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=seconds + 90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError("link_stream failed: %s" % err.decode(errors="replace")[-400:])
        rate = json.loads(out.decode().strip().splitlines()[-1])["recv_mbyte_per_s"]
        if rate is not None:
            rates.append(rate)
    return {"pattern": "ring" if ring else "h2->h1", "seconds": seconds,
            "per_host_mbyte_per_s": rates,
            "min": min(rates) if rates else None,
            "median": rounds_lib.spread(rates)["median"]}


def _tbf_stats(argv):
    """{'dropped', 'overlimits', 'sent_bytes'} summed over the qdiscs `tc -s qdisc show`
    prints."""
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         timeout=30).stdout.decode(errors="replace")
    stats = {"dropped": 0, "overlimits": 0, "sent_bytes": 0}
    for m in re.finditer(r"Sent (\d+) bytes \d+ pkt \(dropped (\d+), overlimits (\d+)", out):
        stats["sent_bytes"] += int(m.group(1))
        stats["dropped"] += int(m.group(2))
        stats["overlimits"] += int(m.group(3))
    return stats


def link_counters(cluster):
    """Packets the tbf qdiscs dropped (both ends of every link) and TCP segments
    retransmitted, summed over the hosts: whether the shaping itself lost data. Also
    per host ("per_host"): what its outgoing shaper (eth0) sent, dropped and held back
    (overlimits: packets that waited for tokens, i.e. a backlogged link), so a single
    slow link or rank shows as the odd one out."""
    total = {"tbf_dropped": 0, "tbf_overlimits": 0, "tcp_retrans_segs": 0}
    total.update((_TCP_EXT[k], 0) for k in _TCP_EXT)
    total["per_host"] = {}
    for host in cluster.hosts:
        inside = ["ip", "netns", "exec", cluster.netns(host)]
        for end, argv in (("out", inside + ["tc", "-s", "qdisc", "show", "dev", "eth0"]),
                          ("in", ["tc", "-s", "qdisc", "show", "dev", cluster._veth(host)])):
            st = _tbf_stats(argv)
            total["tbf_dropped"] += st["dropped"]
            total["tbf_overlimits"] += st["overlimits"]
            total["per_host"].setdefault(host, {}).update(
                ("%s_%s" % (end, k), v) for k, v in st.items())
        snmp = subprocess.run(inside + ["cat", "/proc/net/snmp"], stdout=subprocess.PIPE,
                              timeout=30).stdout.decode()
        rows = [line.split()[1:] for line in snmp.splitlines() if line.startswith("Tcp:")]
        if len(rows) == 2:
            total["tcp_retrans_segs"] += int(dict(zip(*rows)).get("RetransSegs", 0))
        netstat = subprocess.run(inside + ["cat", "/proc/net/netstat"],
                                 stdout=subprocess.PIPE, timeout=30).stdout.decode()
        rows = [line.split()[1:] for line in netstat.splitlines()
                if line.startswith("TcpExt:")]
        if len(rows) == 2:
            ext = dict(zip(*rows))
            for k, name in _TCP_EXT.items():
                total[name] += int(ext.get(k, 0))
    return total


# Retransmissions by kind (TcpExt): timeouts stall a connection for >= 200 ms (RTO),
# tail-loss probes for a few round trips.
_TCP_EXT = {"TCPTimeouts": "tcp_rto_timeouts", "TCPLossProbes": "tcp_loss_probes",
            "TCPSpuriousRTOs": "tcp_spurious_rtos"}


def _delta(after, before):
    return dict((k, _delta(after[k], before[k]) if isinstance(after[k], dict)
                 else after[k] - before[k]) for k in after)


# ---------------------------------------------------------------------------
# One host count


def run_host_count(n, args, configs, results_dir):
    chosen = [c for c in CONTENDERS if c in formats.parse_list(args.contenders)]
    cs = contenders(n, dict(kv.split("=", 1) for kv in formats.parse_list(args.hvd_env)))
    per_round, links = [], {}
    with netns_cluster.Cluster(n, name="tfhs", rate_mbit=args.rate_mbit) as cluster:
        launch._commands = commands_on(cluster, n)
        tables.log("[scaling] N=%d: link reference ..." % n)
        counters = link_counters(cluster)
        links["before"] = {"ring": measure_link(cluster, args.link_seconds, True),
                           "single": measure_link(cluster, args.link_seconds, False)}
        now = link_counters(cluster)
        links["before"]["counters"], counters = _delta(now, counters), now
        for index in range(args.rounds):
            runs = {}
            for name in rounds_lib.round_order(chosen, index):
                if name == "no_allreduce" and index > 0:
                    continue  # the model's compute reference, no target: one run is enough
                c = cs[name]
                parts = [p for p, m in (("allreduce", allreduce_bench),
                                        ("training", training_bench))
                         if c.kind in m.KINDS and p in args.parts]
                tables.log("[scaling] N=%d round %d/%d: %s ..." % (n, index + 1,
                                                                  args.rounds, name))
                run = launch.run_contender(
                    c, parts, dict((p, configs[p]) for p in parts),
                    os.path.join(results_dir, "runs"), os.path.join(results_dir, "logs"),
                    args.timeout, "%s-n%d-r%d" % (args.tag, n, index + 1))
                now = link_counters(cluster)
                run["link_counters"], counters = _delta(now, counters), now
                tables.log("[scaling] N=%d %s %s in %ss %s" % (
                    n, name, run["status"], run["seconds"], run["error"] or ""))
                runs[name] = run
            per_round.append(runs)
        links["after"] = {"ring": measure_link(cluster, args.link_seconds, True),
                          "single": measure_link(cluster, args.link_seconds, False)}
        links["after"]["counters"] = _delta(link_counters(cluster), counters)
        shaping = cluster.shaping()
    return summarize_host_count(n, args, per_round, links, shaping)


def ring_overhead(n, nbytes, seconds, tcp_bytes_per_s):
    """Where a ring allreduce's time goes beyond what TCP needs to move its bytes:
    the time over 2(N-1)/N * bytes / (TCP ring rate), spread over the ring's
    exchanges (2(N-1) steps, each chunk of bytes/N in ring_pieces pieces, every
    exchange a send and a receive)."""
    exchanges = 2 * (n - 1) * ring_pieces(nbytes, n)
    wire = 2.0 * (n - 1) / n * nbytes / tcp_bytes_per_s
    return {"tcp_time_s": wire, "excess_s": seconds - wire, "exchanges": exchanges,
            "excess_ms_per_exchange": (seconds - wire) * 1e3 / exchanges}


def _fit_ratio(runs, a_name, b_name):
    """samples/s of a over b in one round (None if either has none)."""
    a = (_records(runs.get(a_name), "training") or [None])[0]
    b = (_records(runs.get(b_name), "training") or [None])[0]
    if not (a and b and a["samples_per_s"] and b["samples_per_s"]):
        return None
    return a["samples_per_s"] / b["samples_per_s"]


def _records(run, part):
    return ((run or {}).get("result") or {}).get("parts", {}).get(part, [])


def summarize_host_count(n, args, per_round, links, shaping):
    link_gbps = args.rate_mbit * 1e6 / 8 / formats.GB
    tcp_ring = min(links[k]["ring"]["min"] or 0 for k in ("before", "after")) / 1e3 or None
    out = {"hosts": n, "layout": layout_of(n), "link": shaping, "link_rate_gbps": link_gbps,
           "tcp_reference": links, "allreduce": {}, "fit": {}, "runs": []}
    for index, runs in enumerate(per_round):
        out["runs"].append(dict((name, {
            "status": run["status"], "seconds": run["seconds"], "error": run["error"],
            "loadavg_1min": run["loadavg_1min"], "commands": run["commands"],
            "link_counters": run.get("link_counters"),
            "algorithm_counts_rank0": (run.get("result") or {}).get("algorithm_counts")})
            for name, run in runs.items()))
    for name in TF_HVD + ("mwms_ring",):
        sizes = {}
        for runs in per_round:
            for rec in _records(runs.get(name), "allreduce"):
                sizes.setdefault(rec["bytes"], []).append(rec)
        table = {}
        for nbytes, recs in sorted(sizes.items()):
            busbw = [r["busbw_gbps"] for r in recs]
            table[formats.human_bytes(nbytes)] = {
                "bytes": nbytes, "correct": all(r["correct"] for r in recs),
                "latency_s_median": rounds_lib.spread(
                    [r["latency_us"]["median"] / 1e6 for r in recs]),
                "busbw_gbps": rounds_lib.spread(busbw),
                "busbw_over_link_rate": rounds_lib.spread([b / link_gbps for b in busbw]),
                "busbw_over_tcp_ring": rounds_lib.spread(
                    [b / tcp_ring for b in busbw] if tcp_ring else [])}
            if name in TF_HVD and tcp_ring:
                table[formats.human_bytes(nbytes)]["beyond_tcp"] = ring_overhead(
                    n, nbytes, table[formats.human_bytes(nbytes)]["latency_s_median"]["median"],
                    tcp_ring * formats.GB)
        if table:
            out["allreduce"][name] = table
    out["target"] = {"bytes": TARGET_BYTES, "busbw_over_link_rate": TARGET, "verdict": {}}
    for name in TF_HVD:
        target = out["allreduce"].get(name, {}).get(formats.human_bytes(TARGET_BYTES))
        if target:
            out["target"]["verdict"][name] = rounds_lib.verdict(
                target["busbw_over_link_rate"]["values"], ">=", TARGET)
    fit = {}
    for name in CONTENDERS:
        recs = [(_records(runs.get(name), "training") or [None])[0] for runs in per_round]
        fit[name] = {"samples_per_s": rounds_lib.spread(
                         [r["samples_per_s"] if r else None for r in recs]),
                     "step_ms_median": rounds_lib.spread(
                         [r["step_ms"]["median"] if r else None for r in recs]),
                     "finite_loss": all(r["finite_loss"] for r in recs if r)}
    for name in TF_HVD:
        for other in ("mwms_ring", "no_allreduce"):
            fit["%s_over_%s" % (name, other)] = rounds_lib.spread(
                [_fit_ratio(runs, name, other) for runs in per_round])
    out["fit"] = fit
    return out


# ---------------------------------------------------------------------------
# The model: fitted to the points, then projected


def check_model(per_n, name):
    """Fits scaling_model to contender name's measured points; measured vs predicted
    per point."""
    points = []
    for n, res in per_n.items():
        for row in res["allreduce"].get(name, {}).values():
            t = row["latency_s_median"]["median"]
            if t:
                points.append((n, row["bytes"], t))
    if len(points) < 2:
        return None
    alpha, bandwidth = scaling_model.fit_ring(points)
    check = {"contender": name,
             "fitted": {"alpha_s_per_hop": alpha, "bandwidth_gbps": bandwidth / formats.GB},
             "allreduce": [], "fit_step": []}
    for n, nbytes, t in points:
        pred = scaling_model.ring_allreduce_seconds(n, nbytes, alpha, bandwidth)
        check["allreduce"].append({"hosts": n, "bytes": nbytes, "measured_s": t,
                                   "predicted_s": pred, "measured_over_predicted": t / pred})
    steps = []
    for n, res in per_n.items():
        step = res["fit"].get(name, {}).get("step_ms_median", {}).get("median")
        compute = res["fit"].get("no_allreduce", {}).get("step_ms_median", {}).get("median")
        if step and compute:
            steps.append((n, MLP_GRAD_BYTES, compute / 1e3, step / 1e3))
    if steps:
        overlap = scaling_model.fit_overlap(steps, alpha, bandwidth)
        check["fitted"]["overlap"] = overlap
        for n, grad, compute, step in steps:
            pred = scaling_model.step_seconds(n, grad, compute, overlap, alpha, bandwidth)
            check["fit_step"].append({"hosts": n, "grad_bytes": grad, "compute_s": compute,
                                      "measured_s": step, "predicted_s": pred,
                                      "measured_over_predicted": step / pred})
    return check


def projection(per_n, args, name):
    """Projected efficiency on 25 Gbit/s links, with contender name's busbw/link ratio
    measured here (the smallest median over the host counts) as the ring's share of
    the link."""
    key = formats.human_bytes(TARGET_BYTES)
    ratios = [res["allreduce"][name][key]["busbw_over_link_rate"]["median"]
              for res in per_n.values() if key in res["allreduce"].get(name, {})]
    link_eff = min(min(ratios), 1.0) if ratios else 0.9
    rows = scaling_model.project(link_gbit=args.project_link_gbit, link_efficiency=link_eff,
                                 alpha=args.project_alpha_us * 1e-6)
    return {"assumptions": {
        "link_gbit": args.project_link_gbit, "link_efficiency": link_eff,
        "link_efficiency_source": "smallest median busbw/link rate at 64 MiB over the "
                                  "host counts measured here (%s)" % name
                                  if ratios else "assumed",
        "alpha_s_per_hop": args.project_alpha_us * 1e-6,
        "bytes_per_param": 4,
        "topology": "one ring over all workers, every hop a link of that rate",
        "compute_s": "per step of one V100-class GPU at batch 64 (ResNet-50 0.22 s, "
                     "VGG-16 0.35 s: ~1.6x ResNet-50 per image in fp32)",
        "not_modeled": "fp16 compression, hierarchical allreduce, stragglers"},
        "rows": rows,
        "horovod_paper": {"inception_v3_resnet101_128_512_gpus": "88-90%",
                          "vgg16_512_gpus": "68%",
                          "setup": "Pascal GPUs, 25 Gbit/s RoCE, Tensor Fusion"}}


# ---------------------------------------------------------------------------


def print_summary(summary):
    key = formats.human_bytes(TARGET_BYTES)
    ar_rows, fit_rows = [], []
    for n, res in sorted(summary["hosts"].items()):
        row = [n, formats.fmt(res["tcp_reference"]["before"]["ring"]["min"])]
        for name in TF_HVD + ("mwms_ring",):
            ar = res["allreduce"].get(name, {}).get(key)
            row += [rounds_lib.fmt_spread(ar and ar["busbw_over_link_rate"])]
            if name in TF_HVD:
                row += [res["target"]["verdict"].get(name)]
        ar_rows.append(row)
        fit = res["fit"]
        fit_rows.append([n] + [rounds_lib.fmt_spread(fit.get(name, {}).get("samples_per_s"), 4)
                               for name in CONTENDERS] +
                        [rounds_lib.fmt_spread(fit.get("%s_over_mwms_ring" % name))
                         for name in TF_HVD])
    tables.print_table(
        "Allreduce %s, busbw / link rate (%g Mbit/s), median [min-max] over rounds"
        % (key, summary["link_rate_mbit"]),
        ["hosts", "TCP ring MB/s", "tf_hvd", "target", "tf_hvd no spin", "target",
         "MWMS"], ar_rows)
    tables.print_table("Keras fit, MLP, samples/s (all workers)",
                       ["hosts"] + list(CONTENDERS) + ["tf_hvd/MWMS", "no spin/MWMS"],
                       fit_rows)
    model = summary.get("model_check")
    if model:
        tables.log("model: alpha %.1f us per hop, bandwidth %.4f GB/s, overlap %s" % (
            model["fitted"]["alpha_s_per_hop"] * 1e6, model["fitted"]["bandwidth_gbps"],
            formats.fmt(model["fitted"].get("overlap"))))
        tables.print_table("Model vs measured", ["hosts", "what", "measured s",
                                                 "predicted s", "ratio"],
                           [[p["hosts"], formats.human_bytes(p["bytes"]),
                             formats.fmt(p["measured_s"], 4), formats.fmt(p["predicted_s"], 4),
                             formats.fmt(p["measured_over_predicted"])]
                            for p in model["allreduce"]] +
                           [[p["hosts"], "fit step", formats.fmt(p["measured_s"], 4),
                             formats.fmt(p["predicted_s"], 4),
                             formats.fmt(p["measured_over_predicted"])]
                            for p in model["fit_step"]])
    proj = summary["projection"]
    workers = scaling_model.PROJECTED_WORKERS
    tables.print_table("Projected scaling efficiency, %g Gbit/s links" %
                       proj["assumptions"]["link_gbit"],
                       ["model", "overlap"] + [str(w) for w in workers],
                       [[r["label"], r["overlap"]] + ["%.0f%%" % (100 * r["efficiency"][w])
                                                      for w in workers]
                        for r in proj["rows"]])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="2 rounds, fewer calls and steps (default: 3 rounds; "
                        "no_allreduce runs in the first round only)")
    p.add_argument("--hosts", default="2,4,8", help="host counts (one rank per host)")
    p.add_argument("--rounds", type=int, default=None, help="rounds per host count")
    p.add_argument("--rate-mbit", type=float, default=1000.0, help="tbf rate of every link")
    p.add_argument("--sizes", default=None,
                   help="allreduce sizes (default 1M,64M with --quick, else 1M,16M,64M)")
    p.add_argument("--fit-steps", type=int, default=None,
                   help="timed fit steps (default 50 with --quick, else 120)")
    p.add_argument("--link-seconds", type=float, default=3.0,
                   help="seconds of each TCP reference stream")
    p.add_argument("--contenders", default=",".join(CONTENDERS))
    p.add_argument("--parts", default="allreduce,training",
                   help="which parts to run (allreduce, training)")
    p.add_argument("--hvd-env", default="",
                   help="extra environment of the tf_hvd contender, e.g. HOROVOD_SPIN_US=0")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per contender run (default 300 with --quick, else 600)")
    p.add_argument("--model-contender", default="tf_hvd_gloo_nospin", choices=TF_HVD,
                   help="whose allreduce points the model is fitted to")
    p.add_argument("--project-link-gbit", type=float, default=25.0)
    p.add_argument("--project-alpha-us", type=float, default=10.0,
                   help="per-hop latency of the projection (microseconds)")
    p.add_argument("--results-dir", default=paths.DEFAULT_RESULTS_DIR)
    p.add_argument("--tag", default="scaling")
    args = p.parse_args(argv)
    reason = netns_cluster.Cluster.available()
    if reason:
        raise SystemExit("scaling_bench: cannot make the namespace cluster: %s" % reason)
    args.rounds = args.rounds or (2 if args.quick else 3)
    args.parts = formats.parse_list(args.parts)
    args.timeout = args.timeout or (300.0 if args.quick else 600.0)
    sizes = formats.parse_list(args.sizes or ("1M,64M" if args.quick else "1M,16M,64M"),
                              formats.parse_size)
    configs = {"allreduce": allreduce_bench.make_config(sizes, ["function"], args.quick),
               "training": training_bench.make_config(
                   args.quick, models=["mlp"], modes=["fit"],
                   steps=args.fit_steps or (50 if args.quick else 120))}
    for size in sizes:
        if size in ITERATIONS[args.quick]:
            configs["allreduce"]["iterations"][str(size)] = ITERATIONS[args.quick][size]
    results_dir = paths.ensure_dir(os.path.abspath(args.results_dir))
    header = jsonio.run_header("scaling", args)
    memcpy_start = machine.memcpy_gbps()
    per_n = {}
    for n in formats.parse_list(args.hosts, int):
        if n < 2:
            raise SystemExit("scaling_bench: host counts must be >= 2 (got %d)" % n)
        per_n[n] = run_host_count(n, args, configs, results_dir)
    memcpy_end = machine.memcpy_gbps()
    jsonio.finish_header(header)
    record = machine.machine_record(header, memcpy_start, memcpy_end)
    summary = dict(header)
    summary.update({
        "machine_record": record, "link_rate_mbit": args.rate_mbit, "rounds": args.rounds,
        "config": configs, "target": "tf_hvd busbw at 64 MiB >= %.1fx the link rate at "
                                     "every host count, in every round" % TARGET,
        "notes": [multihost_bench.MPI_NOTE + "; MPI is left out of this benchmark",
                  "all hosts are network namespaces on one machine of %d cores: the fit "
                  "figures at larger N are bound by that machine's CPU, not the links; "
                  "compare contenders within a host count" % os.cpu_count(),
                  "busbw = algbw * 2(N-1)/N; the link rate is the tbf rate (%g Mbit/s = "
                  "%.3f GB/s); tbf counts each packet's Ethernet/IP/TCP headers, so "
                  "TCP payload cannot reach it (the TCP reference shows how close it gets)"
                  % (args.rate_mbit, args.rate_mbit / 8e3),
                  "tf_hvd_gloo_nospin runs with HOROVOD_SPIN_US=0: here the N hosts share "
                  "%d cores, so a rank that spins (sched_yield) for up to 5 ms while it "
                  "waits for a peer takes the core the peer's rank needs; on real hosts "
                  "every rank has its own cores and the default spin costs nothing"
                  % os.cpu_count()],
        "hosts": per_n})
    model_name = args.model_contender
    summary["model_check"] = check_model(per_n, model_name)
    summary["projection"] = projection(per_n, args, model_name)
    path = os.path.join(results_dir, "%s.json" % args.tag)
    jsonio.write_json(path, summary)
    machine.log_machine_record(record)
    print_summary(summary)
    tables.log("wrote %s" % path)
    ok = all(r["status"] == "ok" for res in per_n.values() for runs in res["runs"]
             for r in runs.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
