"""The one list of HOROVOD_* knobs (cc/common/knobs.cc): strict parsing at hvd.init(),
warnings for unknown HOROVOD_* variables, and the docs/knobs.md table generated from the list.

init is process-wide and reads the environment, so the init checks run in fresh processes.
"""

import glob
import os
import re
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools", "codegen"))

import gen_knob_table  # noqa: E402


def _run(code, env_extra=None, timeout=300):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HOROVOD_", "PMI_", "OMPI_", "PMIX_"))}
    env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update(env_extra or {})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    out = proc.stdout.decode("utf-8", "replace")
    assert proc.returncode == 0, out[-6000:]
    return out


@pytest.fixture(scope="module")
def lib():
    from tf_hvd.basics import _lib
    return _lib


# -- the list and docs/knobs.md -------------------------------------------------------------------

def test_docs_table_is_generated_from_the_list(lib):
    with open(os.path.join(REPO, "docs", "knobs.md")) as f:
        _, table, _ = gen_knob_table.split_page(f.read())
    assert table == gen_knob_table.render(lib.knobs()), (
        "docs/knobs.md's knob table differs from cc/common/knobs.cc: run "
        "PYTHONPATH=. python tools/codegen/gen_knob_table.py")
    rows = [line for line in table.splitlines()[2:]]
    page = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        page[re.match(r"`(HOROVOD_[A-Z0-9_]+)`", cells[0]).group(1)] = cells[2].strip("`")
    listed = {k["name"]: k["default"] or "(empty)" for k in lib.knobs()}
    assert page == listed


def test_every_plain_default_parses_to_the_value_used_when_unset(lib):
    defaults = lib.default_knob_values()
    assert set(defaults) == {k["name"] for k in lib.knobs()}
    for k in lib.knobs():
        assert k["type"] in ("bool", "int", "bytes", "seconds", "milliseconds", "number",
                             "string", "enum")
        assert k["set_by"] in ("user", "launcher"), k
        assert k["meaning"], k
        if k["default"].startswith("("):
            continue  # a default that follows something else, described in words
        assert lib.parse_knob(k["name"], k["default"]) == defaults[k["name"]], k
    assert defaults["HOROVOD_FUSION_THRESHOLD"] == 64 * 1024 * 1024
    assert defaults["HOROVOD_LOG_LEVEL"] == "warning"


@pytest.mark.parametrize("name,text,value", [
    ("HOROVOD_SHM_ALLREDUCE", "YES", True), ("HOROVOD_SHM_ALLREDUCE", "false", False),
    ("HOROVOD_TF_THREADS", "0", False), ("HOROVOD_GLOO_DIRECT_MAX_BYTES", " 1048576 ", 1048576),
    ("HOROVOD_CYCLE_TIME", "2.5", 2.5), ("HOROVOD_LOG_LEVEL", "Debug", "debug"),
    ("HOROVOD_CONTROLLER", "MPI", "mpi"), ("HOROVOD_TIMELINE", " /tmp/t l.json", " /tmp/t l.json"),
    ("HOROVOD_AUTOTUNE", "1", True), ("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "4", 4),
    ("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.25", 0.25),
])
def test_valid_values_parse(lib, name, text, value):
    assert lib.parse_knob(name, text) == value


@pytest.mark.parametrize("name,text,expected", [
    ("HOROVOD_GLOO_DIRECT_MAX_BYTES", "1M", "plain integer (no suffix such as 1M)"),
    ("HOROVOD_FUSION_THRESHOLD", "1e6", "plain integer"),
    ("HOROVOD_CACHE_CAPACITY", "2.5", "plain integer"),
    ("HOROVOD_CACHE_CAPACITY", "99999999999999999999", "non-negative number"),
    ("HOROVOD_SHM_ALLREDUCE", "2", "one of 1, 0, true, false, yes, no"),
    ("HOROVOD_CYCLE_TIME", "nan", "non-negative number of milliseconds"),
    ("HOROVOD_CYCLE_TIME", "inf", "non-negative number of milliseconds"),
    ("HOROVOD_GLOO_TIMEOUT_SECONDS", "0x10", "non-negative number of seconds"),
    ("HOROVOD_GLOO_RENDEZVOUS_PORT", "70000", "up to 65535"),
    ("HOROVOD_SIZE", "0", "from 1 to 16777216"),
    ("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "0", "from 1 to 1000000"),
    ("HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "nan", "non-negative number up to 1000000"),
    ("HOROVOD_LOG_LEVEL", "warn", "one of trace, debug, info, warning, error, fatal"),
])
def test_malformed_values_are_rejected_naming_them(lib, name, text, expected):
    with pytest.raises(ValueError) as e:
        lib.parse_knob(name, text)
    assert "%s='%s' is not a valid value: expected" % (name, text) in str(e.value), str(e.value)
    assert expected in str(e.value), str(e.value)


# -- nobody reads HOROVOD_* variables around the list ----------------------------------------------

def _sources(pattern):
    return [p for p in glob.glob(os.path.join(REPO, pattern), recursive=True) if os.path.isfile(p)]


def test_the_library_reads_horovod_variables_only_through_the_list():
    offenders = []
    for path in _sources("cc/**/*.cc") + _sources("cc/**/*.h"):
        text = open(path).read()
        # A call with a knob's name as its first argument: getenv("HOROVOD_X"), EnvInt(...).
        if (re.search(r'\w\(\s*"HOROVOD_[A-Z0-9_]*"\s*[,)]', text)
                and not path.endswith("cc/common/knobs.cc")):
            offenders.append(path)
    for path in _sources("tf_hvd/*.py") + _sources("tf_hvd/keras/**/*.py"):
        text = open(path).read()
        # Reads only: setting a knob for the core (os.environ["HOROVOD_X"] = "1")
        # hands it to the one parser.
        if re.search(r"""(environ\.get\(|getenv\()\s*["']HOROVOD_|"""
                     r"""environ\[\s*["']HOROVOD_[A-Z0-9_]*["']\s*\](?!\s*=[^=])""", text):
            offenders.append(path)
    assert not offenders, offenders


def test_every_variable_the_launcher_sets_is_a_knob(lib):
    names = {k["name"] for k in lib.knobs()}
    used = set()
    for path in _sources("tf_hvd/runner/**/*.py") + _sources("tf_hvd/job/*.py"):
        used |= set(re.findall(r"HOROVOD_[A-Z][A-Z0-9_]*", open(path).read()))
    assert used and used <= names, sorted(used - names)


def test_knobs_read_outside_the_core_follow_the_tables_rules(lib):
    """tf_hvd/job/knob_rules.py parses the few knobs the launcher and a rank's Python
    side read without the library: its rows and its verdicts are the table's."""
    from tf_hvd.job import knob_rules
    table = {k["name"]: k for k in lib.knobs()}
    for name, (kind, low, high) in knob_rules.ROWS.items():
        assert (table[name]["type"], table[name]["min"], table[name]["max"]) == (
            kind, low, high), name
        parse = knob_rules.parse_seconds if kind == "seconds" else knob_rules.parse_int
        for text in ["0", "1", " 45 ", "2.5", "1e3", "+7", "-1", "0x10", "inf", "nan", "soon",
                     "", "65536", "16777217", "1000001", "1M"]:
            try:
                want = lib.parse_knob(name, text)
            except ValueError as e:
                with pytest.raises(ValueError) as got:
                    parse(name, text)
                assert str(got.value) == str(e), (name, text)
            else:
                assert parse(name, text) == want, (name, text)


# -- at hvd.init() -------------------------------------------------------------------------------

def test_malformed_knobs_fail_init_naming_variable_and_value():
    out = _run("""
        import os
        import tf_hvd as hvd
        cases = [("HOROVOD_GLOO_DIRECT_MAX_BYTES", "1M", "plain integer (no suffix such as 1M)"),
                 ("HOROVOD_GLOO_TIMEOUT_SECONDS", "abc", "non-negative number of seconds"),
                 ("HOROVOD_CYCLE_TIME", "-1", "non-negative number of milliseconds"),
                 ("HOROVOD_CONTROLLER", "foo", "one of gloo, mpi"),
                 ("HOROVOD_LOG_LEVEL", "loud", "one of trace, debug, info, warning, error"),
                 ("HOROVOD_STALL_CHECK_DISABLE", "maybe", "one of 1, 0, true, false, yes, no"),
                 ("HOROVOD_TF_THREADS", "many", "one of 1, 0, true, false, yes, no"),
                 ("HOROVOD_RANK", "-1", "non-negative number up to 16777216"),
                 ("HOROVOD_SHM_SLOT_BYTES", "1024", "from 4096 to 4294967296")]
        for name, value, expected in cases:
            os.environ[name] = value
            try:
                hvd.init()
                raise AssertionError("init accepted %s=%s" % (name, value))
            except RuntimeError as e:
                msg = str(e)
                assert msg.startswith("Horovod initialization failed: "), msg
                assert "%s='%s' is not a valid value: expected" % (name, value) in msg, msg
                assert expected in msg, msg
            assert not hvd.is_initialized()
            del os.environ[name]
            print("REJECTED", name)
        # Valid values are accepted (and read through the same list).
        os.environ.update({"HOROVOD_GLOO_DIRECT_MAX_BYTES": "1048576", "HOROVOD_CYCLE_TIME": "0.5",
                           "HOROVOD_STALL_CHECK_DISABLE": "yes", "HOROVOD_TF_THREADS": "no"})
        hvd.init()
        from tf_hvd import tf_threads
        from tf_hvd.basics import _lib
        values = _lib.knob_values()
        assert values["HOROVOD_GLOO_DIRECT_MAX_BYTES"] == 1048576, values
        assert values["HOROVOD_CYCLE_TIME"] == 0.5 and values["HOROVOD_STALL_CHECK_DISABLE"] is True
        assert tf_threads.tf_thread_settings()["reason"] == "HOROVOD_TF_THREADS=0"
        print("SIZE", hvd.size())
    """)
    assert out.count("REJECTED") == 9, out[-3000:]
    assert "SIZE 1" in out, out[-3000:]
    assert "not a tf_hvd knob" not in out, out[-3000:]
    assert "background thread started" not in out, out[-3000:]  # default level: warning


def test_unknown_variable_warns_once_and_valid_knobs_take_effect(tmp_path):
    timeline = tmp_path / "timeline.json"
    out = _run("""
        import tensorflow as tf
        import tf_hvd as hvd
        hvd.init()
        hvd.allreduce(tf.constant([1.0, 2.0]), name="knob_probe")
        hvd.shutdown()
        import os
        del os.environ["HOROVOD_TIMELINE"]  # keep the first run's timeline
        hvd.init()  # a second init does not warn again
        hvd.shutdown()
        print("DONE")
    """, env_extra={
        "HOROVOD_FOO": "1", "HOROVOD_FUSION_THRESHOLDS": "0",  # unknown: a typo
        # Set by the launcher, known: no warning.
        "HOROVOD_HOSTNAME": "127.0.0.1", "HOROVOD_GLOO_RENDEZVOUS_SECRET": "s",
        "HOROVOD_CROSS_SIZE": "1",
        "HOROVOD_LOG_LEVEL": "Debug", "HOROVOD_TIMELINE": str(timeline),
        "HOROVOD_TIMELINE_MARK_CYCLES": "true",
    })
    assert "DONE" in out, out[-3000:]
    warnings = [line for line in out.splitlines() if "not a tf_hvd knob" in line]
    assert len(warnings) == 1, out[-3000:]
    assert "WARNING" in warnings[0], warnings
    assert "ignoring environment variables HOROVOD_FOO, HOROVOD_FUSION_THRESHOLDS:" in warnings[0]
    for known in ("HOROVOD_HOSTNAME", "HOROVOD_GLOO_RENDEZVOUS_SECRET", "HOROVOD_CROSS_SIZE"):
        assert known not in warnings[0], warnings
    # HOROVOD_LOG_LEVEL=Debug: the core logs at debug level.
    assert re.search(r"DEBUG tf_hvd .*background thread started", out), out[-3000:]
    # HOROVOD_TIMELINE + HOROVOD_TIMELINE_MARK_CYCLES: rank 0 wrote both.
    text = timeline.read_text()
    assert "knob_probe" in text and "CYCLE_START" in text, text[:2000]


def test_horovod_cpu_knobs_and_dynamic_timeline(tmp_path):
    """HOROVOD_CPU_OPERATIONS, HOROVOD_THREAD_AFFINITY, HOROVOD_LOG_HIDE_TIME and
    HOROVOD_TIMELINE=DYNAMIC with start_timeline/stop_timeline, in one process."""
    cpu = max(os.sched_getaffinity(0))
    out = _run("""
        import json, os, re
        import tensorflow as tf
        import tf_hvd as hvd
        from tf_hvd.basics import _lib

        def init_error(**env):
            os.environ.update(env)
            try:
                hvd.init()
            except RuntimeError as e:
                return str(e)
            finally:
                for k in env:
                    del os.environ[k]
            raise AssertionError("init accepted %%s" %% env)

        msg = init_error(HOROVOD_CPU_OPERATIONS="ccl")
        assert "no oneCCL support" in msg, msg
        msg = init_error(HOROVOD_CPU_OPERATIONS="mpi", HOROVOD_CONTROLLER="gloo")
        assert "HOROVOD_CPU_OPERATIONS=mpi but HOROVOD_CONTROLLER=gloo" in msg, msg
        msg = init_error(HOROVOD_THREAD_AFFINITY="0,1")
        assert "one CPU id per local rank (1)" in msg, msg
        msg = init_error(HOROVOD_THREAD_AFFINITY="x")
        assert "HOROVOD_THREAD_AFFINITY='x' is not a valid value" in msg, msg
        print("ERRORS OK")

        os.environ.update(HOROVOD_THREAD_AFFINITY="%(cpu)d", HOROVOD_CPU_OPERATIONS="gloo",
                          HOROVOD_LOG_HIDE_TIME="1", HOROVOD_LOG_LEVEL="debug",
                          HOROVOD_TIMELINE="DYNAMIC")
        hvd.init()
        assert _lib.background_thread_cpu() == %(cpu)d, _lib.background_thread_cpu()
        assert not hvd.mpi_threads_supported()
        hvd.allreduce(tf.constant([1.0]), name="before_start")
        assert not os.path.exists("DYNAMIC"), "a file named DYNAMIC was written"
        hvd.start_timeline("%(tl1)s", mark_cycles=True)
        hvd.allreduce(tf.constant([2.0]), name="while_marked")
        hvd.stop_timeline()
        hvd.start_timeline("%(tl2)s")
        hvd.allreduce(tf.constant([3.0]), name="while_plain")
        hvd.stop_timeline()
        hvd.allreduce(tf.constant([4.0]), name="after_stop")
        hvd.shutdown()
        for path, name, cycles in (("%(tl1)s", "while_marked", True),
                                   ("%(tl2)s", "while_plain", False)):
            text = open(path).read()
            events = json.loads(text)  # a complete JSON array after stop_timeline
            names = {e.get("args", {}).get("name") for e in events if e.get("ph") == "M"}
            assert name in names, names
            assert not names & {"before_start", "after_stop"}, names
            assert ("CYCLE_START" in text) == cycles, (path, cycles)
        print("TIMELINE OK")
    """ % {"cpu": cpu, "tl1": tmp_path / "t1.json", "tl2": tmp_path / "t2.json"})
    assert "ERRORS OK" in out and "TIMELINE OK" in out, out[-3000:]
    logs = [l for l in out.splitlines() if "tf_hvd operations.cc" in l]
    assert logs, out[-3000:]
    for line in logs:  # HOROVOD_LOG_HIDE_TIME=1: no date or time
        assert re.match(r"^\[\d\]\[(DEBUG|INFO|WARNING) tf_hvd ", line), line
    assert "background thread pinned to CPU %d" % cpu in out, out[-3000:]
def test_a_stall_ends_after_ten_minutes_by_default(lib):
    """No hang without an end: a stall becomes an error on every rank after 600 s unless
    HOROVOD_STALL_SHUTDOWN_TIME_SECONDS says otherwise (0 turns it off)."""
    assert float(lib.default_knob_values()["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"]) == 600
    assert float(lib.parse_knob("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "0")) == 0
