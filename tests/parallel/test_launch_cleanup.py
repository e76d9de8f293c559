"""A failed launch ends every process it started, locally and on every host; and
--network-interfaces reaches hydra, so its proxies call back on that interface.

Local (both transports): rank 0 starts a helper in a session of its own (setsid: out of
reach of the rank's process group), rank 1 fails; once tfhvdrun has exited, no process
of the job may be left (psutil, by a marker in the command line).

On the namespace cluster (tools/clusters/netns_cluster.py, skipped without it), the reported
case: the launcher's host is given by a name that resolves to the wrong address on the
other host (127.0.1.1, as Debian's /etc/hosts does), so hydra's proxy there cannot call
back ("unable to connect ... Connection refused"): the launch fails, in bounded time,
and leaves nothing on either host; with --network-interfaces eth0 (hydra's -iface) the
same job runs.
"""

import os
import time
import uuid

import psutil
import pytest

from jobrunner import PYTHON, REPO, clean_env, job_env, run
from namespace_hosts import leftovers, netns_cluster

RANK = r'''
import os, subprocess, sys, time
rank = int(os.environ.get("HOROVOD_RANK") or os.environ.get("PMI_RANK"))
if rank == 0:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", sys.argv[1]],
                     start_new_session=True, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    print("helper started", flush=True)
    time.sleep(120)
time.sleep(2)
sys.exit(3)
'''


def _with_marker(marker):
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if marker in " ".join(p.info["cmdline"] or []):
            found.append((p.pid, " ".join(p.info["cmdline"])))
    return found


@pytest.mark.parametrize("transport", ["gloo", "mpi"])
def test_failed_job_leaves_no_process(transport):
    marker = "tfhvd-leftover-%s" % uuid.uuid4().hex
    cmd = [PYTHON, "-m", "tf_hvd.runner", "-np", "2"] + (
        ["--mpi"] if transport == "mpi" else []) + [PYTHON, "-c", RANK, marker]
    try:
        res = run(cmd, 120, env=clean_env(), cwd=REPO).check_finished()
        assert res.returncode != 0 and "helper started" in res.output, res.describe()
        if transport == "gloo":  # the launcher ended it (under MPI, the rank's wrapper)
            assert "tfhvdrun: ended 1 process(es) the failed job left running:" in \
                res.output, res.describe()
        assert _with_marker(marker) == [], res.describe()
    finally:
        for pid, _ in _with_marker(marker):
            psutil.Process(pid).kill()


def test_mpi_launch_with_a_name_the_workers_resolve_wrongly(cluster):
    for host, address in (("h1", cluster.address("h1")), ("h2", "127.0.1.1")):
        with open(os.path.join(netns_cluster.NETNS_ETC, cluster.netns(host), "hosts"),
                  "a") as f:
            f.write("%s ghost\n" % address)
    base = [PYTHON, "-m", "tf_hvd.runner", "-np", "2", "--mpi", "-H", "ghost:1,h2:1",
            "-p", "2222", "-i", cluster.client_key, "--start-timeout", "30"]
    program = [PYTHON, "-c", "import os; print('rank', os.environ['PMI_RANK'], 'ran')"]
    started = time.monotonic()
    res = run(cluster.exec_argv("h1", base + program), 90, env=job_env(), cwd=REPO)
    assert res.returncode not in (0, None), res.describe()
    assert time.monotonic() - started < 60, res.describe()
    assert 'unable to connect from "h2" to "ghost" (Connection refused)' in res.output, \
        res.describe()
    assert not res.survivors, res.describe()
    left = leftovers(cluster)
    deadline = time.monotonic() + 10
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = leftovers(cluster)
    assert not left, "left on the hosts: %s\n%s" % (left, res.describe())
    res = run(cluster.exec_argv("h1", base + ["--network-interfaces", "eth0"] + program), 90,
              env=job_env(), cwd=REPO)
    assert res.ok, res.describe()
    assert sorted(l for l in res.output.splitlines() if "<stdout>" in l) == [
        "[0]<stdout>:rank 0 ran", "[1]<stdout>:rank 1 ran"], res.describe()
    assert not leftovers(cluster)


@pytest.mark.parametrize("transport", ["gloo", "mpi"])
def test_failed_job_leaves_no_process_on_either_host(cluster, transport):
    # Every rank starts a setsid'd helper; rank 1 (on h2) fails.
    marker = "tfhvd-leftover-%s" % uuid.uuid4().hex
    every_rank = RANK.replace("if rank == 0:", "if True:").replace(
        "    time.sleep(120)\n", "    time.sleep(120 if rank == 0 else 0)\n")
    cmd = [PYTHON, "-m", "tf_hvd.runner", "-np", "2", "-H", "h1:1,h2:1", "-p", "2222",
           "-i", cluster.client_key] + (["--mpi"] if transport == "mpi" else []) + \
        [PYTHON, "-c", every_rank, marker]
    try:
        res = run(cluster.exec_argv("h1", cmd), 120, env=job_env(), cwd=REPO)
        assert res.returncode not in (0, None), res.describe()
        assert res.output.count("helper started") == 2, res.describe()
        left = _with_marker(marker)
        deadline = time.monotonic() + 10
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = _with_marker(marker)
        assert left == [], res.describe()
        assert not leftovers(cluster), leftovers(cluster)
    finally:
        for pid, _ in _with_marker(marker):
            psutil.Process(pid).kill()
