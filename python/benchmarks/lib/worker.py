"""What every process of a contender runs: set up that contender's way of
communicating once, then run the requested benchmark parts in order.

    python worker.py --config RUN.config.json --out RUN.result.json

The driver (lib/launch.py) writes the config: the contender, its kind (hvd, mwms,
mpi4py, local, single), the parts with their settings and a deadline. Rank 0
writes the result file after every part, so a later failure or timeout keeps
the earlier results. The process ends itself at the deadline whatever it is
doing (no benchmark process outlives its driver's timeout).
"""

import argparse
import importlib
import json
import os
import sys
import threading
import time
import traceback

# Run as a script (python lib/worker.py): the drivers' folder, not lib/, goes first on the
# path, so that `lib` is the package and the part modules (allreduce_bench, ...) import.
if __name__ == "__main__":
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from lib import jsonio, knobs, tables  # noqa: E402

PART_MODULES = {"allreduce": "allreduce_bench", "allgather": "allgather_bench",
                "fusion": "fusion_bench", "training": "training_bench",
                "single_op": "single_op_bench"}


def _watchdog(deadline):
    def run():
        while True:
            left = deadline - time.time()
            if left <= 0:
                sys.stderr.write("worker: deadline reached, exiting (pid %d)\n" % os.getpid())
                sys.stderr.flush()
                os._exit(124)
            time.sleep(min(left, 1.0))
    t = threading.Thread(target=run, name="deadline-watchdog")
    t.daemon = True
    t.start()


class Context(object):
    """A contender's communication set up in this process.

    Attributes used by the benchmark parts: kind, contender, rank, size, notes
    (strings for the report), and per kind: hvd (module tf_hvd), strategy (the
    MultiWorkerMirroredStrategy), comm (mpi4py's COMM_WORLD), tf.
    """

    def __init__(self, kind, contender, threads=None):
        self.kind = kind
        self.contender = contender
        self.rank, self.size = 0, 1
        self.notes = []
        self.runtime = {"pid": os.getpid(), "python": sys.executable}
        self.hvd = self.strategy = self.comm = self.tf = None
        if kind in ("hvd", "hvd_bound", "mwms", "single"):
            self._setup_tf(threads)
        if kind in ("hvd", "hvd_bound"):
            import tf_hvd as hvd
            hvd.init()
            self.hvd = hvd
            self.rank, self.size = hvd.rank(), hvd.size()
            self.runtime["transport"] = ("mpi" if hvd.mpi_enabled() else
                                         "gloo" if hvd.gloo_enabled() else "none")
            self.runtime["tf_hvd_file"] = os.path.dirname(hvd.__file__)
            from tf_hvd import tf_threads
            self.runtime["tf_hvd_thread_settings"] = tf_threads.tf_thread_settings()
        elif kind == "mwms":
            self._setup_mwms()
        elif kind == "mpi4py":
            from mpi4py import MPI
            self.comm = MPI.COMM_WORLD
            self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
            self.runtime["mpi_library"] = MPI.Get_library_version().strip().splitlines()[0]
            self.runtime["mpi_vendor"] = "%s %s" % (MPI.get_vendor()[0],
                                                    ".".join(map(str, MPI.get_vendor()[1])))
        self.runtime["ranks"] = self.size
        self.runtime["knobs"] = knobs.knobs()

    def _setup_tf(self, threads):
        import tensorflow as tf
        self.tf = tf
        if threads:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        self.runtime["tf_threads"] = {
            "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}
        self.runtime["tensorflow"] = tf.__version__

    def _setup_mwms(self):
        tf = self.tf
        import mwms_keras3_patch
        tf_config = json.loads(os.environ["TF_CONFIG"])
        impl = tf.distribute.experimental.CommunicationImplementation.RING
        options = tf.distribute.experimental.CommunicationOptions(implementation=impl)
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        self.rank = int(tf_config["task"]["index"])
        self.size = len(tf_config["cluster"]["worker"])
        if self.strategy.num_replicas_in_sync != self.size:
            raise RuntimeError("MultiWorkerMirroredStrategy has %d replicas, expected %d"
                               % (self.strategy.num_replicas_in_sync, self.size))
        self.runtime["communication"] = "RING"
        self.runtime["cluster"] = tf_config["cluster"]["worker"]
        self.runtime["keras3_patch"] = mwms_keras3_patch.apply(self.strategy)
        self._mwms_barrier = None

    def log(self, message):
        if self.rank == 0:
            tables.log("[%s] %s" % (self.contender, message))

    def barrier(self):
        """All ranks meet here (through the contender's own communication)."""
        if self.hvd is not None:
            self.hvd.barrier()
        elif self.kind == "mpi4py":
            self.comm.Barrier()
        elif self.kind == "mwms":
            tf = self.tf
            if self._mwms_barrier is None:
                strategy = self.strategy

                def replica_fn():
                    ctx = tf.distribute.get_replica_context()
                    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.ones([1]))
                self._mwms_barrier = tf.function(lambda: strategy.run(replica_fn))
            self._mwms_barrier()

    def algorithm_counts(self):
        """tf_hvd: how many collectives each algorithm ran in this process so far
        ({"allreduce/hierarchical": n, ...}), which shows which path a knob took."""
        if self.hvd is None:
            return None
        from tf_hvd.basics import _lib
        counts = getattr(_lib, "algorithm_counts", None)  # absent in older libraries
        return dict(counts()) if counts else None

    def finish(self):
        if self.hvd is not None:
            self.hvd.shutdown()
        elif self.kind == "mpi4py":
            from mpi4py import MPI
            MPI.Finalize()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    config = jsonio.read_json(args.config)
    _watchdog(config["deadline"])
    started = time.time()
    ctx = Context(config["kind"], config["contender"], config.get("threads"))
    ctx.runtime["setup_seconds"] = round(time.time() - started, 2)
    result = {"contender": ctx.contender, "kind": ctx.kind, "runtime": ctx.runtime,
              "parts": {}, "part_seconds": {}, "errors": {}, "notes": ctx.notes}
    status = 0
    for part in config["order"]:
        module = importlib.import_module(PART_MODULES[part])
        t0 = time.time()
        try:
            ctx.barrier()
            result["parts"][part] = module.run_worker(ctx, config["parts"][part])
        except Exception:
            text = traceback.format_exc()
            sys.stderr.write("rank %d: part %s failed:\n%s" % (ctx.rank, part, text))
            result["errors"][part] = text
            status = 1
        result["part_seconds"][part] = round(time.time() - t0, 2)
        result["algorithm_counts"] = ctx.algorithm_counts()
        if ctx.rank == 0:
            jsonio.write_json(args.out, result)
        if status:
            break  # the ranks may now disagree on what comes next: stop here
    if status == 0:
        ctx.finish()
    sys.stdout.flush()
    sys.stderr.flush()
    if ctx.kind == "mwms":
        # MWMS's teardown (gRPC servers, coordination service) can take long or hang;
        # the results are written, so leave at once.
        os._exit(status)
    # MPI processes must exit normally: MPICH's process manager (Hydra) kills every
    # other rank when one ends with os._exit, even after MPI_Finalize.
    sys.exit(status)


if __name__ == "__main__":
    main()
