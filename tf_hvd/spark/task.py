"""What runs in each Spark barrier task: one rank of the job (executor side).

The task finds its rank from where every task of the stage runs (``allGather``, then
tf_hvd.spark.placement), reports it to the driver's rendezvous store, starts the rank's
own Python process (tf_hvd.spark.rank_main) with the variables a Gloo rank gets from
tfhvdrun, copies its output to the executor's log and, in batches, to the driver, and
returns its pickled result. A rank that fails leaves how it ended in the driver's store
(what it raised, or its process's signal or exit code, and its last lines) and fails the
task: Spark then fails the barrier stage as a whole and kills the other ranks' tasks (and
with them their processes). Which rank caused it the driver reads from the structured
records (tf_hvd.job.failure_report), not from which task failed first.
"""

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse

from tf_hvd.job.output_prefix import prefixed
from tf_hvd.job.rank_env import RankEnv, process_env, quiet_env
from tf_hvd.job.rendezvous import RendezvousClient
from tf_hvd.spark import keys
from tf_hvd.spark.placement import TaskPlace, host_gpus, ranks_of

OUTPUT_BATCH_S = 0.5
TAIL_LINES = 30


class TaskSpec(object):
    """What the driver gives every task (carried in the stage's closure)."""

    def __init__(self, job, payload, rendezvous_addr, rendezvous_port, secret, env,
                 executable, quiet):
        self.job, self.payload = job, payload
        self.rendezvous_addr, self.rendezvous_port = rendezvous_addr, rendezvous_port
        self.secret, self.env = secret, dict(env)
        self.executable = executable
        self.quiet = quiet  # TensorFlow's INFO lines hidden (TF_CPP_MIN_LOG_LEVEL=1)


def executor_id(environ):
    """This executor's id, from the log URLs Spark's standalone and local-cluster
    workers give it ('?' elsewhere)."""
    for name in ("SPARK_LOG_URL_STDERR", "SPARK_LOG_URL_STDOUT"):
        query = urllib.parse.urlparse(environ.get(name, "")).query
        ids = urllib.parse.parse_qs(query).get("executorId")
        if ids:
            return ids[0]
    return environ.get("SPARK_EXECUTOR_ID", "?")


def _place(ctx):
    import socket
    partition = ctx.partitionId()
    address = ctx.getTaskInfos()[partition].address.rsplit(":", 1)[0]
    gpu = ctx.resources().get("gpu")
    me = TaskPlace(partition, address, socket.gethostname(), executor_id(os.environ),
                   tuple(gpu.addresses) if gpu is not None else ())
    tasks = [TaskPlace(*json.loads(t)) for t in ctx.allGather(json.dumps(me))]
    return me, tasks


class _Output(object):
    """Copies a rank's lines to this task's stderr (the executor's log) and, every
    OUTPUT_BATCH_S, to the driver's store; keeps the last lines for error reports."""

    def __init__(self, client, spec, rank):
        self.client, self.spec, self.rank = client, spec, rank
        self.lock = threading.Lock()
        self.pending, self.seq = [], 0
        self.tail = collections.deque(maxlen=TAIL_LINES)
        self.done = threading.Event()

    def read(self, stream, name):
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            sys.stderr.write(prefixed(self.rank, name, line))
            with self.lock:
                self.pending.append([name, line])
                self.tail.append(line)

    def flush(self):
        with self.lock:
            batch, self.pending = self.pending, []
        if batch:
            self.client.put(keys.output_key(self.spec.job, self.rank, self.seq),
                            json.dumps(batch).encode())
            self.seq += 1

    def pump(self):
        while not self.done.wait(OUTPUT_BATCH_S):
            self.flush()


def _start_rank(spec, workdir, env):
    with open(os.path.join(workdir, "payload.pkl"), "wb") as f:
        f.write(spec.payload)
    return subprocess.Popen(
        [spec.executable or sys.executable, "-m", "tf_hvd.spark.rank_main", workdir,
         str(os.getpid())],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def ending(code, raised, tail):
    """What the task leaves in the store for a rank that failed (the driver's RankEnd):
    the pickled Raised record of its function, or how its process ended; its last lines."""
    return {"raised": raised, "signal": -code if code < 0 else None,
            "exit_code": code if code > 0 else None, "tail": list(tail)}


def run_rank(spec, ctx):
    """The task's body: returns (rank, the pickled return value)."""
    import pickle
    me, tasks = _place(ctx)
    slots = ranks_of(tasks)
    slot = slots[me.partition]
    client = RendezvousClient(spec.rendezvous_addr, spec.rendezvous_port, spec.secret)
    where = {"rank": slot.rank, "address": me.address, "hostname": me.hostname,
             "executor": me.executor}
    rank_vars = RankEnv.for_slot(
        slot, hostname=me.address, slot_hostname=me.hostname,
        rendezvous_addr=spec.rendezvous_addr, rendezvous_port=spec.rendezvous_port,
        controller="gloo", secret=spec.secret).to_environ()
    gpus = host_gpus(tasks, slots, me.partition)
    if gpus:
        rank_vars["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    extra = dict(quiet_env(not spec.quiet, os.environ), **spec.env)
    extra.update(rank_vars)
    # The worker's own job variables (a reused Python worker may have run another job's
    # TF_CONFIG task) are not this rank's.
    env = process_env({k: v for k, v in os.environ.items()
                       if not k.startswith("HOROVOD_") and k != "TF_CONFIG"}, extra)
    workdir = tempfile.mkdtemp(prefix="tf_hvd-spark-")
    output = _Output(client, spec, slot.rank)
    proc = None
    try:
        proc = _start_rank(spec, workdir, env)
        where["pid"] = proc.pid  # the rank's own process, named when it fails
        client.put(keys.task_key(spec.job, me.partition), json.dumps(where).encode())
        readers = [threading.Thread(target=output.read, args=(s, n), daemon=True)
                   for s, n in ((proc.stdout, "stdout"), (proc.stderr, "stderr"))]
        pump = threading.Thread(target=output.pump, daemon=True)
        for t in readers + [pump]:
            t.start()
        code = proc.wait()
        for t in readers:
            t.join(10)
        output.done.set()
        pump.join(10)
        output.flush()
        ok = os.path.join(workdir, "ok.pkl")
        if os.path.exists(ok):
            with open(ok, "rb") as f:
                return slot.rank, f.read()
        error = os.path.join(workdir, "error.pkl")
        raised = None
        if os.path.exists(error):
            with open(error, "rb") as f:
                raised = pickle.loads(f.read())
        end = ending(code, raised, output.tail)
        client.put(keys.error_key(spec.job, slot.rank), pickle.dumps(end))
        how = ("raised %s: %s" % tuple(raised[1:3]) if raised is not None else
               "was killed by signal %d" % -code if code < 0 else "exited with code %d" % code)
        raise RuntimeError("tf_hvd.spark: rank %d (executor %s on %s, pid %d) %s"
                           % (slot.rank, me.executor, me.hostname, proc.pid, how))
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        client.close()
        shutil.rmtree(workdir, ignore_errors=True)


def barrier_task(spec):
    """The function of ``rdd.barrier().mapPartitions``: one rank per partition."""
    def run_partition(_):
        from pyspark import BarrierTaskContext
        yield run_rank(spec, BarrierTaskContext.get())
    return run_partition
