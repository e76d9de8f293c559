"""Which rank the launcher names when a job fails (tf_hvd/runner/processes/failures.py), and the
launcher doing it end to end in both modes with a rank whose teardown is slow."""

import os
import sys
import textwrap

import pytest

from jobrunner import clean_env, run, tfhvdrun_cmd

from tf_hvd.runner.processes import failures
from tf_hvd.runner.modes import mpiexec as mpi
from tf_hvd.runner.processes.failures import Outcome

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = sys.executable


def _name(outcomes):
    found = failures.first_failure(outcomes)
    return None if found is None else found.rank


def test_no_failure():
    assert _name([Outcome(0, "h", 0, 1.0, None), Outcome(1, "h", 0, 1.1, None)]) is None
    assert _name([]) is None


def test_killed_rank_is_named_not_the_ranks_whose_collectives_then_failed():
    assert _name([Outcome(0, "h", 1, 1.30, 1.20),     # its allreduce failed: traceback
                  Outcome(1, "h", -9, 1.00, None),    # SIGKILLed first
                  Outcome(2, "h", 1, 1.25, 1.21)]) == 1


def test_rank_that_raised_is_named_even_if_it_ends_last():
    # rank 0 raised (traceback at 1.0) and sat in its interpreter's teardown until the
    # launcher stopped it; rank 1 saw its collective fail and exited first
    outcomes = [Outcome(0, "h", -15, 3.0, 1.0), Outcome(1, "h", 1, 1.3, None)]
    assert _name(outcomes) == 0
    text = failures.describe(outcomes[0], first_exit_time=1.3)
    assert text == "rank 0 (on h) raised an exception (its traceback is above) and was " \
                   "then stopped"


def test_ranks_stopped_by_the_teardown_are_not_blamed():
    assert _name([Outcome(0, "h", 3, 1.0, None), Outcome(1, "h", -15, 1.1, None),
                  Outcome(2, "h", -9, 4.0, None)]) == 0


def test_earliest_exit_wins_and_ties_go_to_the_lowest_rank():
    assert _name([Outcome(r, None, 5, 1.0 + 0.2 * r, None) for r in range(3)]) == 0
    assert _name([Outcome(2, None, 5, 1.0, None), Outcome(1, None, 5, 1.0, None)]) == 1


def test_descriptions():
    assert failures.describe(Outcome(1, "node2", -9, 1.0, None), 1.0) == \
        "rank 1 (on node2) was killed by signal 9 (SIGKILL)"
    assert failures.describe(Outcome(1, None, 3, 1.0, None), 1.0) == "rank 1 exited with code 3"
    assert failures.describe(Outcome(0, "h", 1, 2.0, 1.0), 1.5) == \
        "rank 0 (on h) exited with code 1 after raising an exception (its traceback is above)"


SLOW_TEARDOWN = """
import os, signal, sys, time
rank = int(os.environ.get("HOROVOD_RANK") or os.environ.get("PMI_RANK"))
if rank == 0:
    # an uncaught exception whose process then takes long to end (like a rank that
    # shuts TensorFlow and MPI down after its traceback)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    print("Traceback (most recent call last):", file=sys.stderr, flush=True)
    print("RuntimeError: the real problem", file=sys.stderr, flush=True)
    time.sleep(30)
    sys.exit(1)
time.sleep(1.0)  # the others fail because of rank 0, and exit first
sys.exit(7)
"""


def _run(tmp_path, extra):
    script = tmp_path / "slow.py"
    script.write_text(textwrap.dedent(SLOW_TEARDOWN))
    return run(tfhvdrun_cmd(3, launcher_args=extra) + [PY, str(script)], 90, env=clean_env(),
               cwd=REPO, merge_stderr=False).check_finished()


@pytest.mark.parametrize("mode", ["gloo", "mpi"])
def test_launcher_names_the_rank_that_raised(tmp_path, mode):
    if mode == "mpi" and mpi.find_mpiexec() is None:
        pytest.skip("no mpiexec")
    proc = _run(tmp_path, ["--mpi"] if mode == "mpi" else [])
    err = proc.stderr.decode()
    mine = [l for l in err.splitlines() if l.startswith("tfhvdrun:")]
    assert len(mine) == 1, err
    assert mine[0].startswith("tfhvdrun: rank 0 ") and "raised an exception" in mine[0], err
    assert proc.returncode == 7, err  # the first non-zero status seen


# -- fault records: the ranks' cores say which rank made them stop ---------------------------

def _rec(culprit, kind):
    return failures.FaultRecord(culprit, kind, "")


def test_parse_record():
    assert failures.parse_record(b"culprit=1\nkind=exiting\nrank 1 (on h) left") == \
        failures.FaultRecord(1, "exiting", "rank 1 (on h) left")
    assert failures.parse_record("garbage") is None
    assert failures.parse_record("culprit=x\nkind=lost\n") is None


def test_records_name_the_rank_that_exited_although_the_others_ended_first():
    # rank 1 sys.exit(3): its interpreter's teardown outlasts ranks 0 and 2, which raised
    # (tracebacks) because rank 1 left the job
    outcomes = [Outcome(0, "h", 1, 1.3, 1.1), Outcome(1, "h", 3, 2.0, None),
                Outcome(2, "h", 1, 1.35, 1.12)]
    records = {0: _rec(1, "exiting"), 2: _rec(1, "exiting")}
    root, consequences, first_exit = failures.blame(outcomes, records)
    assert root.rank == 1 and consequences == [0, 2]
    assert failures.describe_blame(root, consequences, first_exit, records) == \
        "rank 1 (on h) exited with code 3; ranks 0, 2 stopped in consequence"
    assert failures.exit_code_of(root, 1, first_exit) == 3


def test_records_are_followed_through_a_survivor_that_stopped_first():
    # rank 2 lost its link to rank 0, which had stopped because rank 1 was SIGKILLed
    outcomes = [Outcome(0, "h", -9, 2.0, None), Outcome(1, "h", -9, 1.0, None),
                Outcome(2, "h", 1, 1.2, 1.1)]
    records = {0: _rec(1, "lost"), 2: _rec(0, "lost")}
    root, consequences, first_exit = failures.blame(outcomes, records)
    assert root.rank == 1 and consequences == [0, 2]
    assert failures.describe_blame(root, consequences, first_exit, records) == \
        "rank 1 (on h) was killed by signal 9 (SIGKILL); ranks 0, 2 stopped in consequence"
    assert failures.exit_code_of(root, -9, first_exit) == 128 + 9


def test_a_rank_that_shut_down_early_is_named_although_it_exited_cleanly():
    outcomes = [Outcome(0, "h", 1, 1.3, 1.1), Outcome(1, "h", 0, 2.0, None)]
    records = {0: _rec(1, "shutdown")}
    root, consequences, first_exit = failures.blame(outcomes, records)
    assert failures.describe_blame(root, consequences, first_exit, records) == \
        "rank 1 (on h) called hvd.shutdown() while the other ranks still ran collectives " \
        "and then exited with code 0; rank 0 stopped in consequence"
    assert failures.exit_code_of(root, 1, first_exit) == 1
    assert failures.culprits_named(records) == {1}


def test_a_remote_rank_killed_first_is_named_although_its_status_came_last():
    # rank 2 SIGKILLed on h2: rank 3 (h2) exits first and left no record; ranks 0 and 1
    # name rank 2; rank 2's "killed by 9" came over ssh after the others' exits
    outcomes = [Outcome(0, "h1", 1, 1.4, 1.2), Outcome(1, "h1", 1, 1.45, 1.25),
                Outcome(2, "h2", -9, 1.6, None), Outcome(3, "h2", 1, 1.1, 1.05)]
    records = {0: _rec(2, "lost"), 1: _rec(2, "lost")}
    root, consequences, first_exit = failures.blame(outcomes, records)
    assert root.rank == 2 and consequences == [0, 1, 3]
    assert failures.describe_blame(root, consequences, first_exit, records) == \
        "rank 2 (on h2) was killed by signal 9 (SIGKILL); ranks 0, 1, 3 stopped in consequence"
    assert failures.exit_code_of(root, 1, first_exit, records) == 128 + 9
    # without records, a signal after the first exit stays the teardown's
    root, _, first_exit = failures.blame(outcomes, {})
    assert root.rank == 3


def test_ssh_rank_reports_the_remote_signal_even_when_the_launcher_stopped_it():
    # The "ssh" here ignores the forwarded SIGTERM and then reports what remote_rank.py
    # says for a rank SIGKILLed on its host (137): the wrapper dies by SIGKILL, not SIGTERM.
    import signal
    import subprocess
    import time
    fake_ssh = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "print('up', flush=True); time.sleep(1.0); sys.exit(137)")
    wrapper = os.path.join(REPO, "tf_hvd", "runner", "processes", "ssh_rank.py")
    proc = subprocess.Popen([sys.executable, wrapper, "h2", "--", sys.executable, "-c",
                             fake_ssh], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"up\n"
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
