"""horovodrun parity of tfhvdrun: on/off flags, flags with no effect here, deprecated
spellings, --config-file's ignored keys, --mpi-args without --mpi, LSF jobs and --jsrun,
--output-filename's padded rank folders, --network-interfaces for mpiexec."""

import argparse
import os
import sys

import pytest

from jobrunner import clean_env, run

from tf_hvd.runner.command_line import parser as cli
from tf_hvd.job import lsf_hosts as lsf
from tf_hvd.runner.modes import js_run, mpiexec as mpi
from tf_hvd.runner.processes import output
from tf_hvd.runner.command_line import parity
from tf_hvd.runner.command_line.knob_flags import knob_env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _no_lsf_job(monkeypatch):
    for name in ("LSB_JOBID", "LSB_MCPU_HOSTS", "LSB_HOSTS", "LSB_DJOB_HOSTFILE"):
        monkeypatch.delenv(name, raising=False)


def _knobs(*flags):
    env = knob_env(cli.parse(["-np", "2"] + list(flags) + ["x"]))
    return {k: v for k, v in env.items() if k.startswith("HOROVOD_")}


@pytest.mark.parametrize("flags, expected", [
    (["--hierarchical-allreduce"], {"HOROVOD_HIERARCHICAL_ALLREDUCE": "1"}),
    (["--no-hierarchical-allreduce"], {"HOROVOD_HIERARCHICAL_ALLREDUCE": "0"}),
    (["--hierarchical-allgather"], {"HOROVOD_HIERARCHICAL_ALLGATHER": "1"}),
    (["--no-hierarchical-allgather"], {"HOROVOD_HIERARCHICAL_ALLGATHER": "0"}),
    (["--torus-allreduce"], {"HOROVOD_TORUS_ALLREDUCE": "1"}),
    (["--no-torus-allreduce"], {"HOROVOD_TORUS_ALLREDUCE": "0"}),
    (["--num-nccl-streams", "2"], {"HOROVOD_NUM_NCCL_STREAMS": "2"}),
    (["--no-autotune"], {}),
    (["--autotune"], {"HOROVOD_AUTOTUNE": "1"}),
    (["--stall-check"], {"HOROVOD_STALL_CHECK_DISABLE": "0"}),
    (["--no-stall-check"], {"HOROVOD_STALL_CHECK_DISABLE": "1"}),
    (["--log-hide-timestamp"], {"HOROVOD_LOG_HIDE_TIME": "1"}),
    (["--no-log-hide-timestamp"], {"HOROVOD_LOG_HIDE_TIME": "0"}),
    ([], {}),
])
def test_horovodrun_flags_set_horovods_variables(flags, expected):
    assert _knobs(*flags) == expected


def test_no_autotune_overrides_the_config_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("autotune: {enabled: true}\n")
    assert cli.parse(["-np", "1", "--config-file", str(path), "x"]).autotune is True
    assert cli.parse(["-np", "1", "--no-autotune", "--config-file", str(path),
                      "x"]).autotune is False


def test_notices_name_each_flag_once():
    a = cli.parse(["-np", "1", "--torus-allreduce", "--num-nccl-streams", "4",
                   "--log-hide-timestamp", "x"])
    assert a.notes == [
        "warning: --log-hide-timestamp is deprecated (as in horovodrun), use "
        "--log-without-timestamp",
        "note: " + parity.NO_EFFECT["num_nccl_streams"],
        "note: " + parity.NO_EFFECT["torus_allreduce"]]
    assert cli.parse(["-np", "1", "--no-hierarchical-allreduce", "--stall-check",
                      "x"]).notes == []


def test_launcher_prints_the_notices_on_stderr():
    res = run([sys.executable, "-m", "tf_hvd.runner", "-np", "1", "--no-torus-allreduce",
               "--no-autotune", sys.executable, "-c", "print('ran')"], 60, env=clean_env(),
              cwd=REPO, merge_stderr=False).check_finished()
    assert res.returncode == 0, res.describe()
    err = res.stderr.decode().splitlines()
    assert err == ["tfhvdrun: note: " + parity.NO_EFFECT["torus_allreduce"]]
    assert "[0]<stdout>:ran" in res.output


# -- --config-file: keys it does not know are warnings ----------------------------------

def test_config_file_ignores_unknown_keys_with_a_warning(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("paramz: {a: 1}\nparams: {fusion_treshold_mb: 3, torus_allreduce: true,"
                    " cycle_time_ms: 4}\nlibrary_options: {ccl_bgt_affinity: 1, "
                    "num_nccl_streams: 2}\n")
    a = cli.parse(["-np", "1", "--config-file", str(path), "x"])
    assert a.cycle_time_ms == 4 and a.torus_allreduce is True and a.num_nccl_streams == 2
    where = "--config-file %s: " % path
    assert a.notes[0].startswith("warning: %sunknown section 'paramz' ignored (known: "
                                 "autotune, controller," % where)
    assert a.notes[1].startswith("warning: %sparams.fusion_treshold_mb: unknown key "
                                 "ignored (known in params: cache_capacity," % where)
    assert a.notes[2].startswith("warning: %slibrary_options.ccl_bgt_affinity: not "
                                 "supported by tf_hvd ignored" % where)
    assert "ccl_bgt_affinity" not in a.notes[2].split("known in")[1]
    assert a.notes[3:] == ["note: " + parity.NO_EFFECT["num_nccl_streams"],
                           "note: " + parity.NO_EFFECT["torus_allreduce"]]


def _runner_import_graph():
    """module -> the tf_hvd.runner modules it imports (anywhere in its body), named by
    their path below tf_hvd/runner (command_line.parser)."""
    import ast
    runner_dir = os.path.join(REPO, "tf_hvd", "runner")
    paths = {}
    for directory, _, files in os.walk(runner_dir):
        for f in files:
            if f.endswith(".py") and f not in ("__init__.py", "__main__.py"):
                rel = os.path.relpath(os.path.join(directory, f), runner_dir)[:-3]
                paths[rel.replace(os.sep, ".")] = os.path.join(directory, f)
    graph = {}
    for name, path in paths.items():
        with open(path) as f:
            tree = ast.parse(f.read())
        package = name.split(".")[:-1]
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and 1 <= node.level <= len(package) + 1:
                base = package[:len(package) - node.level + 1]
                base += node.module.split(".") if node.module else []
                for alias in node.names:
                    deps.add(".".join(base + [alias.name]))
                    deps.add(".".join(base))
        graph[name] = deps & set(paths)
    return graph


def test_runner_modules_import_without_a_cycle():
    graph = _runner_import_graph()
    assert "command_line.plan" in graph and "processes.rank_group" in graph
    # the cycle issue 23 named
    assert "command_line.parser" not in graph["command_line.config_file"]
    done, path = set(), []

    def visit(module):
        assert module not in path, "import cycle: " + " -> ".join(path + [module])
        if module in done:
            return
        path.append(module)
        for dep in sorted(graph[module]):
            visit(dep)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)


# -- --mpi-args / --binding-args without --mpi ----------------------------------------

@pytest.mark.parametrize("flags, mode, notes", [
    (["--mpi-args=-genv A 1"], "mpi", []),
    (["--binding-args=-bind-to core"], "mpi", []),
    (["--gloo", "--mpi-args=-genv A 1"], "gloo",
     ["note: --mpi-args has no effect with --gloo (horovodrun ignores it there too)"]),
    ([], "gloo", []),
    (["--mpi"], "mpi", []),
])
def test_mpi_args_choose_the_mpi_launch(flags, mode, notes):
    a = cli.parse(["-np", "2"] + flags + ["x"])
    assert (a.mode, a.notes) == (mode, notes)


def test_config_controller_wins_over_the_mpi_args_default(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("controller: gloo\n")
    assert cli.parse(["-np", "2", "--config-file", str(path), "--binding-args=-x",
                      "x"]).mode == "gloo"


# -- LSF jobs and --jsrun ------------------------------------------------------------------

def test_lsf_job_hosts(tmp_path):
    assert lsf.job_hosts({"LSB_MCPU_HOSTS": "a 2"}) == []  # no LSB_JOBID: not a job
    assert lsf.job_hosts({"LSB_JOBID": "1", "LSB_MCPU_HOSTS": "a 2 b 4"}) == [("a", 2),
                                                                              ("b", 4)]
    assert lsf.job_hosts({"LSB_JOBID": "1", "LSB_HOSTS": "b b a b"}) == [("b", 3), ("a", 1)]
    hostfile = tmp_path / "hosts"
    hostfile.write_text("c\nc\nd\n")
    assert lsf.job_hosts({"LSB_JOBID": "1", "LSB_DJOB_HOSTFILE": str(hostfile)}) == [
        ("c", 2), ("d", 1)]
    with pytest.raises(ValueError, match="LSB_MCPU_HOSTS='a 2 b': expected 'host slots'"):
        lsf.job_hosts({"LSB_JOBID": "1", "LSB_MCPU_HOSTS": "a 2 b"})


def test_parse_in_an_lsf_job_takes_np_and_hosts_from_it(monkeypatch):
    monkeypatch.setenv("LSB_JOBID", "42")
    monkeypatch.setenv("LSB_MCPU_HOSTS", "n1 2 n2 2")
    a = cli.parse(["python", "t.py"])
    assert (a.num_proc, a.hosts, a.mode) == (4, "n1:2,n2:2", "gloo")
    a = cli.parse(["-np", "3", "-H", "x:3", "--jsrun", "python", "t.py"])
    assert (a.num_proc, a.hosts, a.mode) == (3, "x:3", "jsrun")
    monkeypatch.setenv("LSB_MCPU_HOSTS", "n1 two")
    with pytest.raises(cli.UsageError, match="'two' is not a slot count"):
        cli.parse(["python", "t.py"])


def test_jsrun_needs_an_lsf_job():
    with pytest.raises(cli.UsageError) as info:
        cli.parse(["-np", "2", "--jsrun", "x"])
    assert str(info.value) == ("--jsrun: no LSF job detected (LSB_JOBID is not set); jsrun "
                               "starts ranks inside an LSF job only: use --gloo or --mpi "
                               "elsewhere")


def test_jsrun_rankfile_and_command():
    slots = [argparse.Namespace(rank=r, hostname=h) for r, h in
             enumerate(["a", "a", "b"])]
    assert js_run.rankfile_text(slots, {"a": 8, "b": 4}) == (
        "overlapping_rs: allow\ncpu_index_using: logical\n\n"
        "rank: 0: { hostname: a; cpu: {0-3} ; gpu: * ; mem: * }\n"
        "rank: 1: { hostname: a; cpu: {4-7} ; gpu: * ; mem: * }\n"
        "rank: 2: { hostname: b; cpu: {0-3} ; gpu: * ; mem: * }\n")
    wrapped = mpi.wrapped_command(["python", "t.py"], 3, status_dir="/s", python="py")
    assert js_run.jsrun_command("/bin/jsrun", wrapped, "/s/ranks.erf", "-x A") == [
        "/bin/jsrun", "--erf_input", "/s/ranks.erf", "--smpiargs", "-x A", "py",
        mpi.WRAPPER_PATH, "--status-dir", "/s", "--", "python", "t.py"]
    assert js_run.jsrun_command("jsrun", ["p"], None, None, "--rs_per_host 2 -a 1") == [
        "jsrun", "--rs_per_host", "2", "-a", "1", "p"]


# -- --output-filename folders, --network-interfaces for mpiexec -----------------------

@pytest.mark.parametrize("ranks, width", [(1, 1), (2, 1), (10, 1), (11, 2), (100, 2),
                                          (101, 3)])
def test_rank_folders_are_padded_to_the_largest_rank(ranks, width):
    assert output.rank_width(ranks) == width


def test_rank_output_dir_padding():
    try:
        output.set_rank_count(12)
        assert output.rank_output_dir("out", 3) == os.path.join("out", "rank.03")
        assert output.rank_output_dir("out", 11) == os.path.join("out", "rank.11")
    finally:
        output.set_rank_count(1)
    assert output.rank_output_dir("out", 3) == os.path.join("out", "rank.3")


def test_network_interfaces_reach_mpiexec():
    hydra = mpi.mpiexec_command("mpiexec", mpi.HYDRA, 2, "a:1,b:1", {}, ["p"],
                                nics=["eth1", "eth2"])
    assert hydra[:7] == ["mpiexec", "-n", "2", "-hosts", "a:1,b:1", "-iface", "eth1"]
    ompi = mpi.mpiexec_command("mpiexec", mpi.OPENMPI, 2, None, {}, ["p"], nics=["e1", "e2"])
    assert ompi[:7] == ["mpiexec", "-n", "2", "-mca", "btl_tcp_if_include", "e1,e2", "-mca"]
    assert ompi[7:9] == ["oob_tcp_if_include", "e1,e2"]
    assert "-iface" not in mpi.mpiexec_command("mpiexec", mpi.HYDRA, 2, None, {}, ["p"])


# -- tf_hvd.run: horovod.run's parameters, in its order --------------------------------

# horovod.run's signature in Horovod 0.28.1 (horovod/runner/__init__.py), name by name.
HOROVOD_RUN_PARAMETERS = [
    "func", "args", "kwargs", "num_proc", "min_num_proc", "max_num_proc", "slots",
    "reset_limit", "cooldown_range", "hosts", "hostfile", "host_discovery_script",
    "start_timeout", "ssh_port", "ssh_identity_file", "disable_cache", "output_filename",
    "verbose", "use_gloo", "use_mpi", "mpi_args", "network_interface", "network_interfaces",
    "executable", "np", "min_np", "max_np"]


def test_run_has_horovods_signature():
    import inspect
    import tf_hvd
    from tf_hvd import runner
    assert tf_hvd.run is runner.run
    params = inspect.signature(runner.run).parameters
    assert list(params) == HOROVOD_RUN_PARAMETERS
    defaults = {n: p.default for n, p in params.items() if n != "func"}
    assert defaults == dict({n: None for n in HOROVOD_RUN_PARAMETERS[1:]},
                            args=(), num_proc=1)


def test_run_passes_interfaces_and_discovery_to_the_launcher(monkeypatch):
    from tf_hvd.runner import run_func
    calls = []
    monkeypatch.setattr(run_func.subprocess, "call", lambda argv, env: calls.append(argv) or 0)
    with pytest.warns(DeprecationWarning, match="network_interface is deprecated"):
        with pytest.raises(RuntimeError, match="rank 0 returned no result"):
            run_func.run(print, (), None, 1, None, None, None, None, None, None, None,
                         "./discover.sh", 45, network_interfaces=["eth1", "eth2"],
                         network_interface="eth0")
    argv = calls[0]
    assert "--host-discovery-script=./discover.sh" in argv
    assert "--start-timeout=45" in argv  # the 13th positional argument is start_timeout
    assert "--network-interfaces=eth1,eth2,eth0" in argv


def test_jsrun_does_not_try_ssh(monkeypatch, capsys):
    from tf_hvd.runner import launch
    from tf_hvd.runner.processes import ssh
    monkeypatch.setenv("LSB_JOBID", "7")
    monkeypatch.setenv("LSB_MCPU_HOSTS", "computeA 2 computeB 2")
    monkeypatch.setenv("PATH", "/nonexistent")  # no jsrun
    monkeypatch.setattr(ssh, "check_hosts", lambda *a: pytest.fail("ssh was tried"))
    assert launch.main(["--jsrun", "python", "t.py"]) == 2
    assert "--jsrun: jsrun not found on PATH" in capsys.readouterr().err
