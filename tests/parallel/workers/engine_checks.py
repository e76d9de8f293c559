"""A rank started by an engine (srun, torchrun-style variables), not by tfhvdrun.

Prints one line ``ENGINE_RESULT {json}``: the topology hvd.init() found and exact
collective results; or, when init refuses, ``ENGINE_ERROR <type>: <message>`` and exit 3.
With ENGINE_KILL_RANK=r, rank r SIGKILLs itself after the checks while the others keep
running collectives: they must fail (exit 1, ``ENGINE_PEER_LOST <message>``), not hang.
"""

import json
import os
import signal
import socket
import sys
import time

import numpy as np

import tf_hvd as hvd


def main():
    try:
        hvd.init()
    except Exception as e:  # noqa: BLE001 - the test checks the type and message
        print("ENGINE_ERROR %s.%s: %s" % (type(e).__module__, type(e).__name__, e), flush=True)
        sys.exit(3)
    rank, size = hvd.rank(), hvd.size()
    # Integers so that the sums are exact whatever the reduction order.
    mine = np.arange(1000, dtype=np.int64) * (rank + 1)
    total = hvd.allreduce(mine, op=hvd.Sum, name="engine.sum").numpy()
    expected = np.arange(1000, dtype=np.int64) * (size * (size + 1) // 2)
    gathered = hvd.allgather(np.array([rank], dtype=np.int32), name="engine.gather").numpy()
    root = hvd.broadcast(np.array([rank + 7.5]), root_rank=0, name="engine.bcast").numpy()
    result = {
        "rank": rank, "size": size, "local_rank": hvd.local_rank(),
        "local_size": hvd.local_size(), "cross_rank": hvd.cross_rank(),
        "cross_size": hvd.cross_size(), "gloo": hvd.gloo_enabled(), "mpi": hvd.mpi_enabled(),
        "sum_exact": bool(np.array_equal(total, expected)),
        "gathered": gathered.tolist(), "broadcast": root.tolist(),
        "host": socket.gethostname(), "secret_on_cmdline": False,
    }
    secret = os.environ.get("HOROVOD_GLOO_RENDEZVOUS_SECRET", "")
    if secret:
        with open("/proc/self/cmdline", "rb") as f:
            result["secret_on_cmdline"] = secret.encode() in f.read()
    print("ENGINE_RESULT " + json.dumps(result, sort_keys=True), flush=True)
    victim = os.environ.get("ENGINE_KILL_RANK")
    if victim is not None:
        if rank == int(victim):
            time.sleep(1)
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            for step in range(600):
                hvd.allreduce(np.ones(4), name="engine.after.%d" % step)
                time.sleep(0.1)
        except Exception as e:  # noqa: BLE001
            print("ENGINE_PEER_LOST %s" % str(e).splitlines()[0], flush=True)
            sys.exit(1)
    hvd.shutdown()


if __name__ == "__main__":
    main()
