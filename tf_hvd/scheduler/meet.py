"""Rank 0 serves the rendezvous; every rank checks in before the core's Gloo set-up.

Without a launcher, rank 0's process runs tfhvdrun's rendezvous server (the same
authenticated HTTP store, tf_hvd.job.rendezvous) at MASTER_ADDR:MASTER_PORT for as
long as it lives; the other ranks' cores connect to it as they would to tfhvdrun's.
Before that, each rank checks in under ``tf_hvd/scheduler/<rank>`` with the job size
it was given, so that the usual mistakes fail at once with a message instead of as a
Gloo time-out: rank 0 unreachable, a rank with another secret (HTTP 403), ranks that
disagree about the job's size, a rank that never comes.
"""

import errno
import json
import socket
import time

from tf_hvd.job import rendezvous

from .job import SchedulerEnvError

KEY = "tf_hvd/scheduler/%d"
OUTCOME = "tf_hvd/scheduler/outcome"  # rank 0's verdict: "ok" or the error's message
SEEN = "tf_hvd/seen/%d"  # a rank read a failed verdict (rank 0 may exit)
_server = None  # rank 0: the running RendezvousServer (kept for the process's life)


def _serve(job, secret):
    global _server
    if _server is not None:
        if _server.secret != secret or _server.port != job.master_port:
            raise SchedulerEnvError("rank 0 already serves a rendezvous at port %d with "
                                    "another secret" % _server.port)
        return _server
    bind = "0.0.0.0"
    try:  # MASTER_ADDR is this host's own address: listen on it alone
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            probe.bind((socket.gethostbyname(job.master_addr), 0))
            bind = probe.getsockname()[0]
        finally:
            probe.close()
    except OSError:
        pass  # a name that resolves elsewhere (a Kubernetes Service): every interface
    server = rendezvous.RendezvousServer(bind, port=job.master_port, secret=secret)
    try:
        server.start()
    except OSError as e:
        why = "it is in use" if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
        raise SchedulerEnvError(
            "rank 0 (%s) cannot serve the rendezvous at %s:%d (%s): %s; give rank 0 a free "
            "port there (the same on every rank)" % (job.engine, bind, job.master_port,
                                                     job.meeting, why))
    _server = server
    return server


def _view(job):
    return json.dumps({"size": job.size, "engine": job.engine,
                       "host": job.host or socket.gethostname()}).encode()


def _parse(data):
    try:
        return json.loads(data.decode())
    except (ValueError, UnicodeDecodeError):
        return {}


def _mismatch(job, other_rank, other):
    return SchedulerEnvError(
        "%s: this rank %d was started for a job of %d processes but rank %d (on %s) for "
        "one of %s; every rank must get the same job size"
        % (job.engine, job.rank, job.size, other_rank, other.get("host", "?"),
           other.get("size", "?")))


def _rank0_wait(job, server, deadline):
    """Rank 0: wait for every rank's check-in; raise on a size mismatch or a time-out
    (and tell the ranks that did check in, so that they fail with the same message)."""
    server.store.delete(OUTCOME)
    server.store.put(KEY % 0, _view(job))
    try:
        _rank0_collect(job, server, deadline)
    except SchedulerEnvError as e:
        server.store.put(OUTCOME, ("rank 0 says: %s" % e).encode())
        _linger(server, job)
        raise
    server.store.put(OUTCOME, b"ok")


def _linger(server, job, within_s=5.0):
    """After a failure, keep serving until the ranks that checked in have read it (or
    ``within_s``): this process is about to exit, and with it the store."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        waiting = [r for r in range(1, job.size) if server.store.get(KEY % r) is not None
                   and server.store.get(SEEN % r) is None]
        if not waiting:
            return
        time.sleep(0.05)


def _rank0_collect(job, server, deadline):
    while True:
        missing = []
        for key in server.store.keys():
            if key.startswith("tf_hvd/scheduler/"):
                r = int(key.rsplit("/", 1)[1])
                view = _parse(server.store.get(key) or b"")
                if view.get("size") != job.size:
                    raise _mismatch(job, r, view)
        for r in range(1, job.size):
            if server.store.get(KEY % r) is None:
                missing.append(r)
        if not missing:
            return
        if time.monotonic() > deadline:
            raise SchedulerEnvError(
                "%s: rank(s) %s did not check in at this rank 0's rendezvous %s:%d within "
                "the start time-out (HOROVOD_START_TIMEOUT); they did not start, or cannot "
                "reach this host" % (job.engine, ",".join(map(str, missing)),
                                     job.master_addr, job.master_port))
        time.sleep(0.05)


def _connect(job, secret, deadline):
    """A non-zero rank: a client of rank 0's store, once rank 0 listens."""
    last = None
    while True:
        try:
            with socket.create_connection((job.master_addr, job.master_port), timeout=5):
                pass
            return rendezvous.RendezvousClient(job.master_addr, job.master_port, secret,
                                               timeout=30)
        except OSError as e:
            last = e
        if time.monotonic() > deadline:
            raise SchedulerEnvError(
                "%s: rank %d cannot reach rank 0's rendezvous at %s = %s:%d within the start "
                "time-out (%s); is rank 0 running, and is %s the same on every rank?"
                % (job.engine, job.rank, job.meeting, job.master_addr, job.master_port,
                   getattr(last, "strerror", None) or last, job.meeting))
        time.sleep(0.1)


def _request(client, job, method, key, body=b""):
    try:
        status, data = client.request(method, key, body)
    except rendezvous.RendezvousError:
        raise SchedulerEnvError(
            "%s: the program at %s:%d answers without the job's secret: another program "
            "listens on rank 0's port (%s)" % (job.engine, job.master_addr, job.master_port,
                                               job.meeting))
    if status == 403:
        raise SchedulerEnvError(
            "%s: rank 0's rendezvous at %s:%d refused rank %d (HTTP 403: %s); every rank "
            "needs the same secret (HOROVOD_GLOO_RENDEZVOUS_SECRET, or the same "
            "TF_HVD_SECRET_FILE on a file system the nodes share), and clocks within 5 "
            "minutes" % (job.engine, job.master_addr, job.master_port, job.rank,
                         data.decode("utf-8", "replace").strip()))
    return status, data


def _rank_check_in(job, secret, deadline):
    client = _connect(job, secret, deadline)
    try:
        while True:
            status, data = _request(client, job, "GET", KEY % 0)
            if status == 200:
                break
            if time.monotonic() > deadline:
                raise SchedulerEnvError("%s: rank 0 at %s:%d never checked in"
                                        % (job.engine, job.master_addr, job.master_port))
            time.sleep(0.05)
        _request(client, job, "PUT", KEY % job.rank, _view(job))
        rank0 = _parse(data)
        if rank0.get("size") != job.size:
            raise _mismatch(job, 0, rank0)
        while True:
            try:
                status, data = _request(client, job, "GET", OUTCOME)
            except OSError as e:
                raise SchedulerEnvError(
                    "%s: rank 0 at %s:%d went away before every rank had checked in (%s); "
                    "its output says why" % (job.engine, job.master_addr, job.master_port,
                                             e.strerror or e))
            if status == 200 and data == b"ok":
                return
            if status == 200:
                _request(client, job, "PUT", SEEN % job.rank, b"1")
                raise SchedulerEnvError(data.decode("utf-8", "replace"))
            if time.monotonic() > deadline + 5:
                raise SchedulerEnvError("%s: rank 0 at %s:%d did not see every rank check in"
                                        % (job.engine, job.master_addr, job.master_port))
            time.sleep(0.05)
    finally:
        client.close()


def meet(job, secret, start_timeout_s):
    """Serve (rank 0) or reach the rendezvous and check in; raises SchedulerEnvError."""
    deadline = time.monotonic() + start_timeout_s
    if job.rank == 0:
        _rank0_wait(job, _serve(job, secret), deadline)
    else:
        _rank_check_in(job, secret, deadline)
