"""Per library tree: the chain allreduce's time per op at each size and the fusion step
rate, median [min-max] over the rounds of ab_chain.sh. Where the folder has placement.txt
(ab_inline_chain.sh), the runs that began and ended near (placement_pingpong.c's hand-off
under 100 ns: 25-45 ns near, 150-180 far on the development VM) are summarised again on
their own."""
import collections
import glob
import json
import os
import re
import statistics
import sys

folder = sys.argv[1]
trips = collections.defaultdict(list)  # run tag -> round trips (ns) before and after it
placement = os.path.join(folder, "placement.txt")
if os.path.exists(placement):
    for line in open(placement):
        m = re.match(r"(\S+) (before|after) line ping-pong (\d+) ns", line)
        if m:
            trips[m.group(1)].append(int(m.group(3)))


def near(tag):
    return len(trips[tag]) == 2 and max(trips[tag]) < 100


figs = collections.defaultdict(list)
for path in sorted(glob.glob(os.path.join(folder, "*-r*.json"))):
    m = re.match(r"(chain|fusion)-(.+)-r(\d+)\.json$", os.path.basename(path))
    if not m:
        continue
    tag = os.path.basename(path)[:-len(".json")]
    only_near = [False, True] if near(tag) else [False]
    kind, label = m.group(1), m.group(2)
    for rec in json.load(open(path))["results"]:
        for only in only_near:
            key = label + (" near" if only else "")
            if kind == "chain" and rec.get("mode") == "chain" and rec["correct"]:
                figs[(key, "chain %d B, us per op" % rec["bytes"])].append(
                    rec["latency_us"]["median"])
            elif kind == "fusion" and rec.get("steps_per_s") and rec.get("correct", True):
                figs[(key, "fusion %s, steps/s" % rec["variant"])].append(rec["steps_per_s"])
for (label, what), values in sorted(figs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print("%-40s %-14s %.4g [%.4g-%.4g] (n=%d)" % (what, label, statistics.median(values),
                                                 min(values), max(values), len(values)))
