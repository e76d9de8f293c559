"""Runs worker.py's elastic schedule (np 2 -> 3 -> 2) with sharded tables and with a
replicated keras Embedding, and compares every rank's table and head at every sync
and at the end (see README.md)::

    python experiments/embedding-elastic/run.py [DIR]
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def job(directory, plain):
    os.makedirs(directory)
    marker = os.path.join(directory, "grow")
    discover = os.path.join(directory, "discover.sh")
    with open(discover, "w") as f:
        f.write("#!/bin/sh\necho 127.0.0.1:1\necho 127.0.0.2:1\n"
                "[ -e %s ] && echo 127.0.0.3:1\nexit 0\n" % marker)
    os.chmod(discover, 0o755)
    cmd = [sys.executable, "-m", "tf_hvd.runner", "-np", "2", "--min-np", "2", "--max-np",
           "3", "--host-discovery-script", discover, sys.executable,
           os.path.join(HERE, "worker.py"), "--dir", directory, "--grow-marker", marker]
    env = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS="20", PYTHONPATH=REPO)
    with open(os.path.join(directory, "output.log"), "w") as log:
        rc = subprocess.run(cmd + (["--plain"] if plain else []), env=env, cwd=REPO,
                            stdout=log, stderr=subprocess.STDOUT, timeout=600).returncode
    events = {}
    for r in range(3):
        path = os.path.join(directory, "rank%d.events" % r)
        if os.path.exists(path):
            events[r] = [json.loads(line) for line in open(path)]
    return rc, events


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="emb_elastic_")
    rc_s, sharded = job(os.path.join(base, "sharded"), False)
    rc_p, plain = job(os.path.join(base, "plain"), True)
    print("exit codes: sharded %d, plain %d" % (rc_s, rc_p))
    worst = 0.0
    for r in sorted(sharded):
        for a, b in zip(sharded[r], plain.get(r, [])):
            keys = ("event", "size", "epoch", "batch", "iterations")
            assert [a[k] for k in keys] == [b[k] for k in keys], (a, b)
            for k in ("table", "head"):
                diff = np.max(np.abs(np.array(a[k]) - np.array(b[k])) /
                              (np.abs(np.array(b[k])) + 1e-6))
                worst = max(worst, float(diff))
            print("rank %d %-6s size %d epoch %d batch %d iterations %2d rows held %s"
                  % (r, a["event"], a["size"], a["epoch"], a["batch"], a["iterations"],
                     a["rows_held"]))
        print("rank %d: %d events sharded, %d plain" % (r, len(sharded[r]), len(plain.get(r, []))))
    print("largest relative difference of tables and heads, sharded vs plain: %.2e" % worst)


if __name__ == "__main__":
    main()
