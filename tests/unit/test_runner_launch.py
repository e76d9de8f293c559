"""The launcher end to end with small plain-Python programs (no TensorFlow).

Each test starts ``python -m tf_hvd.runner`` with at most 3 ranks through
tests/jobrunner.py (a hard time limit each) and checks that no rank (or a rank's child)
outlives the launcher.
"""

import os
import queue
import re
import signal
import sys
import textwrap
import time

import pytest

from jobrunner import Job, clean_env, run, wait_gone
from tf_hvd.runner.modes import mpiexec as mpi

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = sys.executable


def _env(extra=None):
    return clean_env(extra)


def run_launcher(argv, timeout=60, env=None, cwd=None):
    """The launcher's result (stdout/stderr apart, as bytes); fails at ``timeout``."""
    return run([PY, "-m", "tf_hvd.runner"] + argv, timeout, env=env or _env(),
               cwd=cwd or REPO, merge_stderr=False).check_finished()


class LiveLauncher(object):
    """A launcher whose output is read while it runs."""

    def __init__(self, argv, env=None, grace=5.0):
        self.lines = queue.Queue()
        self.stdout, self.stderr = [], []
        self.job = Job([PY, "-m", "tf_hvd.runner"] + argv, env=env or _env(), cwd=REPO,
                       merge_stderr=False, on_line=self._line, grace=grace)
        self.proc = self.job.proc
        self.result = None

    def _line(self, stream, line):
        (self.stdout if stream == "stdout" else self.stderr).append(line)
        self.lines.put(line)

    def wait_for_lines(self, pattern, count, timeout=30):
        rx = re.compile(pattern)
        seen = []
        deadline = time.monotonic() + timeout
        while len(seen) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.job.kill()
                raise AssertionError("timed out waiting for %r; stdout=%r stderr=%r"
                                     % (pattern, self.stdout, self.stderr))
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if rx.search(line):
                seen.append(line)
        return seen

    def wait(self, timeout=60):
        """The launcher's exit code; fails (having killed the job) at ``timeout``."""
        self.result = self.job.wait(timeout)
        self.result.check_finished()
        return self.result.returncode


def _pids(directory):
    pids = []
    for name in os.listdir(directory):
        if name.startswith(("pid.", "gpid.")):
            with open(os.path.join(directory, name)) as f:
                pids.append(int(f.read()))
    return pids


def _assert_all_gone(pids, within=5.0):
    survivors = wait_gone(pids, within)  # killed, so a failing test leaves nothing behind
    assert not survivors, "processes survived the launcher: %r" % survivors


def _script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


# A rank program: records its pid (and a child's pid), then behaves per rank.
WORKER = """
import os, signal, subprocess, sys, time
rank = int(os.environ.get("HOROVOD_RANK") or os.environ.get("PMI_RANK"))
piddir = sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else ""
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
for name, pid in (("pid.%d" % rank, os.getpid()), ("gpid.%d" % rank, child.pid)):
    with open(os.path.join(piddir, name + ".tmp"), "w") as f:
        f.write(str(pid))
    os.rename(os.path.join(piddir, name + ".tmp"), os.path.join(piddir, name))
if mode == "ignore-term" and rank != 1:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode == "catch-int":
    def on_int(signum, frame):
        print("rank %d got SIGINT" % rank, flush=True)
        child.kill()
        sys.exit(0)
    signal.signal(signal.SIGINT, on_int)
print("ready %d" % rank, flush=True)
if mode in ("fail", "ignore-term") and rank == 1:
    time.sleep(0.3)
    sys.exit(3)
if mode == "selfkill" and rank == 1:
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(60)
"""


# -- output and environment -------------------------------------------------------------

@pytest.mark.parametrize("np_", [2, 3])
def test_output_prefixed_and_success(tmp_path, np_):
    script = _script(tmp_path, "hello.py", """
        import os, sys
        r = os.environ["HOROVOD_RANK"]
        print("hello from", r)
        print("second line", r)
        print("to stderr", r, file=sys.stderr)
        sys.stdout.write("unterminated " + r)
    """)
    proc = run_launcher(["-np", str(np_), PY, script])
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 0, err
    expected_out = set()
    expected_err = set()
    for r in range(np_):
        expected_out |= {"[%d]<stdout>:hello from %d" % (r, r),
                         "[%d]<stdout>:second line %d" % (r, r),
                         "[%d]<stdout>:unterminated %d" % (r, r)}
        expected_err.add("[%d]<stderr>:to stderr %d" % (r, r))
    assert sorted(out.splitlines()) == sorted(expected_out)
    assert sorted(err.splitlines()) == sorted(expected_err)
    # each rank's lines keep their order
    for r in range(np_):
        mine = [l for l in out.splitlines() if l.startswith("[%d]" % r)]
        assert mine == ["[%d]<stdout>:hello from %d" % (r, r),
                        "[%d]<stdout>:second line %d" % (r, r),
                        "[%d]<stdout>:unterminated %d" % (r, r)]


def test_rank_environment(tmp_path):
    script = _script(tmp_path, "env.py", """
        import json, os
        print(json.dumps({k: v for k, v in os.environ.items()
                          if k.startswith("HOROVOD_") or k == "PYTHONUNBUFFERED"}))
    """)
    proc = run_launcher(["-np", "3", "--cycle-time-ms", "7", "--fusion-threshold-mb", "2",
                         "--no-stall-check", "--start-timeout", "33",
                         "--prefix-output-with-timestamp", PY, script])
    assert proc.returncode == 0, proc.stderr
    import json
    envs = {}
    stamped = re.compile(r"^\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\[")
    for line in proc.stdout.decode().splitlines():
        assert stamped.match(line), line  # --prefix-output-with-timestamp
        line = line[line.index("["):]
        head, _, body = line.partition(":")
        envs[int(head[1:head.index("]")])] = json.loads(body)
    assert sorted(envs) == [0, 1, 2]
    ports = {e["HOROVOD_GLOO_RENDEZVOUS_PORT"] for e in envs.values()}
    assert len(ports) == 1 and int(ports.pop()) > 0
    for r, e in envs.items():
        assert e["HOROVOD_RANK"] == str(r) and e["HOROVOD_SIZE"] == "3"
        assert e["HOROVOD_LOCAL_RANK"] == str(r) and e["HOROVOD_LOCAL_SIZE"] == "3"
        assert e["HOROVOD_CROSS_RANK"] == "0" and e["HOROVOD_CROSS_SIZE"] == "1"
        assert e["HOROVOD_HOSTNAME"] == "127.0.0.1"
        assert e["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "127.0.0.1"
        assert e["HOROVOD_CONTROLLER"] == "gloo"
        assert e["HOROVOD_CYCLE_TIME"] == "7"
        assert e["HOROVOD_FUSION_THRESHOLD"] == str(2 * 1024 * 1024)
        assert e["HOROVOD_STALL_CHECK_DISABLE"] == "1"
        assert e["HOROVOD_START_TIMEOUT"] == "33"  # the start-up, not every collective
        assert "HOROVOD_GLOO_TIMEOUT_SECONDS" not in e
        assert e["PYTHONUNBUFFERED"] == "1"


def test_ranks_meet_through_rendezvous(tmp_path):
    script = _script(tmp_path, "meet.py", """
        import os, time
        from tf_hvd.job.rendezvous import RendezvousClient
        rank, size = int(os.environ["HOROVOD_RANK"]), int(os.environ["HOROVOD_SIZE"])
        conn = RendezvousClient.from_env(os.environ, timeout=10)
        assert conn.put("meet/rank%d" % rank, bytes([rank]) * 10 + b"\\x00end") == 200
        got = {}
        deadline = time.time() + 20
        while len(got) < size and time.time() < deadline:
            for p in range(size):
                body = conn.get("meet/rank%d" % p)
                if body is not None:
                    got[p] = body
            time.sleep(0.02)
        assert all(got[p] == bytes([p]) * 10 + b"\\x00end" for p in range(size)), got
        print("met", sorted(got))
    """)
    proc = run_launcher(["-np", "3", PY, script])
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.decode().splitlines()) == [
        "[%d]<stdout>:met [0, 1, 2]" % r for r in range(3)]


def test_output_filename(tmp_path):
    script = _script(tmp_path, "o.py", """
        import os, sys
        print("out", os.environ["HOROVOD_RANK"])
        print("err", os.environ["HOROVOD_RANK"], file=sys.stderr)
    """)
    outdir = tmp_path / "logs"
    proc = run_launcher(["-np", "2", "--output-filename", str(outdir), PY, script])
    assert proc.returncode == 0, proc.stderr
    for r in range(2):
        assert (outdir / ("rank.%d" % r) / "stdout").read_text() == "out %d\n" % r
        assert (outdir / ("rank.%d" % r) / "stderr").read_text() == "err %d\n" % r
    assert "[1]<stdout>:out 1" in proc.stdout.decode()


def test_large_output_does_not_block(tmp_path):
    script = _script(tmp_path, "big.py", """
        import sys
        for i in range(20000):
            sys.stdout.write("line %d %s\\n" % (i, "x" * 50))
            sys.stderr.write("err %d\\n" % i)
    """)
    proc = run_launcher(["-np", "2", PY, script], timeout=120)
    assert proc.returncode == 0
    assert len(proc.stdout.splitlines()) == 40000
    assert len(proc.stderr.splitlines()) == 40000


def test_python_command_word_and_relative_script(tmp_path):
    _script(tmp_path, "rel.py", "print('relative ok')\n")
    proc = run_launcher(["-np", "1", "python3", "rel.py"], cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().strip() == "[0]<stdout>:relative ok"


# -- failures -----------------------------------------------------------------------------

@pytest.mark.parametrize("np_", [2, 3])
def test_failure_propagates(tmp_path, np_):
    script = _script(tmp_path, "worker.py", WORKER)
    piddir = tmp_path / "pids"
    piddir.mkdir()
    start = time.monotonic()
    proc = run_launcher(["-np", str(np_), PY, script, str(piddir), "fail"], timeout=60)
    elapsed = time.monotonic() - start
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert elapsed < 15, elapsed
    mine = [l for l in err.splitlines() if l.startswith("tfhvdrun:")]
    assert len(mine) == 1, err
    assert "rank 1" in mine[0] and "exited with code 3" in mine[0]
    pids = _pids(str(piddir))
    assert len(pids) == 2 * np_
    _assert_all_gone(pids)


def test_rank_ignoring_sigterm_is_killed(tmp_path):
    script = _script(tmp_path, "worker.py", WORKER)
    piddir = tmp_path / "pids"
    piddir.mkdir()
    start = time.monotonic()
    proc = run_launcher(["-np", "2", PY, script, str(piddir), "ignore-term"], timeout=60)
    elapsed = time.monotonic() - start
    assert proc.returncode == 3, proc.stderr
    assert elapsed < 20, elapsed
    _assert_all_gone(_pids(str(piddir)))


def test_rank_killed_by_signal(tmp_path):
    script = _script(tmp_path, "worker.py", WORKER)
    piddir = tmp_path / "pids"
    piddir.mkdir()
    proc = run_launcher(["-np", "2", PY, script, str(piddir), "selfkill"], timeout=60)
    err = proc.stderr.decode()
    assert proc.returncode == 128 + 9, err
    assert re.search(r"rank 1 \(on localhost, pid \d+\) was killed by signal 9 \(SIGKILL\)",
                     err), err
    _assert_all_gone(_pids(str(piddir)))


def test_all_failing_reports_one(tmp_path):
    script = _script(tmp_path, "bad.py", """
        import os, sys, time
        time.sleep(0.2 * int(os.environ["HOROVOD_RANK"]))
        sys.exit(5)
    """)
    proc = run_launcher(["-np", "3", PY, script])
    assert proc.returncode == 5
    mine = [l for l in proc.stderr.decode().splitlines() if l.startswith("tfhvdrun:")]
    assert len(mine) == 1 and "rank 0" in mine[0], mine


# -- signals -----------------------------------------------------------------------------

def test_sigint_is_forwarded_to_every_rank(tmp_path):
    script = _script(tmp_path, "worker.py", WORKER)
    piddir = tmp_path / "pids"
    piddir.mkdir()
    launcher = LiveLauncher(["-np", "3", PY, script, str(piddir), "catch-int"])
    launcher.wait_for_lines(r"<stdout>:ready \d", 3)
    launcher.proc.send_signal(signal.SIGINT)
    rc = launcher.wait(30)
    assert rc == 130, launcher.stderr
    got = sorted(l for l in launcher.stdout if "got SIGINT" in l)
    assert got == ["[%d]<stdout>:rank %d got SIGINT" % (r, r) for r in range(3)]
    assert any("received SIGINT" in l for l in launcher.stderr)
    _assert_all_gone(_pids(str(piddir)))


def test_sigterm_stops_everything(tmp_path):
    script = _script(tmp_path, "worker.py", WORKER)
    piddir = tmp_path / "pids"
    piddir.mkdir()
    launcher = LiveLauncher(["-np", "2", PY, script, str(piddir)])
    launcher.wait_for_lines(r"<stdout>:ready \d", 2)
    start = time.monotonic()
    launcher.proc.send_signal(signal.SIGTERM)
    rc = launcher.wait(30)
    assert rc == 128 + 15
    assert time.monotonic() - start < 10
    _assert_all_gone(_pids(str(piddir)))


# -- import weight -------------------------------------------------------------------------

def test_runner_does_not_import_tensorflow():
    code = ("import sys; import tf_hvd.runner.launch, tf_hvd.runner.modes.gloo_run, "
            "tf_hvd.runner.modes.mpi_run, tf_hvd.job.rendezvous; "
            "print('tensorflow' in sys.modules)")
    baseline = run([PY, "-c", "import sys, tf_hvd; print('tensorflow' in sys.modules)"], 120,
                   env=_env(), merge_stderr=False).check_finished()
    if baseline.stdout.strip() == b"True":
        pytest.skip("tf_hvd/__init__.py itself imports TensorFlow")
    proc = run([PY, "-c", code], 60, env=_env(), merge_stderr=False).check_finished()
    assert proc.stdout.strip() == b"False", proc.describe()


def test_rank_wrapper_runs_without_the_package(tmp_path):
    """The MPI wrapper is started by path and must not need (or import) tf_hvd."""
    env = _env({"PMI_RANK": "4"})
    env.pop("PYTHONPATH")
    probe = _script(tmp_path, "probe.py", "import sys; print('ok', 'tf_hvd' in sys.modules)\n")
    proc = run([PY, mpi.WRAPPER_PATH, "--", PY, probe], 60, env=env, cwd=str(tmp_path),
               merge_stderr=False).check_finished()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"[4]<stdout>:ok False\n"


# -- MPI mode ------------------------------------------------------------------------------

needs_mpiexec = pytest.mark.skipif(mpi.find_mpiexec() is None, reason="no mpiexec")


@needs_mpiexec
def test_mpi_mode_prints_pmi_rank(tmp_path):
    script = _script(tmp_path, "pmi.py", """
        import os, sys
        print("pmi", os.environ["PMI_RANK"], os.environ["PMI_SIZE"],
              os.environ["HOROVOD_CONTROLLER"], os.environ.get("HOROVOD_CYCLE_TIME"))
        print("e", os.environ["PMI_RANK"], file=sys.stderr)
    """)
    outdir = tmp_path / "logs"
    proc = run_launcher(["-np", "3", "--mpi", "--cycle-time-ms", "3",
                         "--output-filename", str(outdir), PY, script], timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = sorted(l for l in proc.stdout.decode().splitlines() if "<stdout>" in l)
    assert out == ["[%d]<stdout>:pmi %d 3 mpi 3" % (r, r) for r in range(3)]
    err = sorted(l for l in proc.stderr.decode().splitlines() if "<stderr>" in l)
    assert err == ["[%d]<stderr>:e %d" % (r, r) for r in range(3)]
    assert (outdir / "rank.2" / "stdout").read_text() == "pmi 2 3 mpi 3\n"


@needs_mpiexec
def test_mpi_mode_failure_propagates(tmp_path):
    script = _script(tmp_path, "worker.py", WORKER)
    piddir = tmp_path / "pids"
    piddir.mkdir()
    start = time.monotonic()
    proc = run_launcher(["-np", "2", "--mpi", PY, script, str(piddir), "fail"], timeout=90)
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert time.monotonic() - start < 20
    assert "tfhvdrun: rank 1 exited with code 3" in err
    _assert_all_gone(_pids(str(piddir)))


@needs_mpiexec
def test_mpi_mode_sigint(tmp_path):
    script = _script(tmp_path, "worker.py", WORKER)
    piddir = tmp_path / "pids"
    piddir.mkdir()
    launcher = LiveLauncher(["-np", "2", "--mpi", PY, script, str(piddir)])
    launcher.wait_for_lines(r"<stdout>:ready \d", 2, timeout=60)
    launcher.proc.send_signal(signal.SIGINT)
    rc = launcher.wait(60)
    assert rc == 130
    _assert_all_gone(_pids(str(piddir)))


def test_mpi_mode_without_mpiexec(tmp_path):
    """A python whose directory has no mpiexec, and a PATH without one: exit 2, one line."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(os.path.realpath(PY), str(bindir / "python3"))
    env = _env({"PATH": str(bindir) + os.pathsep + "/usr/bin:/bin"})
    if any(os.path.exists(os.path.join(d, "mpiexec")) for d in ("/usr/bin", "/bin")):
        pytest.skip("a system mpiexec is installed")
    proc = run([str(bindir / "python3"), "-m", "tf_hvd.runner", "-np", "2",
                "--mpi", "python3", "-c", "pass"], 60, env=env, cwd=REPO,
               merge_stderr=False).check_finished()
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert err.count("\n") == 1 and err.startswith("tfhvdrun: error: --mpi: mpiexec not found")


# -- odds and ends ---------------------------------------------------------------------------

def test_ranks_die_when_launcher_is_killed(tmp_path):
    """PR_SET_PDEATHSIG: a SIGKILLed launcher still takes its ranks down."""
    script = _script(tmp_path, "worker.py", WORKER)
    piddir = tmp_path / "pids"
    piddir.mkdir()
    # grace: the ranks get 10 s to go by themselves before the runner counts survivors
    launcher = LiveLauncher(["-np", "2", PY, script, str(piddir)], grace=10)
    launcher.wait_for_lines(r"<stdout>:ready \d", 2)
    launcher.proc.kill()
    launcher.wait(30)
    rank_pids = []
    for r in range(2):
        with open(str(piddir / ("pid.%d" % r))) as f:
            rank_pids.append(int(f.read()))
    # The ranks' own children are beyond PDEATHSIG's reach (the runner stopped them).
    assert not set(rank_pids) & set(launcher.result.survivors), launcher.result.describe()
    _assert_all_gone(rank_pids)


def test_program_that_cannot_be_executed(tmp_path):
    prog = tmp_path / "notexec.sh"
    prog.write_text("#!/bin/sh\necho hi\n")
    prog.chmod(0o644)
    proc = run_launcher(["-np", "2", str(prog)])
    err = proc.stderr.decode()
    assert proc.returncode == 126, err
    assert "cannot start rank 0" in err


@pytest.mark.parametrize("extra", [[], ["--max-restarts", "2"]])
def test_ranks_not_started_within_the_start_timeout(tmp_path, extra):
    """A launch that cannot start its ranks in time (a slow ssh start on many hosts, here a
    timeout of a microsecond) ends with the launcher's message and exit code 1, without
    a restart (the next try would meet the same start) and without a traceback."""
    script = _script(tmp_path, "worker.py", WORKER)
    piddir = tmp_path / "pids"
    piddir.mkdir()
    proc = run_launcher(extra + ["-np", "2", PY, script, str(piddir), "ok"],
                        env=_env({"HOROVOD_START_TIMEOUT": "0.000001"}), timeout=30)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert err.splitlines() == [
        "tfhvdrun: could not start rank(s) [0,1] within the start-up timeout of 1e-06 s "
        "(--start-timeout / HOROVOD_START_TIMEOUT)"], err
    assert _pids(str(piddir)) == []


def test_verbose_describes_the_plan(tmp_path):
    script = _script(tmp_path, "q.py", "pass\n")
    proc = run_launcher(["-np", "2", "--verbose", PY, script])
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert "rendezvous server on 127.0.0.1:" in err
    assert "rank 1 on localhost (local 1/2, cross 0/1)" in err


def test_hostfile_with_localhost(tmp_path):
    hf = tmp_path / "hosts"
    hf.write_text("localhost slots=3\n")
    script = _script(tmp_path, "h.py", """
        import os
        print(os.environ["HOROVOD_LOCAL_SIZE"], os.environ["HOROVOD_SIZE"])
    """)
    proc = run_launcher(["-np", "2", "--hostfile", str(hf), PY, script])
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.decode().splitlines()) == ["[0]<stdout>:2 2", "[1]<stdout>:2 2"]
