"""How every function launcher names a failed job (tf_hvd/job/failure_report.py), from
structured records only: the root cause first with host and pid, then the ranks that
stopped in consequence; the error's type."""

import pickle

from tf_hvd.exceptions import HorovodInternalError
from tf_hvd.job import rank_function
from tf_hvd.job.failure_report import RankEnd, error_for, first_line, job_error, root_cause
from tf_hvd.job.fault_record import FaultRecord, from_store, parse
from tf_hvd.job.rendezvous import KVStore

SILENT = ("rank 1 (on h2) stopped answering: its core sent no liveness proof for 6 s "
          "(HOROVOD_PEER_TIMEOUT_SECONDS=6)")


def _raised(error):
    return rank_function.raised(error)


def test_the_records_lead_to_the_root_whichever_rank_failed_first():
    # rank 0 raised the peer-loss error its collective got; rank 1 was killed
    ends = {0: RankEnd(0, "h1", 10, raised=_raised(ValueError("words"))),
            1: RankEnd(1, "h2", 11, signal=9), 2: RankEnd(2, "h3", 12)}
    records = {0: FaultRecord(1, "lost", "x"), 2: FaultRecord(1, "lost", "x")}
    assert root_cause(ends, records) == 1
    assert first_line(ends, records) == ("rank 1 (on h2, pid 11) was killed by signal 9 "
                                         "(SIGKILL); ranks 0, 2 stopped in consequence")
    assert type(job_error(ends, records, HorovodInternalError)) is HorovodInternalError


def test_a_silent_rank_is_the_root_and_named_killed_when_the_launcher_killed_it():
    ends = {0: RankEnd(0, "h1", 10, raised=_raised(RuntimeError("x"))), 1: RankEnd(1, "h2", 11)}
    records = {0: FaultRecord(1, "silent", SILENT)}
    assert first_line(ends, records, killed={1}) == (
        "rank 1 (on h2, pid 11) stopped answering (its core sent no liveness proof for 6 s) "
        "and was killed (SIGKILL); rank 0 stopped in consequence")


def test_a_rank_that_raised_keeps_its_type_and_its_traceback_is_the_cause():
    ends = {0: RankEnd(0, "h1", 10, ok=True),
            1: RankEnd(1, "h2", 11, raised=_raised(KeyError("shard 7")))}
    error = job_error(ends, {}, HorovodInternalError, note="(more)")
    assert type(error) is KeyError
    assert error.args[0] == "rank 1 (on h2, pid 11) raised KeyError: 'shard 7'\n(more)"
    assert "KeyError" in str(error.__cause__)


def test_without_records_the_lowest_rank_that_failed_by_itself_is_named():
    ends = {0: RankEnd(0, exit_code=3), 1: RankEnd(1, raised=_raised(ValueError("v"))),
            2: RankEnd(2, raised=_raised(ValueError("w")))}
    # a rank that raised comes before one whose process only exited
    assert root_cause(ends, {}) == 1
    assert root_cause({0: RankEnd(0, ok=True)}, {}) is None


def test_a_root_seen_only_in_the_others_records_is_named_by_their_kind():
    ends = {0: RankEnd(0, raised=_raised(RuntimeError("x"))), 1: RankEnd(1, "h2", 11)}
    line = first_line(ends, {0: FaultRecord(1, "shutdown", "rank 1 called hvd.shutdown()")})
    assert line == ("rank 1 (on h2, pid 11) called hvd.shutdown() while the other ranks still "
                    "ran collectives; rank 0 stopped in consequence")


def test_an_exception_that_does_not_load_gives_runtime_error_with_its_words():
    raised = rank_function.Raised(None, "OddError", "odd", "")
    assert type(error_for(raised, "m", HorovodInternalError)) is RuntimeError
    assert type(error_for(None, "m", HorovodInternalError)) is HorovodInternalError


def test_the_store_holds_the_cores_records_under_their_rank():
    store = KVStore()
    store.put("tf_hvd/fault/2", b"culprit=0\nkind=lost\nrank 0 (on h1) exited or crashed")
    store.put("tf_hvd/fault/x", b"culprit=0\nkind=lost\n")
    store.put("tf_hvd/fault/3", b"not a record")
    records = from_store(store)
    assert list(records) == [2] and records[2].rank == 2 and records[2].culprit == 0
    assert parse(b"culprit=x\nkind=lost\n") is None


def test_the_function_runner_keeps_a_value_or_what_was_raised():
    kind, blob = rank_function.outcome(lambda: (max, ([1, 3],), {}))
    assert kind == rank_function.OK and pickle.loads(blob) == 3
    kind, blob = rank_function.outcome(lambda: (lambda: __import__("threading").Lock(), (), {}))
    assert kind == rank_function.RAISED
    assert rank_function.read_raised(blob).type_name == "TypeError"
    kind, blob = rank_function.outcome(lambda: 1 / 0)
    assert rank_function.read_raised(blob).type_name == "ZeroDivisionError"
