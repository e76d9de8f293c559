"""One rank's environment: the value every launcher writes and every rank reads.

A rank needs little: its place in the job (rank, size, local and cross rank and size),
where to meet the others (the rendezvous address, port and secret) and, for tfhvdrun's
own features, a few private ``TF_HVD_*`` variables (elastic ids, the restart count, the
fault file). :class:`RankEnv` holds all of them under one name each;
:meth:`RankEnv.to_environ` is what tfhvdrun, Ray and the scheduler resolver hand to a
rank, :meth:`RankEnv.from_environ` what a rank's Python side reads back. The core
parses the ``HOROVOD_*`` ones itself at ``hvd.init()`` through its knob table
(cc/common/knobs.cc); ``from_environ`` applies the same rules (knob_rules.py).

    >>> env = RankEnv(rank=1, size=2, local_rank=1, local_size=2, cross_rank=0,
    ...               cross_size=1, rendezvous_addr="127.0.0.1", rendezvous_port=4242)
    >>> env.to_environ()["HOROVOD_RANK"], RankEnv.from_environ(env.to_environ()).size
    ('1', 2)

Also here: what a launcher passes on of its own environment (:func:`process_env` for
ranks on this machine, :func:`forwarded_env` for ranks started over ssh).
"""

import dataclasses
import types

from . import knob_rules
from .auth import SECRET_ENV

# -- the names -----------------------------------------------------------------------------
# Horovod's (the core's knobs, set by the launcher).
RANK = "HOROVOD_RANK"
SIZE = "HOROVOD_SIZE"
LOCAL_RANK = "HOROVOD_LOCAL_RANK"
LOCAL_SIZE = "HOROVOD_LOCAL_SIZE"
CROSS_RANK = "HOROVOD_CROSS_RANK"
CROSS_SIZE = "HOROVOD_CROSS_SIZE"
HOSTNAME = "HOROVOD_HOSTNAME"            # the address this rank binds and publishes
SLOT_HOSTNAME = "HOROVOD_SLOT_HOSTNAME"  # its host as the user named it (in errors)
RENDEZVOUS_ADDR = "HOROVOD_GLOO_RENDEZVOUS_ADDR"
RENDEZVOUS_PORT = "HOROVOD_GLOO_RENDEZVOUS_PORT"
CONTROLLER = "HOROVOD_CONTROLLER"
SECRET = SECRET_ENV                      # never on a command line (auth.py)
ELASTIC = "HOROVOD_ELASTIC"              # "1" in an elastic job, as under horovodrun
# tf_hvd's own, between the launcher and the ranks.
RESTART_COUNT = "TF_HVD_RESTART_COUNT"   # how many times the job was restarted (0: first run)
ELASTIC_TIMEOUT = "TF_HVD_ELASTIC_TIMEOUT"  # seconds the ranks may take to re-form
ELASTIC_MIN_NP = "TF_HVD_ELASTIC_MIN_NP"    # set: started by an elastic launcher
ELASTIC_ID = "TF_HVD_ELASTIC_ID"         # this process's id: its rank when it was started
ELASTIC_JOIN = "TF_HVD_ELASTIC_JOIN"     # "1": started to join a running job
ELASTIC_HOST = "TF_HVD_ELASTIC_HOST"     # the host it was started on, as the user named it
QUIET_TF_STARTUP = "TF_HVD_QUIET_TF_STARTUP"  # "1": drop TensorFlow's start-up lines
FAULT_FILE = "TF_HVD_FAULT_FILE"         # where the core writes its fault report (MPI)
RUN_REPORT_FILE = "TF_HVD_RUN_REPORT_FILE"  # where tfhvdrun leaves a failed job's line (tf_hvd.run)
# tf_hvd's own, set by users.
LIBRARY = "TF_HVD_LIBRARY"               # the op library to load instead of the package's
CACHE_DIR = "TF_HVD_CACHE_DIR"           # the launcher's cache (default ~/.tf_hvd)
SECRET_FILE = "TF_HVD_SECRET_FILE"       # the scheduler jobs' shared secret file
SLURM_LAUNCH = "TF_HVD_SLURM_LAUNCH"     # "ssh": tfhvdrun in an allocation uses ssh, not srun

# Variables copied from the launcher's environment to ranks started over ssh (local
# ranks inherit the whole environment).
_FORWARDED_NAMES = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "PYTHONUNBUFFERED")
_FORWARDED_PREFIXES = ("HOROVOD_", "TF_", "NCCL_", "OMP_", "KMP_", "CUDA_", "TF_HVD_")
# Secrets never travel on a command line (an outer job's secret would be stale anyway).
_NEVER_FORWARDED = frozenset([SECRET_ENV])


def number_text(value):
    """A float without a spurious '.0' (5.0 -> '5', 0.5 -> '0.5'), as ranks read it."""
    return format(float(value), "g") if float(value) != int(value) else str(int(value))


# How each kind of field is written for a rank.
_TO_TEXT = {"int": str, "text": str, "flag": lambda v: "1", "seconds": lambda v: "%g" % v}

# (field, variable, kind), in the order to_environ() writes them.
_FIELDS = (
    ("rank", RANK, "int"),
    ("size", SIZE, "int"),
    ("local_rank", LOCAL_RANK, "int"),
    ("local_size", LOCAL_SIZE, "int"),
    ("cross_rank", CROSS_RANK, "int"),
    ("cross_size", CROSS_SIZE, "int"),
    ("hostname", HOSTNAME, "text"),
    ("slot_hostname", SLOT_HOSTNAME, "text"),
    ("rendezvous_addr", RENDEZVOUS_ADDR, "text"),
    ("rendezvous_port", RENDEZVOUS_PORT, "int"),
    ("controller", CONTROLLER, "text"),
    ("restart_count", RESTART_COUNT, "int"),
    ("elastic", ELASTIC, "flag"),
    ("elastic_timeout", ELASTIC_TIMEOUT, "seconds"),
    ("elastic_min_np", ELASTIC_MIN_NP, "int"),
    ("elastic_id", ELASTIC_ID, "int"),
    ("elastic_join", ELASTIC_JOIN, "flag"),
    ("elastic_host", ELASTIC_HOST, "text"),
    ("quiet_tf_startup", QUIET_TF_STARTUP, "flag"),
    ("fault_file", FAULT_FILE, "text"),
    ("secret", SECRET, "text"),
)


@dataclasses.dataclass(frozen=True)
class RankEnv(object):
    """Every variable tf_hvd gives one rank (None or False: not set).

    ``knobs``: the tuning knobs that go with it (HOROVOD_FUSION_THRESHOLD, ...), written
    first. Build one with the fields you know and derive others with :meth:`replace`.

        >>> RankEnv(rank=0, size=1).replace(restart_count=2).to_environ()
        {'HOROVOD_RANK': '0', 'HOROVOD_SIZE': '1', 'TF_HVD_RESTART_COUNT': '2'}
    """

    rank: int = None
    size: int = None
    local_rank: int = None
    local_size: int = None
    cross_rank: int = None
    cross_size: int = None
    hostname: str = None
    slot_hostname: str = None
    rendezvous_addr: str = None
    rendezvous_port: int = None
    controller: str = None
    restart_count: int = None
    elastic: bool = False
    elastic_timeout: float = None
    elastic_min_np: int = None
    elastic_id: int = None
    elastic_join: bool = False
    elastic_host: str = None
    quiet_tf_startup: bool = False
    fault_file: str = None
    secret: str = dataclasses.field(default=None, repr=False)  # never printed
    knobs: types.MappingProxyType = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({}))

    def __post_init__(self):
        # frozen: the knobs too (a launcher shares one mapping between its ranks)
        object.__setattr__(self, "knobs", types.MappingProxyType(dict(self.knobs)))

    def replace(self, **changes):
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def for_slot(cls, slot, **fields):
        """The topology of a placement.RankSlot (its host as the user named it, less
        any ``user@``), plus ``fields``."""
        topology = dict(rank=slot.rank, size=slot.size, local_rank=slot.local_rank,
                        local_size=slot.local_size, cross_rank=slot.cross_rank,
                        cross_size=slot.cross_size,
                        slot_hostname=slot.hostname.split("@", 1)[-1])
        topology.update(fields)
        return cls(**topology)

    def to_environ(self, with_secret=True):
        """{variable: text}: the knobs, then every field that is set. ``with_secret``
        False leaves the secret out (it travels on ssh's stdin instead)."""
        env = dict(self.knobs)
        for field, name, kind in _FIELDS:
            value = getattr(self, field)
            if value is None or value is False or (field == "secret" and not with_secret):
                continue
            env[name] = _TO_TEXT[kind](value)
        return env

    @classmethod
    def from_environ(cls, environ):
        """The fields ``environ`` sets (knobs left out). Raises ValueError naming a
        malformed variable, with the knob table's words."""
        fields = {}
        for field, name, kind in _FIELDS:
            text = environ.get(name)
            if text is None:
                continue
            if kind == "int":
                fields[field] = knob_rules.parse_int(name, text)
            elif kind == "seconds":
                fields[field] = knob_rules.parse_seconds(name, text)
            elif kind == "flag":
                fields[field] = text.strip() == "1"
            else:
                fields[field] = text
        return cls(**fields)


def started_by_launcher(environ):
    """Whether tfhvdrun (or Ray) placed this process: it has a rank of the launcher's,
    or was started to join an elastic job."""
    return environ.get(RANK) is not None or environ.get(ELASTIC_JOIN) is not None


def quiet_env(verbose, environ):
    """TensorFlow's start-up lines on every rank (cpu_feature_guard, oneDNN, cuInit...)
    are hidden unless the user asked for them: {TF_CPP_MIN_LOG_LEVEL: 1 (no INFO
    lines), QUIET_TF_STARTUP: 1 (the ranks' wrappers drop those lines too)}, or {} with
    ``verbose`` or when the user set TF_CPP_MIN_LOG_LEVEL (then everything is shown)."""
    if verbose or "TF_CPP_MIN_LOG_LEVEL" in environ:
        return {}
    return {"TF_CPP_MIN_LOG_LEVEL": "1", QUIET_TF_STARTUP: "1"}


def process_env(base, extra):
    """Full environment for a local child: ``base`` (usually os.environ) + ``extra``.

    Python children are made unbuffered unless the user chose otherwise, so their
    lines reach the launcher (and the prefixing) as soon as they are printed. A
    rendezvous secret in ``base`` (an enclosing job's) is dropped; the job's own comes
    in ``extra``.
    """
    env = {k: v for k, v in base.items() if k not in _NEVER_FORWARDED}
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra)
    return env


def forwarded_env(base, extra):
    """Environment to pass explicitly to a remote rank: a few of ours plus ``extra``."""
    env = {}
    for name, value in base.items():
        if name in _NEVER_FORWARDED:
            continue
        if name in _FORWARDED_NAMES or name.startswith(_FORWARDED_PREFIXES):
            env[name] = value
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra)
    return env
