"""A/B of two builds of the library in interleaved rounds: allreduce_bench.py's chain
mode (the allreduce, through wheel_vs_source's runner) and rs_chain.py (reducescatter,
allgather, allreduce of one flat vector), np=2, alternating the order every round.

    python experiments/reducescatter-slices/ab.py OLD/_hvd.so NEW/_hvd.so [--rounds 5]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "python", "benchmarks")
sys.path.insert(0, BENCH)
import wheel_vs_source  # noqa: E402
from lib import rounds  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("old")
p.add_argument("new")
p.add_argument("--rounds", type=int, default=5)
a = p.parse_args()
libs = {"old": a.old, "new": a.new}
per_round = []
with tempfile.TemporaryDirectory() as tmp:
    for r in range(a.rounds):
        got = {}
        for which in (["old", "new"] if r % 2 == 0 else ["new", "old"]):
            chain = wheel_vs_source._chain_seconds(libs[which], "64K,1M,16M", 2, tmp,
                                                   "%s-%d" % (which, r))
            out = subprocess.run(
                ["tfhvdrun", "-np", "2", sys.executable, os.path.join(HERE, "rs_chain.py")],
                env=dict(os.environ, TF_HVD_LIBRARY=libs[which]), capture_output=True,
                text=True, check=True).stdout
            line = [l for l in out.splitlines() if "RESULT " in l][0]
            got[which] = {"allreduce_chain_us": {k: v * 1e6 for k, v in chain.items()},
                          "flat": json.loads(line.split("RESULT ", 1)[1])}
        per_round.append(got)
        print("round", r + 1, json.dumps(got), flush=True)
summary = {}
first = per_round[0]["old"]
for k in first["allreduce_chain_us"]:
    ratios = [g["old"]["allreduce_chain_us"][k] / g["new"]["allreduce_chain_us"][k]
              for g in per_round]
    summary["allreduce chain %d B: old/new time" % k] = rounds.spread(ratios)
for op, sizes in first["flat"].items():
    for s in sizes:
        ratios = [g["old"]["flat"][op][s] / g["new"]["flat"][op][s] for g in per_round]
        summary["%s %s: old/new time" % (op, s)] = rounds.spread(ratios)
for k, v in summary.items():
    print("%-40s %.3f [%.3f-%.3f]" % (k, v["median"], v["min"], v["max"]))
json.dump({"rounds": per_round, "summary": summary},
          open(os.path.join(HERE, "ab.json"), "w"), indent=1)
