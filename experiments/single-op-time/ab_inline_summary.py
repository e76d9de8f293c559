"""Training / its own bound per HOROVOD_INLINE_ROUNDS value (the file name's last digit),
every round of every run of ab_inline_training.sh pooled: median [min-max]."""
import collections
import glob
import json
import os
import re
import statistics
import sys

rows = collections.defaultdict(list)
for folder in sys.argv[1:]:
    for path in sorted(glob.glob(os.path.join(folder, "tr-*-?.json"))):
        value = re.search(r"(\d)\.json$", path).group(1)
        for t in json.load(open(path))["targets"]:
            if re.search(r"_vs_bound\[(gloo|mpi)\]$", t["name"]):
                rows[(t["name"], value)] += [v for v in t["ratio_spread"]["values"] if v is not None]
for (name, value), vals in sorted(rows.items()):
    print("%-26s inline=%s  %.3f [%.3f-%.3f] (n=%d)" % (name, value, statistics.median(vals),
                                                       min(vals), max(vals), len(vals)))
