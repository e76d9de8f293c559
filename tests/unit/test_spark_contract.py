"""tf_hvd.spark's driver-side rules without a Spark cluster: which task is which rank, which
GPUs a rank sees, which error the driver raises from what the tasks left in its store, and
that ``import tf_hvd.spark`` does not need pyspark."""

import json
import pickle
import subprocess
import sys

import pytest

from tf_hvd.exceptions import HorovodInternalError
from tf_hvd.job.rendezvous import KVStore
from tf_hvd.spark import errors, keys
from tf_hvd.spark.placement import TaskPlace, host_gpus, ranks_of


def test_tasks_on_one_address_get_consecutive_ranks():
    tasks = [TaskPlace(0, "10.0.0.3", "h2", "1", ("0",)),
             TaskPlace(1, "10.0.0.2", "h1", "0", ("1",)),
             TaskPlace(2, "10.0.0.3", "h2", "1", ("1",)),
             TaskPlace(3, "10.0.0.2", "h1", "0", ("0",))]
    slots = ranks_of(tasks)
    # h2 holds partition 0, so its tasks come first
    assert [(s.rank, s.local_rank, s.local_size, s.cross_rank, s.cross_size) for s in slots] \
        == [(0, 0, 2, 0, 2), (2, 0, 2, 1, 2), (1, 1, 2, 0, 2), (3, 1, 2, 1, 2)]
    assert {s.hostname for s in slots} == {"10.0.0.2", "10.0.0.3"}
    # every rank sees its host's GPUs ordered by local rank: gpus[local_rank] is its own
    assert host_gpus(tasks, slots, 0) == ["0", "1"]
    assert host_gpus(tasks, slots, 1) == ["1", "0"]
    assert host_gpus(tasks, slots, 3)[slots[3].local_rank] == "0"


def _store(tasks, records):
    store = KVStore()
    for partition, where in tasks.items():
        store.put(keys.task_key("j", partition), json.dumps(where).encode())
    for rank, record in records.items():
        store.put(keys.error_key("j", rank), pickle.dumps(record))
    return store


TASKS = {0: {"rank": 0, "executor": "0", "hostname": "h1", "pid": 11},
         1: {"rank": 1, "executor": "1", "hostname": "h2", "pid": 12}}
SPARK = ("Could not recover from a failed barrier ResultStage. Most recent failure reason: "
         "Stage failed because barrier task ResultTask(3, %d) finished unsuccessfully.\n%s")


def test_the_rank_that_raised_is_named_first_with_its_exception_type():
    # rank 0's collective failed because rank 1 went (its core's record says so); Spark
    # names rank 0's task, whose error came first; the driver names rank 1
    peer = {"raised": (None, "UnavailableError", "whatever the core's words are", "")}
    own = {"raised": (pickle.dumps(KeyError("x")), "KeyError", "'shard 7'", "Traceback: ...")}
    store = _store(TASKS, {0: peer, 1: own})
    store.put("tf_hvd/fault/0", b"culprit=1\nkind=exiting\nrank 1 (on h2) left the job")
    error = errors.job_error(store, "j", 2, RuntimeError(SPARK % (0, "PythonException")))
    assert type(error) is KeyError
    assert error.args[0] == ("rank 1 (on h2, pid 12) raised KeyError: 'shard 7'; rank 0 "
                             "stopped in consequence\n(rank 1 ran in Spark executor 1)")
    assert "Traceback: ..." in str(error.__cause__)


def test_a_killed_rank_is_named_from_the_records_whichever_task_failed_first():
    peer = {"raised": (pickle.dumps(ValueError("x")), "ValueError", "words", "")}
    died = {"signal": 9, "tail": ["step 3"]}
    store = _store(TASKS, {0: peer, 1: died})
    store.put("tf_hvd/fault/0", b"culprit=1\nkind=lost\nrank 1 (on h2) exited or crashed")
    error = errors.job_error(store, "j", 2, RuntimeError(SPARK % (0, "PythonException")))
    assert isinstance(error, HorovodInternalError)
    assert str(error) == ("rank 1 (on h2, pid 12) was killed by signal 9 (SIGKILL); rank 0 "
                          "stopped in consequence\n(rank 1 ran in Spark executor 1); its last "
                          "lines:\nstep 3")


def test_a_frozen_rank_is_named_from_the_others_records():
    store = _store(TASKS, {0: {"raised": (None, "UnavailableError", "words", "")}})
    store.put("tf_hvd/fault/0", b"culprit=1\nkind=silent\nrank 1 (on h2) stopped answering: "
              b"its core sent no liveness proof for 6 s (HOROVOD_PEER_TIMEOUT_SECONDS=6)")
    error = errors.job_error(store, "j", 2, RuntimeError(SPARK % (0, "PythonException")))
    assert isinstance(error, HorovodInternalError)
    assert str(error).splitlines()[0] == (
        "rank 1 (on h2, pid 12) stopped answering (its core sent no liveness proof for 6 s) "
        "and was killed (SIGKILL); rank 0 stopped in consequence")


def test_a_lost_executor_names_its_rank():
    reason = ("ExecutorLostFailure (executor 1 exited caused by one of the running tasks) "
              "Reason: Command exited with code 137")
    error = errors.job_error(_store(TASKS, {}), "j", 2, RuntimeError(SPARK % (1, reason)))
    assert isinstance(error, HorovodInternalError)
    assert str(error) == ("rank 1 (on h2, pid 12) was lost with its Spark executor 1 before "
                          "its function returned: " + reason + "; rank 0 stopped in "
                          "consequence\n(rank 1 ran in Spark executor 1)")
    # a task that never said which rank it runs: Spark's words alone
    error = errors.job_error(_store({1: TASKS[1]}, {}), "j", 2,
                             RuntimeError(SPARK % (0, reason)))
    assert str(error).startswith("tf_hvd.spark.run: the Spark job failed before every rank "
                                 "started"), str(error)


def test_a_job_that_failed_before_its_ranks_started_says_so():
    error = errors.job_error(_store({0: TASKS[0]}, {}), "j", 2,
                             RuntimeError("Job aborted: something else"))
    assert str(error) == ("tf_hvd.spark.run: the Spark job failed before every rank started "
                          "(rank(s) [1] did not): Job aborted: something else")


def test_run_elastic_says_why_it_is_not_supported():
    import tf_hvd.spark
    with pytest.raises(NotImplementedError, match="a Spark barrier stage has a fixed number "
                       "of tasks"):
        tf_hvd.spark.run_elastic(print, num_proc=2)


def test_importing_tf_hvd_spark_needs_no_pyspark():
    code = ("import sys; sys.modules['pyspark'] = None; import tf_hvd.spark\n"
            "try:\n    tf_hvd.spark.run(print)\nexcept ImportError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().strip() == ("tf_hvd.spark needs pyspark: pip install pyspark "
                                           "(tools/requirements-spark.txt) and a Java 17 runtime")
