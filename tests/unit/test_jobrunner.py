"""tests/jobrunner.py itself: output, exit codes, the hard time limit and that no
process of a job (not even one that left its parent) is left running."""
import os
import sys
import time

from jobrunner import Job, alive, run

PY = sys.executable

# Starts a child that starts a grandchild; both record their pids, then everyone sleeps.
TREE = r"""
import os, subprocess, sys, time
d = sys.argv[1]
grand = "import os, sys, time; open(os.path.join(sys.argv[1], 'grand'), 'w').write(str(os.getpid())); time.sleep(120)"
child = "import os, subprocess, sys, time; open(os.path.join(sys.argv[1], 'child'), 'w').write(str(os.getpid())); subprocess.Popen([sys.executable, '-c', %r, sys.argv[1]]); time.sleep(120)" % grand
subprocess.Popen([sys.executable, "-c", child, d])
print("started", flush=True)
while len(os.listdir(d)) < 2:
    time.sleep(0.05)
print("tree ready", flush=True)
if sys.argv[2] == "exit":
    sys.exit(7)
time.sleep(120)
"""


def _pids(d):
    return [int(open(os.path.join(d, n)).read()) for n in ("child", "grand")]


def test_output_and_exit_code():
    res = run([PY, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(4)"],
              timeout=60)
    assert (res.returncode, res.timed_out, res.ok) == (4, False, False)
    assert sorted(res.output.splitlines()) == ["err", "out"]
    apart = run([PY, "-c", "import sys; print('out'); print('err', file=sys.stderr)"],
                timeout=60, merge_stderr=False)
    assert (apart.stdout, apart.stderr, apart.ok) == (b"out\n", b"err\n", True)
    fed = run([PY, "-c", "import sys; print(sys.stdin.read().upper())"], timeout=60,
              input=b"abc")
    assert fed.output == "ABC\n"


def test_time_limit_kills_the_whole_tree(tmp_path):
    start = time.monotonic()
    res = run([PY, "-c", TREE, str(tmp_path), "sleep"], timeout=8, log_path=str(tmp_path / "log"))
    assert res.timed_out and res.returncode is None
    assert time.monotonic() - start < 8 + 10
    assert "tree ready" in res.output, res.describe()
    assert (tmp_path / "log").read_text() == res.output
    assert not any(alive(p) for p in _pids(str(tmp_path)))
    assert "killed at its time limit of 8 s" in res.describe()


def test_processes_that_outlive_the_command_are_reported_and_stopped(tmp_path):
    res = run([PY, "-c", TREE, str(tmp_path), "exit"], timeout=60, grace=1)
    assert res.returncode == 7 and not res.timed_out
    assert sorted(res.survivors) == sorted(_pids(str(tmp_path)))
    assert not any(alive(p) for p in _pids(str(tmp_path)))


def test_leaving_the_context_stops_a_running_job(tmp_path):
    lines = []
    with Job([PY, "-c", TREE, str(tmp_path), "sleep"],
             on_line=lambda stream, line: lines.append(line)) as job:
        deadline = time.monotonic() + 60
        while "tree ready" not in lines and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "tree ready" in lines
        time.sleep(0.5)  # the tree is recorded every 0.25 s
    assert not job.result.timed_out and job.result.returncode is not None
    assert not any(alive(p) for p in _pids(str(tmp_path)) + [job.pid])
