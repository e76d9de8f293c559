"""tfhvdrun command line: parsing, checks, and the one-line usage errors (exit 2)."""

import os
import sys

import pytest

from jobrunner import clean_env, run

from tf_hvd.runner import args as cli
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


@pytest.mark.parametrize("argv, fragment", [
    ([], "-np"),
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
    script = tmp_path / "ok.py"
    script.write_text("pass\n")
    cli.check_command_runs_here(["python", str(script)])
    cli.check_command_runs_here(["python", "ok.py"], cwd=str(tmp_path))
    cli.check_command_runs_here(["python", "-m", "does.not.matter"])
    with pytest.raises(cli.UsageError, match="does not exist"):
        cli.check_command_runs_here(["python", "missing.py"], cwd=str(tmp_path))
    with pytest.raises(cli.UsageError, match="not found on PATH"):
        cli.check_command_runs_here(["no-such-program-tfhvd"])
    with pytest.raises(cli.UsageError, match="does not exist"):
        cli.check_command_runs_here(["./no-such-program"], cwd=str(tmp_path))


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
