"""Faults, bad input and bad start-ups: tf_hvd never hangs silently and says what broke.

Each job runs tests/parallel/fault_workers/fault_worker.py under the launcher
(``python -m tf_hvd.runner -np N [--mpi]``) with a hard time limit; a job that
outlives it is killed and fails the test. Every rank records its pid, and after each
job the test checks that no rank survived the launcher. Ranks report what happened
to them as JSON events (see the worker's docstring).

Cases (np=2 and 3; Gloo, and MPI where the transport allows -- under MPI the process
manager kills the other ranks itself, so only the launcher's report is checked there,
and a rank that never starts is an mpiexec matter):

* a rank SIGKILLed mid-training; a rank raising an exception;
* a rank that sleeps before a collective (stall warning on rank 0 naming the tensor
  and the missing ranks), and past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS (every rank,
  the sleeping one included, stops at once with an error naming both; the job ends);
* a peer gone: UnavailableError eagerly, in a tf.function and in a graph;
* hvd.shutdown() with an op pending; interpreter exit with an op pending / without
  shutdown;
* hvd.join() with uneven numbers of batches in a training loop;
* a rank that never reaches hvd.init() (start timeout naming it);
* malformed environment knobs; malformed launcher arguments; a port in use.
"""

import glob
import json
import os
import re
import socket
import sys
import time

import pytest

from collective_launch import job_env, readable_tail
from jobrunner import JobResult, run, tfhvdrun_cmd, wait_gone

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(REPO, "tests", "parallel", "fault_workers", "fault_worker.py")
PY = sys.executable
JOB_TIMEOUT = 180
# Every collective of a job gives up on a dead or frozen peer after this long.
GLOO_TIMEOUT = 20

# -- running one job ---------------------------------------------------------------------

class Job(JobResult):
    """A finished fault-worker job: its JobResult (``code`` is the returncode), when it
    ended (wall clock), the ranks still alive after it, and the ranks' events."""

    def __init__(self, res, end_wall, result_dir, orphans):
        self.__dict__.update(vars(res))
        self.code = res.returncode
        self.end_wall, self.result_dir, self.orphans = end_wall, result_dir, orphans
        self.events = {}
        for path in glob.glob(os.path.join(result_dir, "rank*.events")):
            rank = int(os.path.basename(path)[4:-7])
            with open(path) as f:
                self.events[rank] = [json.loads(line) for line in f if line.strip()]

    def describe(self):
        return JobResult.describe(self, text=readable_tail(self.output, 80))

    def event(self, rank, name):
        """The first event ``name`` of ``rank``, or None."""
        for e in self.events.get(rank, []):
            if e["event"] == name:
                return e
        return None

    def require(self, rank, name):
        e = self.event(rank, name)
        assert e is not None, "rank %d reported no %r event\n%s" % (rank, name, self.describe())
        return e

    def launcher_lines(self):
        return [l for l in self.output.splitlines() if l.startswith("tfhvdrun:")]


def run_job(tmp_path, np_, transport, scenario, worker_args=(), launcher_args=(), env=None,
            timeout=JOB_TIMEOUT, tag=""):
    result_dir = str(tmp_path / ("%s-%s-np%d%s" % (scenario, transport, np_, tag)))
    os.makedirs(result_dir)
    cmd = tfhvdrun_cmd(np_, mpi=transport == "mpi", launcher_args=launcher_args)
    cmd += [PY, WORKER, "--scenario", scenario, "--result-dir", result_dir]
    cmd += [str(a) for a in worker_args]
    job_environment = {"HOROVOD_GLOO_TIMEOUT_SECONDS": str(GLOO_TIMEOUT)}
    job_environment.update(env or {})
    res = run(cmd, timeout, env=job_env(job_environment),
              log_path=os.path.join(result_dir, "output.log"))
    end_wall = time.time()
    # No rank may outlive the launcher (give the kernel a moment to reap them).
    pids = []
    for path in glob.glob(os.path.join(result_dir, "pid.*")):
        with open(path) as f:
            pids.append(int(f.read()))
    orphans = sorted(set(wait_gone(pids, within=5)) | set(res.survivors))
    job = Job(res, end_wall, result_dir, orphans)
    assert not res.timed_out, "job did not end within %d s (hang)\n%s" % (timeout,
                                                                          job.describe())
    assert not orphans, "processes outlived the launcher: %r\n%s" % (orphans, job.describe())
    assert len(pids) == np_, "expected %d pid files, found %d\n%s" % (np_, len(pids),
                                                                      job.describe())
    return job


_cache = {}


def cached_job(tmp_path_factory, key, *args, **kwargs):
    """Run a job once per session, so that several tests can check one job."""
    if key not in _cache:
        _cache[key] = run_job(tmp_path_factory.mktemp(key[0]), *args, **kwargs)
    return _cache[key]


def _needs_mpi(transport):
    if transport == "mpi":
        from tf_hvd.runner.modes import mpiexec as mpi
        if mpi.find_mpiexec() is None:
            pytest.skip("no mpiexec")


def _killed_line(victim):
    return re.compile(r"^tfhvdrun: rank %d( \(on \S+(, pid \d+)?\))? was killed by signal 9 "
                      r"\(SIGKILL\)"
                      % victim, re.M)


def _exited_line(rank, code):
    # A rank that raised may still be tearing TensorFlow down when the others
    # have failed; the launcher then names it by its traceback instead.
    return re.compile(r"^tfhvdrun: rank %d( \(on \S+(, pid \d+)?\))? (exited with code %d|"
                      r"raised an exception)" % (rank, code), re.M)


# -- a rank dies ------------------------------------------------------------------------------

DEATH_CASES = [(2, "gloo", 1), (3, "gloo", 0), (2, "mpi", 1), (3, "mpi", 2)]


def _check_survivors(job, np_, victim):
    for r in range(np_):
        if r == victim:
            continue
        failed = job.require(r, "collective_failed")
        # transport failures surface as UnavailableError, in a tf.function too
        assert failed["type"] in ("UnavailableError", "AbortedError"), failed
        # the error names the rank that left and its host (also when the link that
        # broke was to another survivor, which had stopped because of it)
        assert "rank %d (on localhost)" % victim in failed["message"], failed
        assert failed["seconds_since_last_ok"] < GLOO_TIMEOUT, failed
        later = job.require(r, "later_collective_failed")
        assert later["seconds"] < 5, later


def _kill_job(tmp_path_factory, np_, transport, victim):
    return cached_job(tmp_path_factory, ("kill", np_, transport, victim), np_, transport,
                      "kill", worker_args=["--victim", victim])


@pytest.mark.parametrize("np_,transport,victim", DEATH_CASES)
def test_rank_killed_mid_training(tmp_path_factory, np_, transport, victim):
    _needs_mpi(transport)
    job = _kill_job(tmp_path_factory, np_, transport, victim)
    assert job.code == 128 + 9, job.describe()
    assert _killed_line(victim).search(job.output), job.describe()
    acted = job.require(victim, "victim_acts")
    # the launcher ended the job within seconds of the death
    assert job.end_wall - acted["wall"] < 15, job.describe()
    if transport == "gloo":
        _check_survivors(job, np_, victim)


@pytest.mark.parametrize("np_,transport,victim", [(2, "gloo", 1), (3, "gloo", 2),
                                                   (2, "mpi", 1), (3, "mpi", 0)])
def test_rank_raises(tmp_path, np_, transport, victim):
    _needs_mpi(transport)
    job = run_job(tmp_path, np_, transport, "raise", worker_args=["--victim", victim])
    assert job.code == 1, job.describe()
    # Named whether its process ended first ("exited with code 1 after raising an
    # exception") or was still shutting down when the others' exits ended the job
    # ("raised an exception ... and was then stopped").
    assert _exited_line(victim, 1).search(job.output) or re.search(
        r"^tfhvdrun: rank %d( \(on \S+, pid \d+\))? raised an exception" % victim,
        job.output,
        re.M), job.describe()
    assert len(job.launcher_lines()) == 1, job.describe()
    assert "RuntimeError: deliberate failure on rank %d" % victim in job.output
    acted = job.require(victim, "victim_acts")
    assert job.end_wall - acted["wall"] < 15, job.describe()
    if transport == "gloo":
        _check_survivors(job, np_, victim)


def test_collective_after_a_rank_died_names_the_failure(tmp_path_factory):
    """Regression: it used to say 'Horovod has not been initialized'."""
    job = _kill_job(tmp_path_factory, 2, "gloo", 1)
    later = job.require(0, "later_collective_failed")
    assert "not been initialized" not in later["message"], later
    assert "exited" in later["message"] or "crashed" in later["message"] or \
        "shut down" in later["message"], later


# -- the launcher and every survivor name the rank that left, whatever the way -----------

LEAVE_CASES = {
    # how: (launcher line after "rank 1 (on localhost, pid P) ", exit code, survivors' error)
    "exit": (r"exited with code 3", 3, "rank 1 (on localhost) left the job (its process is "
             "exiting); this collective did not run"),
    "raise": (r"(exited with code 1 after raising an exception|raised an exception) \(its "
              r"traceback is above\)( and was then stopped)?", 1,
              "rank 1 (on localhost) left the job (its process is exiting); this collective "
              "did not run"),
    "kill": (r"was killed by signal 9 \(SIGKILL\)", 128 + 9, "rank 1 (on localhost)"),
    "shutdown": (r"called hvd\.shutdown\(\) while the other ranks still ran collectives and "
                 r"then exited with code 0", 1,
                 "rank 1 (on localhost) called hvd.shutdown(); this collective did not run"),
}


@pytest.mark.parametrize("how", sorted(LEAVE_CASES))
def test_launcher_and_survivors_name_the_rank_that_left(tmp_path, how):
    """np=3, rank 1 leaves while ranks 0 and 2 train on: the launcher's one line names
    rank 1, how it ended, and the ranks that stopped in consequence, and exits with rank
    1's code; every survivor's error (pending and later) names rank 1 and its host, in one
    message."""
    line, code, survivor_text = LEAVE_CASES[how]
    job = run_job(tmp_path, 3, "gloo", "leave", worker_args=["--victim", 1, "--how", how])
    assert job.launcher_lines() and re.match(
        r"^tfhvdrun: rank 1 \(on localhost, pid %d\) %s; ranks 0, 2 stopped in consequence$"
        % (job.require(1, "victim_acts")["pid"], line),
        job.launcher_lines()[0]), job.describe()
    assert len(job.launcher_lines()) == 1, job.describe()
    assert job.code == code, job.describe()
    for r in (0, 2):
        failed = job.require(r, "collective_failed")
        assert survivor_text in failed["message"], failed
        later = job.require(r, "later_collective_failed")
        assert later["type"] == failed["type"] or how == "kill", (failed, later)
        assert "rank 1 (on localhost)" in later["message"], later
        assert "not been initialized" not in later["message"], later


def test_under_mpi_the_launcher_follows_the_ranks_fault_reports(tmp_path):
    """tfhvdrun --mpi, np=3, rank 1 sys.exit(3) while ranks 0 and 2 reduce: their cores'
    fault reports (rank.<r>.fault in the launcher's status directory) name rank 1, so the
    launcher names rank 1 and its code 3 whichever process ended first."""
    _needs_mpi("mpi")
    job = run_job(tmp_path, 3, "mpi", "leave", worker_args=["--victim", 1, "--how", "exit"])
    assert job.launcher_lines() == [
        "tfhvdrun: rank 1 exited with code 3; ranks 0, 2 stopped in consequence"], \
        job.describe()
    assert job.code == 3, job.describe()


def test_survivors_init_again_as_a_smaller_job_in_the_same_process(tmp_path):
    """What elastic training builds on: after rank 1 of 3 left, ranks 0 and 2 shut down and
    init again with a new HOROVOD_RANK/SIZE in the same process, and reduce as 2 ranks."""
    job = run_job(tmp_path, 3, "gloo", "shrink", worker_args=["--victim", 1])
    assert job.code == 0, job.describe()
    for r, new_rank in ((0, 0), (2, 1)):
        assert "rank 1 (on localhost) left the job" in \
            job.require(r, "collective_failed")["message"]
        reinit = job.require(r, "reinit")
        assert (reinit["new_rank"], reinit["size"], reinit["value"]) == (new_rank, 2, 3.0), reinit


# -- stalls -----------------------------------------------------------------------------------

STALL_ENV = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "2"}


# np=3 on Gloo with the coordinator and another rank stalling, np=2 on MPI (np=2 on Gloo
# runs no path these do not).
@pytest.mark.parametrize("np_,transport,victim", [(3, "gloo", 0), (3, "gloo", 2),
                                                   (2, "mpi", 1)])
def test_stall_warning_names_tensor_and_missing_ranks(tmp_path, np_, transport, victim):
    _needs_mpi(transport)
    job = run_job(tmp_path, np_, transport, "stall",
                  worker_args=["--victim", victim, "--sleep", 5], env=STALL_ENV)
    assert job.code == 0, job.describe()
    others = ",".join(str(r) for r in range(np_) if r != victim)
    warning = re.compile(r"^\[0\]<stderr>:.*WARNING.*Stall detected: tensor 'stall_probe' "
                         r"\(allreduce\) has waited \d+ s: submitted by ranks \[%s\] but not "
                         r"yet by ranks \[%d\]" % (others, victim), re.M)
    assert warning.search(job.output), job.describe()
    # the warning comes from the coordinator only
    assert not re.search(r"^\[[1-9]\d*\]<stderr>:.*Stall detected", job.output, re.M)
    for r in range(np_):
        done = job.require(r, "probe_done")
        assert done["value"] == np_ * (np_ + 1) / 2
        assert job.require(r, "after_stall")["value"] == np_


@pytest.mark.parametrize("np_,transport,victim", [(3, "gloo", 2), (3, "gloo", 0),
                                                   (2, "mpi", 1)])
def test_stall_shutdown_fails_every_rank_and_ends_the_job(tmp_path, np_, transport, victim):
    _needs_mpi(transport)
    # the shutdown time alone, below the (default, 60 s) warning time: it still applies
    env = {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "4"}
    job = run_job(tmp_path, np_, transport, "stall-shutdown",
                  worker_args=["--victim", victim, "--sleep", 8], env=env)
    assert job.code not in (0, None), job.describe()
    missing = "not yet by ranks [%d]" % victim
    failures = []
    for r in range(np_):
        failed = job.require(r, "probe_failed")
        assert failed["type"] == "AbortedError", failed
        assert "stall_probe" in failed["message"] and "stall" in failed["message"], failed
        assert missing in failed["message"], failed
        if r != victim:
            assert 3.5 <= failed["seconds"] < 8, failed
            failures.append(failed["wall"])
    # The others fail together, and the sleeping rank's core stops with them.
    stopped = job.require(victim, "core_stopped")["wall"]
    assert max(failures) - min(failures) < 1.0, job.describe()
    assert max(abs(stopped - w) for w in failures) < 1.0, job.describe()
    # Once awake, its collectives fail at once (eagerly and in a tf.function) with
    # the same error instead of stalling again.
    assert job.require(victim, "probe_failed")["seconds"] < 1, job.describe()
    late = job.require(victim, "late_failed")
    assert late["type"] == "AbortedError" and missing in late["message"], late
    assert late["seconds"] < 1, late
    assert any(l for l in job.launcher_lines() if "exited with code 1" in l), job.describe()


# -- error types ---------------------------------------------------------------------------------

@pytest.mark.parametrize("np_,first", [(2, "function"), (3, "function"), (2, "graph")])
def test_peer_gone_raises_unavailable_in_function_and_graph(tmp_path, np_, first):
    """A collective failing because a peer is gone raises UnavailableError however it
    runs: TensorFlow's executor would rename it InternalError inside tf.function and
    graphs if the ops were not marked as distributed communication."""
    victim = np_ - 1
    job = run_job(tmp_path, np_, "gloo", "peer-gone", env={"HOROVOD_GLOO_TIMEOUT_SECONDS": "5"},
                  worker_args=["--victim", victim, "--first", first], timeout=120)
    job.require(victim, "victim_acts")
    for r in range(np_ - 1):
        for kind in ("function", "graph", "eager"):
            failed = job.require(r, "failed_" + kind)
            assert failed["type"] == "UnavailableError", failed
            assert "InternalError" not in failed["message"], failed
            assert failed["pending"] == (kind == first), failed
            assert failed["seconds"] < (8 if kind == first else 1), failed
        assert "a rank may have exited or crashed" in job.require(r, "failed_" + first)["message"]


# -- shutdown and exit with pending collectives ------------------------------------------------

@pytest.mark.parametrize("np_,transport", [(2, "gloo"), (3, "gloo"), (2, "mpi")])
def test_shutdown_with_pending_op_then_init_again(tmp_path_factory, np_, transport):
    _needs_mpi(transport)
    job = cached_job(tmp_path_factory, ("shutdown-pending", np_, transport), np_, transport,
                     "shutdown-pending")
    assert job.code == 0, job.describe()
    pending = job.require(0, "pending_failed")
    # Rank 0's own shutdown or the others' (negotiated first) ends the op, whichever
    # reaches its core first; either way the message says who shut down.
    by_others = re.search(r"(rank [1-9] \(on localhost\) called hvd.shutdown\(\); )+"
                          r"this collective did not run", pending["message"])
    assert pending["type"] == "AbortedError", pending
    assert ("Horovod has been shut down in this process" in pending["message"]
            or by_others), pending
    thread = job.require(0, "pending_thread")
    assert thread["alive"] is False and thread["result"] == "failed", thread
    for r in range(np_):
        assert job.require(r, "shutdown_returned")["seconds"] < 10
        assert job.require(r, "after_shutdown_failed")["type"] in (
            "ValueError", "FailedPreconditionError", "AbortedError")
        reinit = job.require(r, "reinit")
        assert reinit["size"] == np_ and reinit["value"] == np_, reinit


def test_collective_after_shutdown_says_so(tmp_path_factory):
    """Regression: it used to say 'Horovod has not been initialized'."""
    job = cached_job(tmp_path_factory, ("shutdown-pending", 2, "gloo"), 2, "gloo",
                     "shutdown-pending")
    message = job.require(0, "after_shutdown_failed")["message"]
    assert "shut down" in message, message


_CRASH = re.compile(r"Segmentation fault|core dumped|terminate called|Fatal Python error|"
                    r"SIGSEGV|SIGABRT|SIGBUS")


@pytest.mark.parametrize("np_,transport", [(2, "gloo"), (3, "gloo"), (2, "mpi")])
def test_exit_with_pending_op_does_not_hang(tmp_path, np_, transport):
    _needs_mpi(transport)
    job = run_job(tmp_path, np_, transport, "exit-pending", timeout=120)
    assert job.code == 0, job.describe()
    assert not _CRASH.search(job.output), job.describe()
    for r in range(np_):
        job.require(r, "exiting")


@pytest.mark.parametrize("np_,transport", [(3, "gloo"), (2, "mpi")])
def test_exit_without_shutdown(tmp_path_factory, np_, transport):
    _needs_mpi(transport)
    job = cached_job(tmp_path_factory, ("exit-plain", np_, transport), np_, transport,
                     "exit-plain", timeout=120)
    assert job.code == 0, job.describe()
    assert not _CRASH.search(job.output), job.describe()


def test_exit_without_shutdown_logs_no_error(tmp_path_factory):
    """Regression: the ranks still running used to log 'ERROR ... negotiation failed'
    when the others exited at the end of the script."""
    job = cached_job(tmp_path_factory, ("exit-plain", 3, "gloo"), 3, "gloo", "exit-plain",
                     timeout=120)
    errors = [l for l in job.output.splitlines() if " ERROR tf_hvd " in l]
    assert not errors, errors


# -- uneven data with join -------------------------------------------------------------------

@pytest.mark.parametrize("np_,transport", [(2, "gloo"), (3, "gloo"), (3, "mpi")])
def test_join_with_uneven_batches(tmp_path, np_, transport):
    _needs_mpi(transport)
    job = run_job(tmp_path, np_, transport, "join")
    assert job.code == 0, job.describe()
    for r in range(np_):
        steps = [e for e in job.events[r] if e["event"] == "step"]
        assert len(steps) == 3 + 2 * r
        joined = job.require(r, "joined")
        assert joined["last_joined"] == np_ - 1, joined
        # the weights are what averaging the active ranks' gradients (joined ranks
        # contributing zeros) gives, identical on every rank
        assert joined["max_error"] < 1e-5, joined
        assert joined["spread"] == 0.0, joined


@pytest.mark.parametrize("np_,transport", [(2, "gloo"), (3, "mpi")])
def test_cached_allreduce_after_join_is_not_delayed(tmp_path, np_, transport):
    """Regression: a response-cached allreduce used to wait for the stall-check time
    when another rank had joined (cache hits were matched only through the bit vector,
    which a joined rank never sets)."""
    _needs_mpi(transport)
    job = run_job(tmp_path, np_, transport, "join-cached",
                  env={"HOROVOD_STALL_CHECK_TIME_SECONDS": "15"})
    assert job.code == 0, job.describe()
    assert job.require(np_ - 1, "cached_after_join")["seconds"] < 5


# -- start-up -------------------------------------------------------------------------------

@pytest.mark.parametrize("np_,scenario,victim", [(2, "never-init", 1), (3, "never-init", 2),
                                                  (2, "exit-before-init", 0)])
def test_rank_that_never_checks_in(tmp_path, np_, scenario, victim):
    start_timeout = 5
    job = run_job(tmp_path, np_, "gloo", scenario, worker_args=["--victim", victim],
                  launcher_args=["--start-timeout", start_timeout])
    assert job.code == 1, job.describe()
    for r in range(np_):
        if r == victim:
            continue
        failed = job.require(r, "init_failed")
        m = re.search(r"rank\(s\) \[([\d,]+)\] of %d did not check in" % np_,
                      failed["message"])
        assert m, failed
        assert str(victim) in m.group(1).split(","), failed
        assert "--start-timeout" in failed["message"]
        assert start_timeout - 0.5 <= failed["seconds"] < start_timeout + 20, failed
    assert re.search(r"^tfhvdrun: rank\(s\) \[[\d,]*%d[\d,]*\] never checked in" % victim,
                     job.output, re.M), job.describe()


# -- bad environment knobs ----------------------------------------------------------------------

@pytest.mark.parametrize("np_,transport,name,value", [
    (2, "gloo", "HOROVOD_FUSION_THRESHOLD", "abc"),
    (2, "gloo", "HOROVOD_CYCLE_TIME", "-5"),
    (2, "mpi", "HOROVOD_STALL_CHECK_TIME_SECONDS", "soon"),
])
def test_bad_environment_knob_is_rejected_at_init(tmp_path, np_, transport, name, value):
    _needs_mpi(transport)
    job = run_job(tmp_path, np_, transport, "init-only", env={name: value})
    assert job.code == 1, job.describe()
    # Every rank fails the same way at once; the launcher stops the others as soon as
    # the first one exits, so a rank may be stopped before it reports.
    reported = [r for r in range(np_) if job.event(r, "init_failed") is not None]
    assert reported, job.describe()
    for r in reported:
        failed = job.require(r, "init_failed")
        assert failed["type"] == "RuntimeError", failed
        assert "%s='%s'" % (name, value) in failed["message"], failed
        assert "non-negative number" in failed["message"], failed


# -- bad launcher arguments (no TensorFlow involved) ------------------------------------------------

def _launch(args, cwd=None, timeout=60):
    return run([PY, "-m", "tf_hvd.runner"] + args, timeout, env=job_env(), cwd=cwd or REPO,
               merge_stderr=False).check_finished()


def _usage_error(proc, *fragments):
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tfhvdrun: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert proc.stdout == b""


def _marker_script(tmp_path):
    marker = tmp_path / "started"
    script = tmp_path / "mark.py"
    script.write_text("open(%r, 'a').write('x')\n" % str(marker))
    return str(script), marker


@pytest.mark.parametrize("hosts,fragment", [
    ("localhost:x", "malformed slot count 'x'"),
    ("localhost:2:1", "malformed -H entry"),
    ("localhost:0", "at least 1"),
    ("local host:2", "malformed host name"),
    ("a:1,,b:1", "empty entry"),
    ("a:1,a:1", "more than once"),
])
def test_malformed_host_list(tmp_path, hosts, fragment):
    script, marker = _marker_script(tmp_path)
    _usage_error(_launch(["-np", "2", "-H", hosts, PY, script]), fragment)
    assert not marker.exists()


def test_hostfile_bad_line_reports_its_number(tmp_path):
    script, marker = _marker_script(tmp_path)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# cluster\nlocalhost slots=2\n\nnode2 slots=two\n")
    _usage_error(_launch(["-np", "2", "--hostfile", str(hostfile), PY, script]),
                 str(hostfile), "line 4", "'two'")
    hostfile.write_text("localhost slots=2\nnode2 cpus=4\n")
    _usage_error(_launch(["-np", "2", "--hostfile", str(hostfile), PY, script]), "line 2")
    _usage_error(_launch(["-np", "2", "--hostfile", str(tmp_path / "none"), PY, script]),
                 "cannot read host file")
    assert not marker.exists()


@pytest.mark.parametrize("args,fragment", [
    (["-np", "0"], "-np must be at least 1"),
    (["-np", "-3"], "-np must be at least 1"),
    (["-np", "two"], "expected an integer"),
    (["-np", "3", "-H", "localhost:2"], "more than the 2 slot"),
    (["-np", "2", "--start-timeout", "0"], "--start-timeout"),
    (["-np", "2", "--fusion-threshold-mb", "abc"], "expected a number"),
    (["-np", "2", "--cycle-time-ms", "-1"], "--cycle-time-ms must not be negative"),
    (["-np", "2", "--rendezvous-port", "70000"], "--rendezvous-port"),
])
def test_bad_arguments(tmp_path, args, fragment):
    script, marker = _marker_script(tmp_path)
    _usage_error(_launch(args + [PY, script]), fragment)
    assert not marker.exists()


def test_script_that_does_not_exist(tmp_path):
    _usage_error(_launch(["-np", "2", PY, str(tmp_path / "nope.py")]), "nope.py",
                 "does not exist")
    _usage_error(_launch(["-np", "2", "no-such-program-tfhvd"]), "not found")


def test_rendezvous_port_in_use(tmp_path):
    script, marker = _marker_script(tmp_path)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        _usage_error(_launch(["-np", "2", "--rendezvous-port", str(port), PY, script]),
                     "127.0.0.1:%d" % port, "in use", "--rendezvous-port")
    finally:
        busy.close()
    assert not marker.exists()
    # and a free port given explicitly is used
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    proc = _launch(["-np", "2", "--rendezvous-port", str(port), PY, "-c",
                    "import os; print(os.environ['HOROVOD_GLOO_RENDEZVOUS_PORT'])"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().split() == ["[0]<stdout>:%d" % port, "[1]<stdout>:%d" % port] \
        or sorted(proc.stdout.decode().split()) == sorted(
            ["[0]<stdout>:%d" % port, "[1]<stdout>:%d" % port])
