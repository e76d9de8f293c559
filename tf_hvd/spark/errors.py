"""The error tf_hvd.spark.run raises on the driver when its job fails, naming the rank.

What the driver knows: what the tasks left in its rendezvous store (each task's rank,
executor, host and rank pid; how each failed rank ended: what its function raised, or its
process's signal or exit code), the cores' fault records in the same store, and Spark's
reason for failing the barrier stage. The rank is named as every launcher names it
(tf_hvd.job.failure_report): the root cause first, with host and pid, then the ranks that
stopped in consequence; the error has the root rank's own exception type where its
function raised (its traceback as the cause), else HorovodInternalError.

    >>> failed_partition("... barrier task ResultTask(3, 1) finished unsuccessfully ...")
    1
"""

import json
import pickle
import re
import time

from tf_hvd.exceptions import HorovodInternalError
from tf_hvd.job import failure_report, fault_record, silent_ranks
from tf_hvd.spark import keys

_BARRIER_TASK = re.compile(r"barrier task ResultTask\(\d+, (\d+)\)")
# The root rank's own record may still be on its way when Spark fails the stage (its
# task writes it the moment its process ends): wait this long for it, and only then.
ROOT_RECORD_WAIT_S = 3.0


def failed_partition(spark_message):
    """The partition of the barrier task Spark names as the first failure, or None."""
    m = _BARRIER_TASK.search(spark_message or "")
    return int(m.group(1)) if m else None


def tasks(store, job, num_proc):
    """{partition: {rank, address, hostname, executor, pid}} of the tasks that started."""
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


def _ends(store, job, by_rank):
    """rank -> failure_report.RankEnd of every rank that started, and its last lines."""
    ends, tails = {}, {}
    for rank, task in by_rank.items():
        data = store.get(keys.error_key(job, rank))
        end = pickle.loads(data) if data is not None else {}
        ends[rank] = failure_report.RankEnd(
            rank, task.get("hostname"), task.get("pid"), raised=end.get("raised"),
            signal=end.get("signal"), exit_code=end.get("exit_code"))
        tails[rank] = end.get("tail") or []
    return ends, tails


def _root_reported(store, job, by_rank):
    """The ends and records once the root rank's own end is in (ROOT_RECORD_WAIT_S)."""
    deadline = time.monotonic() + ROOT_RECORD_WAIT_S
    while True:
        ends, tails = _ends(store, job, by_rank)
        records = fault_record.from_store(store)
        root = failure_report.root_cause(ends, records)
        known = root is None or root not in ends or ends[root].failed or \
            root in silent_ranks.silent(records)  # a silent rank has nothing to add
        if known or time.monotonic() >= deadline:
            return ends, tails, records
        time.sleep(0.1)


def job_error(store, job, num_proc, spark_error):
    """The exception to raise for a failed job (``spark_error``: what collect() raised)."""
    message = str(spark_error)
    started = tasks(store, job, num_proc)
    by_rank = {t["rank"]: t for t in started.values()}
    ends, tails, records = _root_reported(store, job, by_rank)
    partition = failed_partition(message)
    lost = started[partition]["rank"] if partition in started else None
    if lost is not None and not ends[lost].failed and "ExecutorLost" in message:
        # its task could say nothing: Spark's reason is all there is of how it ended
        ends[lost] = ends[lost]._replace(died=(
            "was lost with its Spark executor %s before its function returned: %s"
            % (by_rank[lost].get("executor", "?"), _spark_reason(message))))
    root = failure_report.root_cause(ends, records)
    if root is not None:
        task = by_rank.get(root, {})
        note = "(rank %d ran in Spark executor %s)" % (root, task.get("executor", "?"))
        if ends.get(root) is not None and ends[root].raised is None and tails.get(root):
            note += "; its last lines:\n" + "\n".join(tails[root])
        return failure_report.job_error(ends, records, HorovodInternalError,
                                        killed=set(by_rank), note=note)
    if lost is not None:  # Spark named the task, which left no word (nor did the others)
        task = by_rank[lost]
        return HorovodInternalError(
            "tf_hvd.spark.run: rank %d (executor %s on %s) was lost before its function "
            "returned: %s" % (lost, task.get("executor", "?"), task.get("hostname", "?"),
                              _spark_reason(message)))
    missing = sorted(set(range(num_proc)) - set(by_rank))
    return RuntimeError("tf_hvd.spark.run: the Spark job failed before %s: %s"
                        % ("every rank started (rank(s) %s did not)" % missing if missing
                           else "any rank reported an error", _spark_reason(message)))
