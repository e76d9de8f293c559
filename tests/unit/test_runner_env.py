"""What each rank is started with: HOROVOD_* variables, ssh and mpiexec command lines."""

import os
import shlex
import stat
import sys

import pytest

from tf_hvd.job import network, rank_env
from tf_hvd.runner.command_line import parser as cli
from tf_hvd.runner.command_line import launch_config
from tf_hvd.runner.modes import mpiexec as mpi
from tf_hvd.runner.processes import ssh
from tf_hvd.runner.command_line.knob_flags import knob_env
from tf_hvd.runner.command_line.plan import Plan


def _plan(argv, local_hosts=("localhost",)):
    # environ: TensorFlow's start-up lines shown, so that only tf_hvd's variables are set
    return Plan(launch_config.freeze(cli.parse(argv), {"TF_CPP_MIN_LOG_LEVEL": "0"}),
                is_local=lambda h: h in local_hosts, check_command=None)


# -- knobs ----------------------------------------------------------------------------

def test_no_knobs_by_default():
    assert knob_env(cli.parse(["-np", "1", "x"])) == {}


def test_knob_env_mapping():
    a = cli.parse(["-np", "1", "--fusion-threshold-mb", "32", "--cycle-time-ms", "2.5",
                   "--cache-capacity", "512", "--timeline-filename", "/tmp/t.json",
                   "--timeline-mark-cycles", "--log-level", "warning", "--no-stall-check",
                   "--stall-check-warning-time-seconds", "30",
                   "--stall-check-shutdown-time-seconds", "90.5", "--start-timeout", "45",
                   "--network-interface", "eth0", "x"])
    assert knob_env(a) == {
        "HOROVOD_FUSION_THRESHOLD": str(32 * 1024 * 1024),
        "HOROVOD_CYCLE_TIME": "2.5",
        "HOROVOD_CACHE_CAPACITY": "512",
        "HOROVOD_TIMELINE": "/tmp/t.json",
        "HOROVOD_TIMELINE_MARK_CYCLES": "1",
        "HOROVOD_LOG_LEVEL": "WARNING",
        "HOROVOD_STALL_CHECK_DISABLE": "1",
        "HOROVOD_STALL_CHECK_TIME_SECONDS": "30",
        "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "90.5",
        "HOROVOD_START_TIMEOUT": "45",
        "HOROVOD_GLOO_IFACE": "eth0",
        "NCCL_SOCKET_IFNAME": "eth0",
    }


def test_knob_env_fractional_mb_and_disable_cache():
    a = cli.parse(["-np", "1", "--fusion-threshold-mb", "0.5", "--cycle-time-ms", "1",
                   "--cache-capacity", "9", "--disable-cache", "x"])
    env = knob_env(a)
    assert env["HOROVOD_FUSION_THRESHOLD"] == str(512 * 1024)
    assert env["HOROVOD_CYCLE_TIME"] == "1"
    # --disable-cache is the launcher's check cache (horovodrun), not the response cache
    assert env["HOROVOD_CACHE_CAPACITY"] == "9"


def test_knob_env_horovodrun_library_and_logging_flags():
    a = cli.parse(["-np", "1", "--network-interfaces", "eth0,eth1", "--network-interface",
                   "eth2", "--tcp", "--gloo-timeout-seconds", "40", "--thread-affinity", "2",
                   "--mpi-threads-disable", "--log-without-timestamp",
                   "--no-timeline-mark-cycles", "x"])
    assert a.nics == ["eth0", "eth1", "eth2"] and a.network_interface == "eth0"
    assert knob_env(a) == {
        "HOROVOD_GLOO_IFACE": "eth0", "NCCL_SOCKET_IFNAME": "eth0,eth1,eth2",
        "NCCL_IB_DISABLE": "1", "HOROVOD_GLOO_TIMEOUT_SECONDS": "40",
        "HOROVOD_THREAD_AFFINITY": "2", "HOROVOD_MPI_THREADS_DISABLE": "1",
        "HOROVOD_LOG_HIDE_TIME": "1", "HOROVOD_TIMELINE_MARK_CYCLES": "0"}
    a = cli.parse(["-np", "1", "--log-with-timestamp", "--timeline-mark-cycles", "x"])
    assert knob_env(a) == {"HOROVOD_LOG_HIDE_TIME": "0",
                                    "HOROVOD_TIMELINE_MARK_CYCLES": "1"}


def test_mpiexec_command_mpi_and_binding_args():
    argv = mpi.mpiexec_command("mpiexec", mpi.HYDRA, 2, None, {}, ["p"], python="py",
                               mpi_args="-genv A 'b c'", binding_args="-bind-to core",
                               prefix_timestamp=True)
    assert argv == ["mpiexec", "-n", "2", "-bind-to", "core", "-genv", "A", "b c", "py",
                    mpi.WRAPPER_PATH, "--prefix-timestamp", "--", "p"]


# -- Gloo rank environment ---------------------------------------------------------------

def test_local_gloo_envs():
    plan = _plan(["-np", "3", "--cycle-time-ms", "5", "python", "t.py"])
    assert plan.all_local and plan.launcher_address == "127.0.0.1"
    assert plan.rendezvous_bind_address == "127.0.0.1"
    envs = [e.to_environ() for e in plan.rank_envs("127.0.0.1", 4242)]
    for r, env in enumerate(envs):
        assert env == {
            "HOROVOD_RANK": str(r), "HOROVOD_SIZE": "3",
            "HOROVOD_LOCAL_RANK": str(r), "HOROVOD_LOCAL_SIZE": "3",
            "HOROVOD_CROSS_RANK": "0", "HOROVOD_CROSS_SIZE": "1",
            "HOROVOD_HOSTNAME": "127.0.0.1",
            "HOROVOD_SLOT_HOSTNAME": "localhost",  # named in other ranks' errors
            "HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
            "HOROVOD_GLOO_RENDEZVOUS_PORT": "4242",
            "HOROVOD_CONTROLLER": "gloo",
            "HOROVOD_CYCLE_TIME": "5",
        }


def test_multi_host_gloo_envs(monkeypatch):
    monkeypatch.setattr(network, "address_towards", lambda host: "10.1.1.1")
    plan = _plan(["-np", "5", "-H", "localhost:2,node2:2,node3:2", "python", "t.py"])
    assert not plan.all_local and plan.any_local
    assert plan.launcher_address == "10.1.1.1"
    assert plan.rendezvous_bind_address == "10.1.1.1"  # only the address the ranks use
    envs = [e.to_environ() for e in plan.rank_envs("10.1.1.1", 5555)]
    table = [(e["HOROVOD_RANK"], e["HOROVOD_HOSTNAME"], e["HOROVOD_LOCAL_RANK"],
              e["HOROVOD_LOCAL_SIZE"], e["HOROVOD_CROSS_RANK"], e["HOROVOD_CROSS_SIZE"])
             for e in envs]
    assert table == [
        ("0", "10.1.1.1", "0", "2", "0", "3"),
        ("1", "10.1.1.1", "1", "2", "0", "2"),
        ("2", "node2", "0", "2", "1", "3"),
        ("3", "node2", "1", "2", "1", "2"),
        ("4", "node3", "0", "1", "2", "3"),
    ]
    assert all(e["HOROVOD_SIZE"] == "5" for e in envs)
    assert all(e["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "10.1.1.1" for e in envs)
    assert all(e["HOROVOD_GLOO_RENDEZVOUS_PORT"] == "5555" for e in envs)
    assert plan.mpi_hosts_arg() == "localhost:2,node2:2,node3:1"


def test_hostfile_plan(tmp_path, monkeypatch):
    monkeypatch.setattr(network, "address_towards", lambda host: "10.0.0.9")
    hf = tmp_path / "hosts"
    hf.write_text("a slots=1\nb slots=3\n")
    plan = _plan(["-np", "4", "--hostfile", str(hf), "x"], local_hosts=())
    assert not plan.any_local
    envs = [e.to_environ() for e in plan.rank_envs("10.0.0.9", 1)]
    assert [e["HOROVOD_HOSTNAME"] for e in envs] == ["a", "b", "b", "b"]
    assert [e["HOROVOD_LOCAL_RANK"] for e in envs] == ["0", "0", "1", "2"]
    assert [e["HOROVOD_CROSS_RANK"] for e in envs] == ["0", "1", "0", "0"]
    assert [e["HOROVOD_CROSS_SIZE"] for e in envs] == ["2", "2", "1", "1"]


def test_not_enough_slots():
    with pytest.raises(cli.UsageError, match="more than the 4 slot"):
        _plan(["-np", "5", "-H", "a:2,b:2", "x"])


def test_process_env_keeps_base_and_sets_unbuffered():
    env = rank_env.process_env({"PATH": "/bin", "KEEP": "1"}, {"HOROVOD_RANK": "3"})
    assert env == {"PATH": "/bin", "KEEP": "1", "HOROVOD_RANK": "3", "PYTHONUNBUFFERED": "1"}
    env = rank_env.process_env({"PYTHONUNBUFFERED": ""}, {})
    assert env["PYTHONUNBUFFERED"] == ""


def test_forwarded_env_selects_variables():
    base = {"PATH": "/p", "PYTHONPATH": "/pp", "HOME": "/root", "SECRET_TOKEN": "x",
            "TF_CPP_MIN_LOG_LEVEL": "2", "NCCL_DEBUG": "INFO", "HOROVOD_LOG_LEVEL": "debug"}
    env = rank_env.forwarded_env(base, {"HOROVOD_RANK": "1"})
    assert env == {"PATH": "/p", "PYTHONPATH": "/pp", "TF_CPP_MIN_LOG_LEVEL": "2",
                   "NCCL_DEBUG": "INFO", "HOROVOD_LOG_LEVEL": "debug",
                   "HOROVOD_RANK": "1", "PYTHONUNBUFFERED": "1"}


# -- ssh ------------------------------------------------------------------------------

def test_ssh_command_construction():
    argv = ssh.ssh_command("node2", ["python", "train.py", "--name", "a b", "it's"],
                           {"HOROVOD_RANK": "2", "X": "has space"}, "/work/my dir")
    assert argv[:4] == ["ssh", "-o", "BatchMode=yes", "node2"]
    assert len(argv) == 5
    remote = argv[4]
    assert remote.startswith("cd '/work/my dir' && exec env ")
    # What the remote shell will execute, word by word: the command under
    # remote_rank.py (which stops the rank when the ssh session ends).
    words = shlex.split(remote)
    assert words == ["cd", "/work/my dir", "&&", "exec", "env", "HOROVOD_RANK=2",
                     "X=has space", sys.executable, ssh.REMOTE_WRAPPER, "--",
                     "python", "train.py", "--name", "a b", "it's"]


def test_ssh_command_port_and_identity():
    argv = ssh.ssh_command("me@h", ["prog"], {}, "/w", ssh_port=2222, identity_file="/k/id")
    assert argv[:8] == ["ssh", "-o", "BatchMode=yes", "-p", "2222", "-i", "/k/id", "me@h"]
    assert shlex.split(argv[8]) == ["cd", "/w", "&&", "exec", "env", sys.executable,
                                    ssh.REMOTE_WRAPPER, "--", "prog"]


def test_plan_rank_argv_local_and_remote(monkeypatch):
    monkeypatch.setattr(network, "address_towards", lambda host: "10.1.1.1")
    plan = _plan(["-np", "3", "-H", "localhost:2,node2:1", "-p", "2200",
                  "python", "t.py", "--lr", "0.1"])
    envs = [e.to_environ() for e in plan.rank_envs("10.1.1.1", 7)]
    argv0, local0 = plan.rank_argv(plan.slots[0], envs[0], "/cwd")
    assert local0 and argv0 == ["python", "t.py", "--lr", "0.1"]
    argv2, local2 = plan.rank_argv(plan.slots[2], envs[2], "/cwd",
                                   base_env={"PATH": "/venv/bin:/bin", "HOME": "/root"})
    assert not local2
    assert argv2[:4] == [sys.executable, ssh.LOCAL_WRAPPER, "node2", "--"]
    argv2 = argv2[4:]
    assert argv2[:6] == ["ssh", "-o", "BatchMode=yes", "-p", "2200", "node2"]
    words = shlex.split(argv2[6])
    assert words[:5] == ["cd", "/cwd", "&&", "exec", "env"]
    assignments = dict(w.split("=", 1) for w in words[5:-7])
    assert assignments["HOROVOD_RANK"] == "2"
    assert assignments["HOROVOD_HOSTNAME"] == "node2"
    assert assignments["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "10.1.1.1"
    assert assignments["PATH"] == "/venv/bin:/bin"
    assert "HOME" not in assignments
    assert words[-7:] == [sys.executable, ssh.REMOTE_WRAPPER, "--",
                          "python", "t.py", "--lr", "0.1"]


# -- mpiexec ----------------------------------------------------------------------------

def _fake_exe(path):
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_find_mpiexec_prefers_python_bin_dir(tmp_path):
    bindir = tmp_path / "bin"
    other = tmp_path / "other"
    bindir.mkdir()
    other.mkdir()
    mine = _fake_exe(bindir / "mpiexec")
    _fake_exe(other / "mpiexec")
    assert mpi.find_mpiexec(str(bindir), str(other)) == mine


def test_find_mpiexec_falls_back_to_path(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    theirs = _fake_exe(other / "mpiexec")
    assert mpi.find_mpiexec(str(tmp_path), str(other)) == theirs
    assert mpi.find_mpiexec(str(tmp_path), str(tmp_path / "empty")) is None


def test_find_mpiexec_default_is_venv():
    venv_mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.path.exists(venv_mpiexec):
        pytest.skip("no mpiexec next to this python")
    assert mpi.find_mpiexec() == venv_mpiexec
    assert mpi.mpi_flavor(venv_mpiexec) == mpi.HYDRA


def test_mpiexec_command_hydra():
    argv = mpi.mpiexec_command("/v/bin/mpiexec", mpi.HYDRA, 4, "a:2,b:2",
                               {"HOROVOD_CONTROLLER": "mpi", "HOROVOD_CYCLE_TIME": "5"},
                               ["python", "t.py"], output_dir="/o", status_dir="/s",
                               python="/v/bin/python")
    assert argv == ["/v/bin/mpiexec", "-n", "4", "-hosts", "a:2,b:2",
                    "-genv", "HOROVOD_CONTROLLER", "mpi", "-genv", "HOROVOD_CYCLE_TIME", "5",
                    "/v/bin/python", mpi.WRAPPER_PATH, "--output-filename", "/o", "--num-ranks", "4",
                    "--status-dir", "/s", "--", "python", "t.py"]


def test_mpiexec_command_openmpi_local():
    argv = mpi.mpiexec_command("mpiexec", mpi.OPENMPI, 2, None, {"HOROVOD_CONTROLLER": "mpi"},
                               ["./prog"], python="py")
    assert argv == ["mpiexec", "-n", "2", "-x", "HOROVOD_CONTROLLER=mpi",
                    "-bind-to", "none", "-map-by", "slot", "py", mpi.WRAPPER_PATH, "--", "./prog"]
    argv = mpi.mpiexec_command("mpiexec", mpi.OPENMPI, 2, "a:1,b:1", {}, ["p"], python="py")
    assert argv[3:5] == ["-H", "a:1,b:1"]


def test_wrapper_path_exists():
    assert os.path.isfile(mpi.WRAPPER_PATH)


# -- network ----------------------------------------------------------------------------

def test_is_local_host():
    assert network.is_local_host("localhost")
    assert network.is_local_host("127.0.0.1")
    assert network.is_local_host("127.0.1.1")
    assert network.is_local_host(__import__("socket").gethostname())
    assert network.is_local_host("user@localhost")
    assert not network.is_local_host("no-such-host-tfhvd.invalid")


def test_interface_address_loopback():
    assert network.interface_address("lo") == "127.0.0.1"
    with pytest.raises(OSError):
        network.interface_address("nosuchiface0")


def test_address_towards_loopback():
    assert network.address_towards("127.0.0.1").startswith("127.")


def test_hierarchical_flags():
    a = cli.parse(["-np", "4", "--hierarchical-allreduce", "--hierarchical-allgather", "x"])
    assert knob_env(a) == {"HOROVOD_HIERARCHICAL_ALLREDUCE": "1",
                                    "HOROVOD_HIERARCHICAL_ALLGATHER": "1"}
