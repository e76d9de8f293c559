#!/usr/bin/env python3
"""Seconds from a fault to the end of a 2-host Gloo job, per kind of fault (by hand, as root).

    python experiments/peer-liveness/measure.py [--cases exit,kill,sigstop,cut,cut-in,cut-out]
        [--timeout-s 20] [--transport gloo|mpi]

A cluster of two namespace hosts (tools/clusters/netns_cluster.py); the launcher on h1, one rank on
each host, tests/parallel/fault_workers/liveness_worker.py reducing exactly every ~20 ms.
At step 20, rank 1 (on h2) exits with code 3, SIGKILLs itself or SIGSTOPs itself; or, once
both ranks are steady, h2 is cut off by iptables DROP inside its namespace: both ways
(``cut``), only what comes in (``cut-in``) or only what goes out (``cut-out``). Prints,
per case, the seconds from the fault to the launcher's exit, to rank 0's failed op, the
exit code and the launcher's lines. HOROVOD_PEER_TIMEOUT_SECONDS is --timeout-s (the
default bound when 20).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(REPO, "tools", "clusters"), os.path.join(REPO, "tests")]

import netns_cluster  # noqa: E402
from jobrunner import PYTHON, Job, job_env  # noqa: E402

WORKER = os.path.join(REPO, "tests", "parallel", "fault_workers", "liveness_worker.py")
CUTS = {"cut": ("in", "out"), "cut-in": ("in",), "cut-out": ("out",)}


def iptables(cluster, verb, ways):
    for way in ways:
        chain, flag = ("INPUT", "-i") if way == "in" else ("OUTPUT", "-o")
        subprocess.run(["ip", "netns", "exec", cluster.netns("h2"), "iptables", verb, chain,
                        flag, "eth0", "-j", "DROP"], check=False, timeout=30)


def events(directory):
    out = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".events"):
            with open(os.path.join(directory, name)) as f:
                out += [json.loads(l) for l in f if l.strip()]
    return out


def run_case(cluster, case, args):
    d = tempfile.mkdtemp(prefix="liveness-%s-" % case)
    scenario = {"exit": "exit", "kill": "kill", "sigstop": "freeze"}.get(case, "run")
    cmd = [PYTHON, "-m", "tf_hvd.runner", "-np", "2", "-H", "h1:1,h2:1", "-p", "2222",
           "-i", cluster.client_key]
    if args.transport == "mpi":
        cmd += ["--mpi", "--network-interfaces", "eth0"]
    cmd += [PYTHON, WORKER, "--scenario", scenario, "--result-dir", d, "--victim", "1",
            "--at", "20", "--max-seconds", "200"]
    env = job_env({"HOROVOD_PEER_TIMEOUT_SECONDS": str(args.timeout_s)})
    fault = None
    try:
        with Job(cluster.exec_argv("h1", cmd), env=env, cwd=REPO) as job:
            if case in CUTS:
                while len([n for n in os.listdir(d) if n.startswith("steady.")]) < 2:
                    time.sleep(0.2)
                time.sleep(0.5)
                iptables(cluster, "-A", CUTS[case])
                fault = time.time()
            res = job.wait(timeout=300)
        ended = time.time()
    finally:
        if case in CUTS:
            iptables(cluster, "-D", CUTS[case])
    evs = events(d)
    if fault is None:
        fault = next(e["wall"] for e in evs if e["event"] == "victim_acts")
    failed = [e["wall"] - fault for e in evs if e["event"] == "collective_failed" and
              e["rank"] == 0]
    lines = [l for l in res.output.splitlines() if l.startswith("tfhvdrun:")]
    print("%-8s end %5.1f s  rank 0's op failed %s  exit %s" % (
        case, ended - fault, "%.1f s" % failed[0] if failed else "-", res.returncode))
    for e in evs:
        if e["event"] == "collective_failed":
            print("         rank %d: %s" % (e["rank"], e["message"].split("}} ")[-1][:220]))
    for l in lines:
        print("         " + l[:200])
    sys.stdout.flush()
    time.sleep(3)  # the cut-off side's rank ends by its own bound


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="exit,kill,sigstop,cut,cut-in,cut-out")
    p.add_argument("--timeout-s", type=float, default=20)
    p.add_argument("--transport", default="gloo", choices=("gloo", "mpi"))
    args = p.parse_args()
    with netns_cluster.Cluster(2, name="lvm%04d" % (os.getpid() % 10000)) as cluster:
        for case in args.cases.split(","):
            run_case(cluster, case, args)


if __name__ == "__main__":
    main()
