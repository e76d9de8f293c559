"""The contenders, and how the driver starts each one in its own set of processes.

Every contender runs worker.py in fresh processes, started the way a user would
start that kind of program:

  tf_hvd_gloo     python -m tf_hvd.runner -np N python worker.py ...
  tf_hvd_mpi      python -m tf_hvd.runner -np N --mpi python worker.py ...
  mwms_ring       N processes with TF_CONFIG naming N workers on 127.0.0.1 free ports
  mpi4py          mpiexec -n N python worker.py ...            (the venv's MPICH)
  mpi4py_malloc   the same with glibc's MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_ raised
  numpy_local     one process (memory copy: the physical limit on one machine)
  single_process  one process (training reference with the global batch)
  no_allreduce    tfhvdrun -np N (Gloo) with tf_hvd's thread settings, each rank training
                  its own batch with no allreduce: the compute bound of N-process data
                  parallelism on this machine (training only)

Each run has a timeout: the driver stops the process groups (SIGTERM, then
SIGKILL) when it passes, and every worker also ends itself shortly before it
(see worker.py), so nothing outlives a benchmark.
"""

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

from lib import formats, jsonio, knobs, machine, paths, tables

WORKER_PY = os.path.join(paths.LIB_DIR, "worker.py")

ORDER = ("tf_hvd_gloo", "tf_hvd_mpi", "mwms_ring", "mpi4py", "mpi4py_malloc",
         "numpy_local", "single_process", "no_allreduce")
TF_HVD = ("tf_hvd_gloo", "tf_hvd_mpi")


class Contender(object):
    def __init__(self, name, kind, label, description, nproc, env=None):
        self.name = name
        self.kind = kind          # what worker.py sets up: hvd, hvd_bound, mwms, mpi4py,
        #                           local, single
        self.label = label        # short name for tables and plots
        self.description = description
        self.nproc = nproc
        self.env = dict(env or {})  # added to this contender's environment

    def describe(self):
        return {"kind": self.kind, "label": self.label, "description": self.description,
                "processes": self.nproc, "extra_env": self.env}


def make_contenders(np_, hvd_launcher_args=(), malloc_reuse_all=False):
    """All contenders, by name, in the order they run."""
    extra = dict(knobs.MALLOC_REUSE_ENV) if malloc_reuse_all else {}
    launcher_args = "".join(" " + shlex.quote(a) for a in hvd_launcher_args)
    malloc = " ".join("%s=%s" % kv for kv in sorted(knobs.MALLOC_REUSE_ENV.items()))
    contenders = [
        Contender("tf_hvd_gloo", "hvd", "tf_hvd (Gloo)",
                  "tf_hvd over Gloo TCP, started by tfhvdrun -np %d%s" % (np_, launcher_args),
                  np_, extra),
        Contender("tf_hvd_mpi", "hvd", "tf_hvd (MPI)",
                  "tf_hvd over MPI (MPICH), started by tfhvdrun -np %d --mpi%s"
                  % (np_, launcher_args), np_, extra),
        Contender("mwms_ring", "mwms", "MWMS (RING)",
                  "tf.distribute.MultiWorkerMirroredStrategy with "
                  "CommunicationImplementation.RING, %d workers on 127.0.0.1 (TF_CONFIG)" % np_,
                  np_, extra),
        Contender("mpi4py", "mpi4py", "mpi4py",
                  "raw mpi4py Comm.Allreduce on preallocated numpy buffers, mpiexec -n %d "
                  "(MPICH from the pip wheel), default glibc malloc" % np_, np_, extra),
        Contender("mpi4py_malloc", "mpi4py", "mpi4py (malloc reuse)",
                  "as mpi4py, with %s so MPICH's large temporary buffers are reused instead "
                  "of being mapped and unmapped on every call" % malloc, np_,
                  dict(knobs.MALLOC_REUSE_ENV)),
        Contender("numpy_local", "local", "numpy copy",
                  "one process: numpy.copyto (and numpy.add) between preallocated arrays, the "
                  "memory bandwidth limit of one machine", 1, extra),
        Contender("single_process", "single", "1 process",
                  "one process training with the global batch (per-worker batch x %d), "
                  "no communication" % np_, 1, extra),
        Contender("no_allreduce", "hvd_bound", "%d procs, no allreduce" % np_,
                  "tfhvdrun -np %d (Gloo), tf_hvd's thread settings, each rank training its "
                  "own batch without any allreduce: what %d processes can compute on this "
                  "machine, the bound of data-parallel training with free communication"
                  % (np_, np_), np_, extra),
    ]
    return dict((c.name, c) for c in contenders)


def find_mpiexec():
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(here):
        return here
    return shutil.which("mpiexec")


def free_ports(n):
    """n distinct TCP ports free on 127.0.0.1 right now."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _commands(contender, worker_args, hvd_launcher_args):
    """[(argv, extra env, log suffix)] of the processes to start for a contender."""
    py = sys.executable
    worker = [py, WORKER_PY] + worker_args
    if contender.name in ("tf_hvd_gloo", "no_allreduce"):
        return [([py, "-m", "tf_hvd.runner", "-np", str(contender.nproc)]
                 + list(hvd_launcher_args) + worker, {}, "")]
    if contender.name == "tf_hvd_mpi":
        return [([py, "-m", "tf_hvd.runner", "-np", str(contender.nproc), "--mpi"]
                 + list(hvd_launcher_args) + worker, {}, "")]
    if contender.kind == "mwms":
        ports = free_ports(contender.nproc)
        workers = ["127.0.0.1:%d" % p for p in ports]
        runs = []
        for index in range(contender.nproc):
            tf_config = {"cluster": {"worker": workers},
                         "task": {"type": "worker", "index": index}}
            env = {"TF_CONFIG": json.dumps(tf_config), "no_grpc_proxy": "1",
                   "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
            runs.append((worker, env, ".w%d" % index))
        return runs
    if contender.kind == "mpi4py":
        mpiexec = find_mpiexec()
        if mpiexec is None:
            raise RuntimeError("mpiexec not found next to %s or on PATH" % py)
        return [([mpiexec, "-n", str(contender.nproc)] + worker, {}, "")]
    return [(worker, {}, "")]


def _kill_group(proc, signum):
    try:
        os.killpg(proc.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path, lines=25):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def run_contender(contender, parts, part_configs, run_dir, log_dir, timeout, tag,
                  hvd_launcher_args=(), threads=None, grace=10.0):
    """Runs worker.py for one contender with the given parts; returns a run record.

    The record has status ok / failed / timeout / error, the wall time, the
    commands, the log files and the worker's result (None if it wrote none).
    """
    paths.ensure_dir(run_dir)
    paths.ensure_dir(log_dir)
    stem = "%s-%s" % (tag, contender.name)
    config_path = os.path.join(run_dir, stem + ".config.json")
    out_path = os.path.join(run_dir, stem + ".result.json")
    if os.path.exists(out_path):
        os.remove(out_path)
    deadline = time.time() + timeout - 5.0
    jsonio.write_json(config_path, {"contender": contender.name, "kind": contender.kind,
                                    "description": contender.description,
                                    "order": list(parts), "parts": part_configs,
                                    "deadline": deadline, "threads": threads})
    worker_args = ["--config", config_path, "--out", out_path]
    record = {"contender": contender.name, "status": "error", "returncode": None,
              "seconds": None, "commands": [], "logs": [], "result": None, "error": None,
              "loadavg_1min": [os.getloadavg()[0]] * 2}
    try:
        commands = _commands(contender, worker_args, hvd_launcher_args)
    except RuntimeError as e:
        record["error"] = str(e)
        return record
    env_base = dict(os.environ)
    env_base.update(contender.env)
    env_base.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    env_base.setdefault("PYTHONUNBUFFERED", "1")
    procs = []
    record["placement"] = {"before": machine.cpu_placement()}
    load_before = os.getloadavg()[0]
    t0 = time.time()
    try:
        for argv, env_extra, suffix in commands:
            env = dict(env_base)
            env.update(env_extra)
            log_path = os.path.join(log_dir, stem + suffix + ".log")
            record["logs"].append(log_path)
            shown_env = dict(contender.env)
            if "TF_CONFIG" in env_extra:
                shown_env["TF_CONFIG"] = env_extra["TF_CONFIG"]
            record["commands"].append(" ".join(
                ["%s=%s" % (k, shlex.quote(v)) for k, v in sorted(shown_env.items())]
                + [shlex.quote(a) for a in argv]))
            with open(log_path, "w") as logf:
                procs.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                              stdout=logf, stderr=subprocess.STDOUT,
                                              start_new_session=True, cwd=paths.REPO_ROOT))
        failed_at = None
        status = None
        while True:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes):
                break
            now = time.time()
            if failed_at is None and any(c not in (None, 0) for c in codes):
                failed_at = now  # give the others a moment to notice, then stop them
            if now - t0 > timeout:
                status = "timeout"
                break
            if failed_at is not None and now - failed_at > grace:
                break
            time.sleep(0.1)
    finally:
        _stop(procs)
    record["seconds"] = round(time.time() - t0, 2)
    # 1-minute load average before and after: other work on the machine skews the numbers
    record["loadavg_1min"] = [load_before, os.getloadavg()[0]]
    record["placement"]["after"] = machine.cpu_placement()
    codes = [p.returncode for p in procs]
    record["returncode"] = codes if len(codes) > 1 else (codes[0] if codes else None)
    if status is None:
        status = "ok" if all(c == 0 for c in codes) else "failed"
    record["status"] = status
    if os.path.exists(out_path):
        try:
            record["result"] = jsonio.read_json(out_path)
        except (OSError, ValueError) as e:
            record["error"] = "unreadable result file: %s" % e
    if status == "ok" and record["result"] is None:
        record["status"] = "failed"
        record["error"] = "the worker wrote no result file (exit codes %s)" % codes
    if record["result"] and record["result"].get("errors"):
        record["error"] = "; ".join("%s: %s" % (k, v.strip().splitlines()[-1])
                                    for k, v in record["result"]["errors"].items())
    if record["status"] != "ok" and not record["error"]:
        record["error"] = "%s (exit codes %s)" % (status, codes)
    return record


def _stop(procs):
    """SIGTERM every still running process group, then SIGKILL what is left."""
    alive = [p for p in procs if p.poll() is None]
    for p in alive:
        _kill_group(p, signal.SIGTERM)
    end = time.time() + 5.0
    while alive and time.time() < end:
        time.sleep(0.1)
        alive = [p for p in alive if p.poll() is None]
    for p in procs:
        _kill_group(p, signal.SIGKILL)  # also strays left in an exited leader's group
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


# ---------------------------------------------------------------------------
# Command-line options and the loop shared by every benchmark driver


def add_common_arguments(parser, default_contenders):
    parser.add_argument("--np", type=int, default=2,
                        help="processes per distributed contender (default 2)")
    parser.add_argument("--quick", action="store_true",
                        help="fewer sizes/iterations/steps: a check that everything runs")
    parser.add_argument("--results-dir", default=paths.DEFAULT_RESULTS_DIR,
                        help="where the JSON, PNG and logs go (default %(default)s)")
    parser.add_argument("--contenders", default=",".join(default_contenders),
                        help="comma-separated subset of: %s (default: %%(default)s)"
                        % ", ".join(default_contenders))
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds one contender may run (default 300 with --quick, "
                             "else 1800)")
    parser.add_argument("--hvd-launcher-args", default="",
                        help="extra tfhvdrun flags for the tf_hvd contenders, e.g. "
                             "'--cycle-time-ms 1 --fusion-threshold-mb 32'")
    parser.add_argument("--malloc-reuse-all", action="store_true",
                        help="run every contender with %s"
                        % " ".join("%s=%s" % kv for kv in sorted(knobs.MALLOC_REUSE_ENV.items())))
    parser.add_argument("--threads", type=int, default=None,
                        help="TensorFlow intra- and inter-op threads per process for the "
                             "TensorFlow contenders (default: TensorFlow's choice)")
    parser.add_argument("--tag", default=None,
                        help="file name prefix of the outputs (default: the benchmark's name)")


def run_all(bench_name, parts, args, part_configs, valid_contenders, order=None, tag=None,
            around=None):
    """Runs every selected contender that supports at least one of parts.

    parts: {part name: module with KINDS}. order(names) -> names: the order to run
    them in (default ORDER); tag: file name prefix of the run files; around(name):
    a context manager held while that contender runs (its value, if it has a
    describe(), is kept in the run record as "around").
    Returns (contenders by name, runs by name).
    """
    all_contenders = make_contenders(args.np, shlex.split(args.hvd_launcher_args),
                                     args.malloc_reuse_all)
    chosen = formats.parse_list(args.contenders)
    unknown = [c for c in chosen if c not in all_contenders or c not in valid_contenders]
    if unknown:
        raise SystemExit("%s: unknown contender(s) %s; choose from %s"
                         % (bench_name, ", ".join(unknown), ", ".join(valid_contenders)))
    timeout = args.timeout or (300.0 if args.quick else 1800.0)
    results_dir = paths.ensure_dir(os.path.abspath(args.results_dir))
    run_dir = os.path.join(results_dir, "runs")
    log_dir = os.path.join(results_dir, "logs")
    tag = tag or args.tag or bench_name
    runs = {}
    contenders = {}
    started = time.time()
    selected = [n for n in ORDER if n in chosen]
    for name in (order(selected) if order else selected):
        contender = all_contenders[name]
        names = [p for p, module in parts.items() if contender.kind in module.KINDS]
        if not names:
            continue
        contenders[name] = contender
        tables.log("[%s] %-15s %s ..." % (bench_name, name, "+".join(names)))
        with (around(name) if around else _nothing()) as held:
            run = run_contender(contender, names, dict((p, part_configs[p]) for p in names),
                                run_dir, log_dir, timeout, tag,
                                hvd_launcher_args=shlex.split(args.hvd_launcher_args),
                                threads=args.threads)
        if held is not None and hasattr(held, "describe"):
            run["around"] = held.describe()
        runs[name] = run
        line = "[%s] %-15s %s in %.1f s (load %.1f -> %.1f)" % (
            bench_name, name, run["status"], run["seconds"] or 0, run["loadavg_1min"][0],
            run["loadavg_1min"][1])
        if run["error"]:
            line += ": " + run["error"]
        tables.log(line)
        if run["status"] != "ok":
            for path in run["logs"]:
                tables.log("    --- last lines of %s ---" % path)
                for text in _tail(path).splitlines():
                    tables.log("    " + text)
    tables.log("[%s] all contenders done in %.1f s" % (bench_name, time.time() - started))
    return contenders, runs


@contextlib.contextmanager
def _nothing():
    yield None


def part_records(runs, part):
    """All records of one part, over the contenders that ran it."""
    records = []
    for name, run in runs.items():
        result = run.get("result") or {}
        for rec in (result.get("parts") or {}).get(part, []):
            records.append(rec)
    return records


def contenders_section(contenders, runs):
    """Per contender: what it is, how it ran, what it ran with."""
    section = {}
    for name, contender in contenders.items():
        run = runs.get(name, {})
        result = run.get("result") or {}
        entry = contender.describe()
        entry.update({"status": run.get("status"), "seconds": run.get("seconds"),
                      "loadavg_1min": run.get("loadavg_1min"),
                      "placement": run.get("placement"),
                      "error": run.get("error"), "commands": run.get("commands"),
                      "logs": [os.path.relpath(p, paths.REPO_ROOT) for p in run.get("logs", [])],
                      "runtime": result.get("runtime"), "notes": result.get("notes", []),
                      "part_seconds": result.get("part_seconds")})
        section[name] = entry
    return section
