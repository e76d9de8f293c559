"""Per library tree: the chain allreduce's time per op at each size and the fusion step
rate, median [min-max] over the rounds of ab_chain.sh."""
import collections
import glob
import json
import os
import re
import statistics
import sys

folder = sys.argv[1]
figs = collections.defaultdict(list)
for path in sorted(glob.glob(os.path.join(folder, "*-r*.json"))):
    m = re.match(r"(chain|fusion)-(.+)-r(\d+)\.json$", os.path.basename(path))
    if not m:
        continue
    kind, label = m.group(1), m.group(2)
    for rec in json.load(open(path))["results"]:
        if kind == "chain" and rec.get("mode") == "chain" and rec["correct"]:
            figs[(label, "chain %d B, us per op" % rec["bytes"])].append(
                rec["latency_us"]["median"])
        elif kind == "fusion" and rec.get("steps_per_s") and rec.get("correct", True):
            figs[(label, "fusion %s, steps/s" % rec["variant"])].append(rec["steps_per_s"])
for (label, what), values in sorted(figs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print("%-40s %-12s %.4g [%.4g-%.4g] (n=%d)" % (what, label, statistics.median(values),
                                                 min(values), max(values), len(values)))
