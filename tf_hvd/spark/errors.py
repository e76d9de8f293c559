"""The error tf_hvd.spark.run raises on the driver when its job fails, naming the rank.

What the driver knows: Spark's reason for failing the barrier stage (which names the
first task that failed, by partition, and whether its executor was lost), and what the
tasks left in its rendezvous store: each task's rank and executor, and the error record
of each rank whose function raised or whose process died (tf_hvd.spark.rank_main).

* the function raised: the same exception type, ``rank R (executor E on HOST): `` in
  front of its message, the rank's traceback as the cause;
* the rank's process died, or its executor was lost: HorovodInternalError saying so.

    >>> failed_partition("... barrier task ResultTask(3, 1) finished unsuccessfully ...")
    1
"""

import json
import pickle
import re

from tf_hvd.exceptions import HorovodInternalError
from tf_hvd.spark import keys
from tf_hvd.spark.task import peer_loss

_BARRIER_TASK = re.compile(r"barrier task ResultTask\(\d+, (\d+)\)")


class RemoteTraceback(Exception):
    """The traceback of a rank's exception, as text (the cause of the driver's error)."""

    def __str__(self):
        return "\n" + self.args[0]


def failed_partition(spark_message):
    """The partition of the barrier task Spark names as the first failure, or None."""
    m = _BARRIER_TASK.search(spark_message or "")
    return int(m.group(1)) if m else None


def tasks(store, job, num_proc):
    """{partition: {rank, address, hostname, executor}} of the tasks that started."""
    found = {}
    for p in range(num_proc):
        data = store.get(keys.task_key(job, p))
        if data is not None:
            found[p] = json.loads(data.decode())
    return found


def _spark_reason(spark_message):
    lines = [l.strip() for l in (spark_message or "").splitlines() if l.strip()]
    for line in lines:
        if "ExecutorLostFailure" in line or "ExecutorLost" in line:
            return line[:400]
    return lines[0][:400] if lines else "(Spark gave no reason)"


def _rebuild(record, where):
    blob, type_name, message, text = record
    full = "%s: %s: %s" % (where, type_name, message)
    error = None
    if blob is not None:
        try:
            original = pickle.loads(blob)
            error = type(original)(full)
        except Exception:  # noqa: BLE001 - a type that needs other arguments
            error = None
    if error is None:
        error = (HorovodInternalError if type_name == "HorovodInternalError"
                 else RuntimeError)(full)
    if text:
        error.__cause__ = RemoteTraceback(text)
    return error


def job_error(store, job, num_proc, spark_error):
    """The exception to raise for a failed job (``spark_error``: what collect() raised)."""
    message = str(spark_error)
    started = tasks(store, job, num_proc)
    by_rank = {t["rank"]: t for t in started.values()}

    def where(rank):
        t = by_rank.get(rank, {})
        return "rank %d (executor %s on %s)" % (rank, t.get("executor", "?"),
                                                t.get("hostname", "?"))

    records = {}
    for rank in by_rank:
        data = store.get(keys.error_key(job, rank))
        if data is not None:
            records[rank] = pickle.loads(data)
    partition = failed_partition(message)
    rank = started[partition]["rank"] if partition in started else None
    # A rank whose collective failed because another one went is not the cause.
    causes = [r for r in sorted(records) if not peer_loss(records[r])]
    if causes and (rank is None or rank not in causes):
        return _rebuild(records[causes[0]], where(causes[0]))
    if rank is not None and rank in records:
        return _rebuild(records[rank], where(rank))
    if rank is not None:
        return HorovodInternalError(
            "tf_hvd.spark.run: %s was lost before its function returned: %s"
            % (where(rank), _spark_reason(message)))
    if records:
        first = min(records)
        return _rebuild(records[first], where(first))
    missing = sorted(set(range(num_proc)) - set(by_rank))
    return RuntimeError("tf_hvd.spark.run: the Spark job failed before %s: %s"
                        % ("every rank started (rank(s) %s did not)" % missing if missing
                           else "any rank reported an error", _spark_reason(message)))
