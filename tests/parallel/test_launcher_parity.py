"""horovodrun parity of tfhvdrun, end to end (no TensorFlow): an LSF job's hosts and
slots, --jsrun through a stand-in jsrun, and --output-filename's padded rank folders.

How LSF is tested without LSF: the launcher gets the environment an LSF job's batch
script sees (LSB_JOBID, LSB_MCPU_HOSTS naming this machine) and no -np or -H. jsrun is
replaced by a script on PATH that records its command line and the rank file, then
starts the ranks it names with this venv's mpiexec (so the ranks really run under MPI,
as jsrun's would under Spectrum MPI).
"""

import json
import os
import socket
import sys

import pytest

from jobrunner import clean_env, mpiexec_path, run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCHER = [sys.executable, "-m", "tf_hvd.runner"]
PRINT_RANK = ("import os; print('rank', os.environ.get('HOROVOD_RANK') or "
              "os.environ.get('PMI_RANK'), 'of', os.environ.get('HOROVOD_SIZE') or "
              "os.environ.get('PMI_SIZE'), os.environ.get('HOROVOD_CONTROLLER'))")


def _lsf_env(extra=None):
    env = clean_env({"LSB_JOBID": "4242", "LSB_MCPU_HOSTS": "%s 3" % socket.gethostname()})
    env.update(extra or {})
    return env


def test_an_lsf_job_gives_np_and_hosts():
    res = run(LAUNCHER + [sys.executable, "-c", PRINT_RANK], 120, env=_lsf_env(),
              cwd=REPO).check_finished()
    assert res.returncode == 0, res.describe()
    lines = sorted(l.split(":", 1)[1] for l in res.output.splitlines() if "<stdout>:" in l)
    assert lines == ["rank 0 of 3 gloo", "rank 1 of 3 gloo", "rank 2 of 3 gloo"]


FAKE_JSRUN = r'''#!%(python)s
import json, os, sys
argv = sys.argv[1:]
i = argv.index("--erf_input")
with open(argv[i + 1]) as f:
    erf = f.read()
rest = argv[i + 2:]
if rest[:1] == ["--smpiargs"]:
    rest = rest[2:]
with open(os.environ["FAKE_JSRUN_LOG"], "w") as f:
    json.dump({"argv": argv, "erf": erf}, f)
ranks = sum(1 for line in erf.splitlines() if line.startswith("rank:"))
os.execv(%(mpiexec)r, [%(mpiexec)r, "-n", str(ranks)] + rest)
'''

MPI_RANK = ("from mpi4py import MPI; c = MPI.COMM_WORLD; "
            "print('rank', c.Get_rank(), 'of', c.Get_size(), 'sum', c.allreduce(c.Get_rank()),"
            " __import__('os').environ['HOROVOD_CONTROLLER'])")


def test_jsrun_starts_the_lsf_jobs_ranks_under_mpi(tmp_path):
    pytest.importorskip("mpi4py")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    jsrun = bin_dir / "jsrun"
    jsrun.write_text(FAKE_JSRUN % {"python": sys.executable, "mpiexec": mpiexec_path()})
    jsrun.chmod(0o755)
    log = tmp_path / "jsrun.json"
    env = _lsf_env({"PATH": "%s:%s" % (bin_dir, os.environ["PATH"]),
                    "FAKE_JSRUN_LOG": str(log)})
    res = run(LAUNCHER + ["--jsrun", "--mpi-args=-x A", sys.executable, "-c", MPI_RANK],
              180, env=env, cwd=REPO).check_finished()
    assert res.returncode == 0, res.describe()
    lines = sorted(l.split(":", 1)[1] for l in res.output.splitlines() if "<stdout>:" in l)
    assert lines == ["rank %d of 3 sum 3 mpi" % r for r in range(3)]
    record = json.loads(log.read_text())
    host = socket.gethostname()
    assert record["erf"].splitlines()[3:] == [
        "rank: %d: { hostname: %s; cpu: {%d-%d} ; gpu: * ; mem: * }" % (r, host, r, r)
        for r in range(3)]
    assert record["argv"][0] == "--erf_input" and record["argv"][2:4] == ["--smpiargs",
                                                                         "-x A"]


def test_jsrun_missing_is_named():
    env = _lsf_env({"PATH": os.path.dirname(sys.executable) + ":/bin:/usr/bin"})
    res = run(LAUNCHER + ["--jsrun", sys.executable, "-c", "pass"], 60, env=env,
              cwd=REPO, merge_stderr=False).check_finished()
    assert res.returncode == 2
    assert res.stderr.decode().strip() == (
        "tfhvdrun: error: --jsrun: jsrun not found on PATH (it comes with IBM Spectrum MPI "
        "on LSF clusters; elsewhere use --mpi or --gloo)")


def test_output_folders_are_padded_as_horovodrun_names_them(tmp_path):
    out = tmp_path / "out"
    res = run(LAUNCHER + ["-np", "11", "--output-filename", str(out), sys.executable, "-c",
                          PRINT_RANK], 180, env=clean_env(), cwd=REPO).check_finished()
    assert res.returncode == 0, res.describe()
    assert sorted(os.listdir(out)) == ["rank.%02d" % r for r in range(11)]
    assert (out / "rank.07" / "stdout").read_text() == "rank 7 of 11 gloo\n"
