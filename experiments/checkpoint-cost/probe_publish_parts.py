"""What commit.publish's steps cost after a 100 MB part, by hand, TensorFlow-free.

    ~/.venvs/tf_hvd/bin/python experiments/checkpoint-cost/probe_publish_parts.py [--rounds 5]

One rank of one (size 1): StepWriter.write_arrays + finish of probe_write.py's ~100 MB
arrays (untimed), then publish's steps one by one as commit.publish runs them, each timed:
the record read (the poll finds it at once), the manifest (written, fsynced, renamed),
the fsync of the partial directory, the rename into place, the fsync of the root, and
prune (keep=2: from the third round on it removes a 100 MB step). And for scale: one
small file written and fsynced (what each of the protocol's six fsyncs is at least:
data, partial directory, record, manifest, partial directory, root).
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tf_hvd.checkpoint import StepWriter, commit  # noqa: E402
from tf_hvd.checkpoint.steps import MANIFEST, partial_name, step_name  # noqa: E402

from probe_write import arrays  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    data = arrays()
    base = tempfile.mkdtemp(prefix="publish-probe-", dir=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    root = os.path.join(base, "ckpt")
    times = {}

    def timed(name, fn, *a):
        t0 = time.perf_counter()
        out = fn(*a)
        times.setdefault(name, []).append(time.perf_counter() - t0)
        return out

    try:
        for step in range(1, args.rounds + 3):
            w = StepWriter(root, step, 0, 1, "probe")
            w.write_arrays("model.npz", data)
            record = w.finish()
            partial = os.path.join(root, partial_name(step, "probe"))
            with open(os.path.join(partial, "rank0.files.json")) as f:
                json.load(f)
            manifest = {"format": 1, "step": step, "size": 1, "files": record["files"],
                        "meta": {}, "ranks_meta": {"0": {}}}
            timed("manifest (fsync)", commit.write_json_atomically,
                  os.path.join(partial, MANIFEST), manifest)
            timed("fsync partial dir", commit.fsync_path, partial)
            timed("rename", os.rename, partial, os.path.join(root, step_name(step)))
            timed("fsync root", commit.fsync_path, root)
            timed("prune (keep=2)", commit.prune, root, 2, "probe")

            def small():
                with open(os.path.join(base, "small"), "w") as f:
                    f.write("x" * 200)
                    f.flush()
                    os.fsync(f.fileno())
            timed("small file + fsync", small)
        print("%d rounds (the first two left out: nothing to prune), load %s"
              % (args.rounds, os.getloadavg()))
        for name, t in times.items():
            t = [x * 1e3 for x in t[2:]]
            print("%-20s %6.1f ms [%.1f-%.1f]" % (name, statistics.median(t), min(t), max(t)))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
