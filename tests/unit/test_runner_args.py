"""tfhvdrun command line: parsing, checks, and the one-line usage errors (exit 2)."""

import dataclasses
import os
import sys

import pytest

from jobrunner import clean_env, run

from tf_hvd.runner.command_line import parser as cli
from tf_hvd.runner import launch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run_launcher(argv, cwd=None, timeout=60):
    return run([sys.executable, "-m", "tf_hvd.runner"] + argv, timeout, env=clean_env(),
               cwd=cwd or REPO, merge_stderr=False).check_finished()


# -- parsing ------------------------------------------------------------------------

def test_minimal():
    a = cli.parse(["-np", "2", "python", "train.py"])
    assert a.num_proc == 2 and a.command == ["python", "train.py"]
    assert a.mode == "gloo" and a.hosts is None and a.hostfile is None


def test_long_names_and_modes():
    a = cli.parse(["--num-proc", "4", "--hosts", "a:2,b:2", "--mpi", "--verbose",
                   "--start-timeout", "45", "--output-filename", "out", "prog"])
    assert (a.num_proc, a.hosts, a.mode, a.verbose, a.start_timeout, a.output_filename) == (
        4, "a:2,b:2", "mpi", True, 45.0, "out")
    assert cli.parse(["-np", "1", "--gloo", "x"]).mode == "gloo"


def test_command_options_are_not_ours():
    a = cli.parse(["-np", "2", "python", "-u", "train.py", "-np", "7", "--verbose", "-H", "z"])
    assert a.command == ["python", "-u", "train.py", "-np", "7", "--verbose", "-H", "z"]
    assert a.num_proc == 2 and not a.verbose and a.hosts is None


def test_double_dash_separator():
    a = cli.parse(["-np", "2", "--", "python", "train.py"])
    assert a.command == ["python", "train.py"]


def test_knob_flags_parse():
    a = cli.parse(["-np", "1", "--fusion-threshold-mb", "32", "--cycle-time-ms", "2.5",
                   "--cache-capacity", "512", "--timeline-filename", "/tmp/t.json",
                   "--log-level", "debug", "--no-stall-check",
                   "--stall-check-warning-time-seconds", "30",
                   "--stall-check-shutdown-time-seconds", "120",
                   "--network-interface", "eth0", "x"])
    assert a.fusion_threshold_mb == 32 and a.cycle_time_ms == 2.5 and a.cache_capacity == 512
    assert a.timeline_filename == "/tmp/t.json" and a.log_level == "DEBUG"
    assert a.no_stall_check and a.stall_check_warning_time_seconds == 30
    assert a.stall_check_shutdown_time_seconds == 120 and a.network_interface == "eth0"


def test_autotune_flags_map_to_horovods_knobs(tmp_path):
    from tf_hvd.runner.command_line.knob_flags import knob_env
    a = cli.parse(["-np", "2", "--autotune", "--autotune-log-file", "/tmp/at.csv",
                   "--autotune-warmup-samples", "1", "--autotune-steps-per-sample", "4",
                   "--autotune-bayes-opt-max-samples", "6",
                   "--autotune-gaussian-process-noise", "0.5", "x"])
    env = knob_env(a)
    assert {k: v for k, v in env.items() if "AUTOTUNE" in k} == {
        "HOROVOD_AUTOTUNE": "1", "HOROVOD_AUTOTUNE_LOG": "/tmp/at.csv",
        "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "1", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "4",
        "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "6",
        "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE": "0.5"}
    assert not any("AUTOTUNE" in k for k in knob_env(cli.parse(["-np", "2", "x"])))
    # horovodrun's config-file section; the command line wins.
    path = tmp_path / "tune.yaml"
    path.write_text("autotune:\n  enabled: true\n  log_file: /tmp/x.csv\n"
                    "  warmup_samples: 2\n  steps_per_sample: 5\n"
                    "  bayes_opt_max_samples: 7\n  gaussian_process_noise: 0.25\n")
    a = cli.parse(["-np", "2", "--autotune-steps-per-sample", "9", "--config-file", str(path),
                   "x"])
    assert (a.autotune, a.autotune_log_file, a.autotune_warmup_samples,
            a.autotune_steps_per_sample, a.autotune_bayes_opt_max_samples,
            a.autotune_gaussian_process_noise) == (True, "/tmp/x.csv", 2, 9, 7, 0.25)


@pytest.mark.parametrize("argv, fragment", [
    ([], "-np"),
    (["-np", "2", "--autotune-steps-per-sample", "0", "x"], "--autotune-steps-per-sample"),
    (["-np", "2", "--autotune-warmup-samples", "-1", "x"], "--autotune-warmup-samples"),
    (["python", "x.py"], "-np"),
    (["-np", "2"], "no command"),
    (["-np", "2", "--"], "no command"),
    (["-np", "0", "x"], "at least 1"),
    (["-np", "-3", "x"], "at least 1"),
    (["-np", "two", "x"], "integer"),
    (["-np", "2", "--gloo", "--mpi", "x"], "not allowed"),
    (["-np", "2", "-H", "a:1", "--hostfile", "f", "x"], "not allowed"),
    (["-np", "2", "--log-level", "LOUD", "x"], "invalid choice"),
    (["-np", "2", "--start-timeout", "0", "x"], "--start-timeout"),
    (["-np", "2", "--fusion-threshold-mb", "-1", "x"], "--fusion-threshold-mb"),
    (["-np", "2", "--cycle-time-ms", "fast", "x"], "number"),
    (["-np", "2", "--bogus-flag", "x"], "bogus"),
    (["-np", "2", "--num-nccl-streams", "-1", "x"], "--num-nccl-streams must not be negative"),
    (["-np", "2", "--hierarchical-allreduce", "--no-hierarchical-allreduce", "x"],
     "not allowed"),
    (["-np", "2", "--autotune", "--no-autotune", "x"], "not allowed"),
    (["-np", "2", "--stall-check", "--no-stall-check", "x"], "not allowed"),
    (["-np", "2", "--log-hide-timestamp", "--log-with-timestamp", "x"], "not allowed"),
    (["-np", "2", "--jsrun", "--mpi", "x"], "not allowed"),
    (["-np", "2", "--mpi", "--mpi-args=-x 'unclosed", "x"], "--mpi-args"),
    (["-np", "2", "--gloo-timeout-seconds", "-1", "x"], "--gloo-timeout-seconds"),
    (["-np", "2", "--network-interfaces", "eth0,,eth1", "x"], "empty interface"),
    (["-np", "2", "--log-with-timestamp", "--log-without-timestamp", "x"], "not allowed"),
    (["-np", "2", "--timeline-mark-cycles", "--no-timeline-mark-cycles", "x"], "not allowed"),
])
def test_parse_errors(argv, fragment):
    with pytest.raises(cli.UsageError) as info:
        cli.parse(argv)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


# -- python script detection ------------------------------------------------------------

@pytest.mark.parametrize("command, script", [
    (["python", "train.py", "--epochs", "3"], "train.py"),
    (["python3", "-u", "train.py"], "train.py"),
    (["/usr/bin/python3.11", "-W", "ignore", "-X", "dev", "a/b.py"], "a/b.py"),
    ([sys.executable, "-Werror", "t.py"], "t.py"),
    (["python", "-m", "pkg.mod"], None),
    (["python", "-mpkg.mod"], None),
    (["python", "-c", "print(1)"], None),
    (["python", "-"], None),
    (["python"], None),
    (["python", "--", "s.py"], "s.py"),
    (["bash", "run.sh"], None),
    (["./train"], None),
])
def test_python_script(command, script):
    assert cli.python_script(command) == script


def test_check_command_runs_here(tmp_path):
    from tf_hvd.runner.command_line.plan import check_command_runs_here
    script = tmp_path / "ok.py"
    script.write_text("pass\n")
    check_command_runs_here(["python", str(script)])
    check_command_runs_here(["python", "ok.py"], cwd=str(tmp_path))
    check_command_runs_here(["python", "-m", "does.not.matter"])
    with pytest.raises(cli.UsageError, match="does not exist"):
        check_command_runs_here(["python", "missing.py"], cwd=str(tmp_path))
    with pytest.raises(cli.UsageError, match="not found on PATH"):
        check_command_runs_here(["no-such-program-tfhvd"])
    with pytest.raises(cli.UsageError, match="does not exist"):
        check_command_runs_here(["./no-such-program"], cwd=str(tmp_path))


# -- in-process main(): exit code 2, one line -------------------------------------------

def test_main_usage_error_in_process(capsys):
    assert launch.main(["-np", "3", "-H", "a:1,b:1", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tfhvdrun: error: ")
    assert "-np 3" in err and "2 slot(s)" in err


# -- the real command line: exit code 2 and exactly one stderr line -----------------------

@pytest.mark.parametrize("argv, fragment", [
    (["python", "-c", "pass"], "-np"),
    (["-np", "0", "python", "-c", "pass"], "at least 1"),
    (["-np", "2"], "no command"),
    (["-np", "5", "python", "-c", "pass"], "5 is more than"),
    (["-np", "3", "-H", "localhost:2", "python", "-c", "pass"], "more than the 2 slot"),
    (["-np", "2", "-H", "localhost:x", "python", "-c", "pass"], "malformed"),
    (["-np", "2", "-H", "localhost:2:1", "python", "-c", "pass"], "malformed"),
    (["-np", "2", "-H", "", "python", "-c", "pass"], "empty"),
    (["-np", "2", "--hostfile", "/nonexistent/hostfile", "python", "-c", "pass"],
     "cannot read host file"),
    (["-np", "2", "python", "no_such_script_tfhvd.py"], "does not exist"),
    (["-np", "2", "no-such-program-tfhvd"], "not found"),
    (["-np", "2", "--mpi", "--gloo", "python", "-c", "pass"], "not allowed"),
])
def test_command_line_errors(argv, fragment):
    if argv[:2] == ["-np", "5"]:
        argv = ["-np", "5", "-H", "localhost:4"] + argv[2:]
    proc = _run_launcher(argv)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert err.count("\n") == 1, err
    assert err.startswith("tfhvdrun: error: "), err
    assert fragment in err, err
    assert proc.stdout == b""


def test_hostfile_malformed_command_line(tmp_path):
    hf = tmp_path / "hosts"
    hf.write_text("localhost slots=two\n")
    proc = _run_launcher(["-np", "1", "--hostfile", str(hf), "python", "-c", "pass"])
    err = proc.stderr.decode()
    assert proc.returncode == 2 and err.count("\n") == 1 and "line 1" in err, err


def test_help_exits_zero():
    proc = _run_launcher(["--help"])
    assert proc.returncode == 0
    assert b"-np" in proc.stdout and b"--hostfile" in proc.stdout


# -- horovodrun's other flags ------------------------------------------------------------

def test_version_and_check_build():
    proc = _run_launcher(["-v"])
    assert proc.returncode == 0 and proc.stdout.decode().strip() == __import__("tf_hvd").__version__
    proc = _run_launcher(["--check-build"], timeout=120)  # no -np needed
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    assert out.startswith("tf_hvd v%s:\n" % __import__("tf_hvd").__version__), out
    for line in ("Available Frameworks:\n    [X] TensorFlow\n    [ ] PyTorch\n    [ ] MXNet",
                 "Available Controllers:\n    [X] MPI\n    [X] Gloo",
                 "Available Tensor Operations:\n    [ ] NCCL\n    [ ] DDL\n    [ ] CCL\n"
                 "    [X] MPI\n    [X] Gloo"):
        assert line in out, out


def test_mpi_args_and_start_timeout():
    a = cli.parse(["-np", "2", "--mpi", "--mpi-args=-genv A 1", "--binding-args",
                   "-bind-to core", "x"])
    assert a.mpi_args == "-genv A 1" and a.binding_args == "-bind-to core"
    from tf_hvd.runner.command_line.launch_config import build
    assert build(["-np", "1", "x"], {}).start_timeout == 30.0
    assert build(["-np", "1", "x"], {"HOROVOD_START_TIMEOUT": "12"}).start_timeout == 12
    assert build(["-np", "1", "--start-timeout", "5", "x"],
                 {"HOROVOD_START_TIMEOUT": "12"}).start_timeout == 5
    with pytest.raises(cli.UsageError, match="HOROVOD_START_TIMEOUT"):
        build(["-np", "1", "x"], {"HOROVOD_START_TIMEOUT": "soon"})


CONFIG = """
controller: mpi
params:
  fusion_threshold_mb: 32
  cycle_time_ms: 2.5
  cache_capacity: 256
timeline:
  filename: /tmp/tl.json
  mark_cycles: true
stall_check:
  enabled: false
  warning_time_seconds: 20
library_options:
  gloo_timeout_seconds: 50
  mpi_threads_disable: true
logging:
  level: debug
  with_timestamp: false
"""


def test_config_file_sets_flags_and_the_command_line_wins(tmp_path):
    path = tmp_path / "hvd.yaml"
    path.write_text(CONFIG)
    a = cli.parse(["-np", "2", "--config-file", str(path), "x"])
    assert (a.mode, a.fusion_threshold_mb, a.cycle_time_ms, a.cache_capacity) == (
        "mpi", 32, 2.5, 256)
    assert a.timeline_filename == "/tmp/tl.json" and a.timeline_mark_cycles is True
    assert a.no_stall_check is True and a.stall_check_warning_time_seconds == 20
    assert a.gloo_timeout_seconds == 50 and a.mpi_threads_disable is True
    assert a.log_level == "DEBUG" and a.log_with_timestamp is False
    # Flags given on the command line win, before or after --config-file.
    a = cli.parse(["-np", "2", "--cycle-time-ms", "7", "--config-file", str(path), "--gloo",
                   "--stall-check-warning-time-seconds", "9", "--log-with-timestamp",
                   "--no-timeline-mark-cycles", "x"])
    assert (a.mode, a.cycle_time_ms, a.fusion_threshold_mb) == ("gloo", 7, 32)
    assert a.stall_check_warning_time_seconds == 9 and a.log_with_timestamp is True
    assert a.timeline_mark_cycles is False


@pytest.mark.parametrize("text, fragment", [
    ("params: {fusion_threshold_mb: big}", "params.fusion_threshold_mb: expected a number"),
    ("timeline: {mark_cycles: 3}", "expected true or false"),
    ("controller: nccl", "expected gloo or mpi"),
    ("logging: {level: LOUD}", "'LOUD' is not one of"),
    ("params: [1, 2]", "must be a mapping"),
    ("- a\n- b", "expected a mapping of sections"),
    ("params: {a: [", "not valid YAML"),
])
def test_config_file_errors(tmp_path, text, fragment):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(cli.UsageError) as info:
        cli.parse(["-np", "1", "--config-file", str(path), "x"])
    assert fragment in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(cli.UsageError, match="No such file"):
        cli.parse(["-np", "1", "--config-file", str(tmp_path / "missing.yaml"), "x"])


def test_launcher_cache_and_disable_cache(tmp_path):
    from tf_hvd.runner.modes.cache import LauncherCache
    now = [1000.0]
    calls = []

    def check():
        calls.append(1)
        return "hydra"

    path = str(tmp_path / "c" / "cache.json")
    cache = LauncherCache(path, clock=lambda: now[0])
    assert cache.get_or_compute(["k", 1], check) == "hydra"
    assert LauncherCache(path, clock=lambda: now[0]).get_or_compute(["k", 1], check) == "hydra"
    assert len(calls) == 1  # the second launcher reused the result
    now[0] += 3601  # stale after 60 minutes
    assert LauncherCache(path, clock=lambda: now[0]).get_or_compute(["k", 1], check) == "hydra"
    assert len(calls) == 2
    off = LauncherCache.for_args(cli.parse(["-np", "1", "--disable-cache", "x"]))
    off.path = path
    off.get_or_compute(["k", 1], check)
    assert len(calls) == 3  # --disable-cache: the check runs again
    # A failed check (None) is not remembered.
    assert cache.get_or_compute(["fail"], lambda: None) is None
    assert cache.get(["fail"]) == (False, None)


def test_launch_config_is_built_once_and_frozen(monkeypatch):
    """launch_config.build: the parser, both timeouts through the knob table's rules,
    the ranks' knobs with the quiet-start variables, the elastic settings, in one frozen
    value with declared fields."""
    from tf_hvd.runner.command_line import launch_config
    monkeypatch.setenv("HOROVOD_ELASTIC_TIMEOUT", "42")
    config = launch_config.build(["-np", "2", "--min-np", "1", "python", "t.py"],
                                 {"HOROVOD_START_TIMEOUT": "12"})
    assert (config.start_timeout, config.elastic.timeout, config.command) == (
        12.0, 42.0, ("python", "t.py"))
    assert (config.elastic.min_np, config.elastic.max_np) == (1, None)
    assert dict(config.knobs) == {"TF_CPP_MIN_LOG_LEVEL": "1", "TF_HVD_QUIET_TF_STARTUP": "1"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.num_proc = 3
    assert set(f.name for f in dataclasses.fields(config)) >= {
        "num_proc", "command", "mode", "hosts", "start_timeout", "elastic", "knobs"}
    assert config.replace(num_proc=3).num_proc == 3 and config.num_proc == 2
    with pytest.raises(cli.UsageError) as e:
        launch_config.build(["-np", "2", "x"], {"HOROVOD_START_TIMEOUT": "0x10"})
    assert str(e.value) == ("HOROVOD_START_TIMEOUT='0x10' is not a valid value: expected a "
                            "non-negative number of seconds up to 1000000")
