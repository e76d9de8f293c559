"""Per library tree and size: tf_hvd's per-call time and what it adds over TF's floor,
median [min-max] over the rounds of ab.sh (files <label>-np<N>-r<k>.json), all rounds and
then by the host's CPU placement around each run (near: a cache line's round trip under
200 ns before and after; far: over it both times; mixed runs are counted in "all" only)."""
import collections
import glob
import json
import os
import re
import statistics
import sys

folder = sys.argv[1]
rows = collections.defaultdict(lambda: collections.defaultdict(list))
loads = collections.defaultdict(list)
for path in sorted(glob.glob(os.path.join(folder, "*-r*.json"))):
    m = re.match(r"(.+)-np(\d+)-r(\d+)\.json$", os.path.basename(path))
    if not m:
        continue
    data = json.load(open(path))
    label = "%s np=%s" % (m.group(1), m.group(2))
    loads[label].append(data["machine"].get("loadavg", [None])[0])
    trips = []
    for run in data["rounds"][0]["runs"].values():
        for when in ("before", "after"):
            trips.append(((run.get("placement") or {}).get(when) or {}).get("round_trip_ns"))
    place = ("near" if all(t is not None and t < 200 for t in trips) else
             "far" if all(t is not None and t >= 200 for t in trips) else None)
    for row in data["summary"]:
        per_call = row["per_call_us"]["median"]
        added = row["added_us"]["median"]
        if per_call is None:
            continue
        for key in ("all", place) if place else ("all",):
            rows[(row["bytes"], label, key)]["per_call"].append(per_call)
            rows[(row["bytes"], label, key)]["added"].append(added)


def fmt(v):
    return "%.0f [%.0f-%.0f] (n=%d)" % (statistics.median(v), min(v), max(v), len(v)) if v else "-"


for (size, label, place), figs in sorted(rows.items()):
    print("%9d B  %-14s %-4s per call %-28s added %s" % (size, label, place,
                                                        fmt(figs["per_call"]),
                                                        fmt(figs["added"])))
for label, l in sorted(loads.items()):
    print("load at start (%s): %s" % (label, ", ".join("%.1f" % x for x in l if x is not None)))
