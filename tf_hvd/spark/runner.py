"""tf_hvd.spark.run: Horovod's ``horovod.spark.run`` on a Spark cluster (driver side).

    from pyspark.sql import SparkSession
    import tf_hvd.spark

    spark = SparkSession.builder.getOrCreate()

    def train(lr):
        import tf_hvd as hvd
        hvd.init()
        return hvd.rank(), lr * hvd.size()

    tf_hvd.spark.run(train, args=(0.1,), num_proc=2)   # [(0, 0.2), (1, 0.2)]

One rank per task of a barrier stage (``rdd.barrier()``: the ranks start together or
not at all); the driver serves the job's authenticated rendezvous store, each task
starts its rank's process (tf_hvd.spark.task), and the results come back in rank order.
A rank that fails makes the call raise on the driver naming the rank and its executor
(tf_hvd.spark.errors), after Spark has failed the stage and killed the other ranks.
"""

import os
import sys
import threading
import time
import uuid

from tf_hvd.job import auth
from tf_hvd.job.job_server import start_job_server
import cloudpickle
from tf_hvd.spark import errors, keys, output, slots
from tf_hvd.spark.task import TaskSpec, barrier_task

DEFAULT_START_TIMEOUT_S = 600.0
START_TIMEOUT_ENV = "HOROVOD_SPARK_START_TIMEOUT"
# The driver's variables passed on to the ranks when ``env`` is not given: tf_hvd's
# knobs, not the rank's place in a job (each task sets those).
_NOT_KNOBS = ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_", "HOROVOD_CROSS_",
              "HOROVOD_HOSTNAME", "HOROVOD_GLOO_RENDEZVOUS", "HOROVOD_CONTROLLER",
              "HOROVOD_SLOT_HOSTNAME")


def log(message):
    sys.stderr.write("tf_hvd.spark: %s\n" % message)
    sys.stderr.flush()


def spark_context():
    """The active SparkContext; RuntimeError when there is none (as Horovod)."""
    try:
        from pyspark import SparkContext
    except ImportError:
        raise ImportError("tf_hvd.spark needs pyspark: pip install pyspark "
                          "(tools/requirements-spark.txt) and a Java 17 runtime")
    sc = SparkContext._active_spark_context
    if sc is None:
        raise RuntimeError("tf_hvd.spark.run: there is no active SparkContext; create one "
                           "first (SparkSession.builder.getOrCreate())")
    return sc


def start_timeout_s(start_timeout):
    if start_timeout is None:
        start_timeout = float(os.environ.get(START_TIMEOUT_ENV, DEFAULT_START_TIMEOUT_S))
    if float(start_timeout) <= 0:
        raise ValueError("start_timeout must be positive, got %r" % (start_timeout,))
    return float(start_timeout)


def _payload(fn, args, kwargs):
    try:
        return cloudpickle.dumps((fn, tuple(args), dict(kwargs or {})))
    except Exception as e:  # noqa: BLE001 - whatever the pickler raises
        raise TypeError("tf_hvd.spark.run: the function or its arguments cannot be pickled "
                        "to send to the Spark tasks (%s: %s); define the function at module "
                        "level or make what it captures picklable"
                        % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))


def driver_knobs():
    """The driver's HOROVOD_* tuning knobs (what ranks get when ``env`` is not given)."""
    return {k: v for k, v in os.environ.items()
            if k.startswith("HOROVOD_") and not k.startswith(_NOT_KNOBS)
            and k != auth.SECRET_ENV}


def _rank_env(env, nics):
    """What every rank gets besides its place in the job."""
    if env is None:
        env = driver_knobs()
    env = {str(k): str(v) for k, v in env.items()}
    if nics:
        env["HOROVOD_GLOO_IFACE"] = list(nics)[0] if not isinstance(nics, str) else \
            nics.split(",")[0]
    return env


def _start_rendezvous(sc):
    """The job's store on the address the executors reach the driver at."""
    address = sc.getConf().get("spark.driver.host")
    return start_job_server(address, log), address


class _Stage(object):
    """The barrier stage's collect(), in a thread of its own (its own job group, so it
    can be cancelled as a whole)."""

    def __init__(self, sc, rdd, group):
        self.sc, self.rdd, self.group = sc, rdd, group
        self.results, self.error = None, None
        self.thread = threading.Thread(target=self._collect, daemon=True,
                                       name="tf_hvd.spark-stage")

    def _collect(self):
        try:
            self.sc.setJobGroup(self.group, "tf_hvd.spark.run", interruptOnCancel=True)
            self.results = self.rdd.collect()
        except BaseException as e:  # noqa: BLE001 - raised by the caller's thread
            self.error = e

    def cancel(self):
        self.sc.cancelJobGroup(self.group)
        self.thread.join(60)


def _wait_for_start(stage, server, job, num_proc, timeout_s):
    deadline = time.monotonic() + timeout_s
    while stage.thread.is_alive():
        if len(errors.tasks(server.store, job, num_proc)) == num_proc:
            return
        if time.monotonic() > deadline:
            started = errors.tasks(server.store, job, num_proc)
            stage.cancel()
            raise TimeoutError(
                "tf_hvd.spark.run: %d of %d Spark task(s) started within start_timeout=%g s "
                "(HOROVOD_SPARK_START_TIMEOUT); the barrier stage waits for a slot for every "
                "rank: check the cluster's free executors" % (len(started), num_proc,
                                                              timeout_s))
        time.sleep(0.1)


def run(fn, args=(), kwargs={}, num_proc=None, start_timeout=None, use_mpi=None,
        use_gloo=None, extra_mpi_args=None, env=None, stdout=None, stderr=None, verbose=1,
        nics=None, prefix_output_with_timestamp=False, executable=None):
    """Runs ``fn(*args, **kwargs)`` once per rank in Spark tasks; returns the ranks' return
    values in rank order (Horovod's ``horovod.spark.run``).

    ``num_proc``: the number of ranks (default: the cluster's task slots; more than it
    has is a ValueError before anything runs). ``start_timeout``: seconds for every task
    to start (default HOROVOD_SPARK_START_TIMEOUT, else 600). ``env``: variables every
    rank gets (default: the driver's HOROVOD_* knobs). ``stdout``/``stderr``: where the
    ranks' lines are written on the driver, prefixed ``[rank]<stdout>:`` (default
    sys.stdout/sys.stderr; ``verbose=0`` drops them). ``nics``: the interface Gloo binds.
    ``executable``: the Python that runs the ranks (default the executors' own).
    ``use_gloo`` is accepted (Gloo is the only transport); MPI inside Spark tasks is not
    supported (``use_mpi=True``/``extra_mpi_args`` raise ValueError).

    A rank that raises makes this raise the same exception type on the driver, with
    ``rank R (executor E on HOST):`` in front of its message; a rank whose process or
    executor died gives HorovodInternalError naming it. Spark fails the barrier stage as
    a whole, so the other ranks are stopped with it.

        >>> tf_hvd.spark.run(lambda: __import__("os").getpid(), num_proc=2)  # doctest: +SKIP
        [4242, 4243]
    """
    del use_gloo  # Gloo is the transport
    if use_mpi or extra_mpi_args:
        raise ValueError("tf_hvd.spark.run: MPI inside Spark tasks is not supported (no "
                         "mpirun can start processes in Spark's executors); the ranks meet "
                         "over Gloo through the driver's rendezvous")
    sc = spark_context()
    payload = _payload(fn, args, kwargs)
    start_timeout = start_timeout_s(start_timeout)
    num_proc = slots.resolve_num_proc(sc, num_proc, start_timeout)
    server, address = _start_rendezvous(sc)
    job = uuid.uuid4().hex[:12]
    spec = TaskSpec(job, payload, address, server.port, server.secret, _rank_env(env, nics),
                    executable, quiet=verbose < 2 and "TF_CPP_MIN_LOG_LEVEL" not in os.environ)
    rdd = sc.parallelize(range(num_proc), num_proc).barrier().mapPartitions(barrier_task(spec))
    printer = output.Printer(server.store, job, num_proc, stdout or sys.stdout,
                             stderr or sys.stderr, verbose, prefix_output_with_timestamp)
    stage = _Stage(sc, rdd, "tf_hvd-spark-" + job)
    if verbose >= 2:
        log("job %s: %d rank(s); rendezvous at %s:%d" % (job, num_proc, address, server.port))
    try:
        printer.start()
        stage.thread.start()
        _wait_for_start(stage, server, job, num_proc, start_timeout)
        while stage.thread.is_alive():
            stage.thread.join(0.2)
        printer.stop()
        if stage.error is not None:
            raise errors.job_error(server.store, job, num_proc, stage.error)
        load = cloudpickle.loads
        return [load(blob) for _, blob in sorted(stage.results, key=lambda r: r[0])]
    except BaseException:
        if stage.thread.is_alive():
            stage.cancel()
        raise
    finally:
        printer.stop()
        server.stop()


def run_elastic(fn, *args, **kwargs):
    """Horovod's ``horovod.spark.run_elastic`` is not supported: a barrier stage has a fixed
    number of tasks, and Spark refuses barrier stages under dynamic allocation. Raises
    NotImplementedError saying so; use :func:`run` (or ``tfhvdrun --min-np`` on hosts)."""
    raise NotImplementedError(
        "tf_hvd.spark.run_elastic is not supported: a Spark barrier stage has a fixed number "
        "of tasks (and Spark refuses barrier stages under dynamic allocation); use "
        "tf_hvd.spark.run, or an elastic tfhvdrun job (--min-np) on the hosts")
