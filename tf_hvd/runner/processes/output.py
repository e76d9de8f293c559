"""Copy a rank's stdout/stderr pipes to ours, one prefixed line at a time.

Every line a rank writes appears as ``[<rank>]<stdout>:<line>`` (or ``<stderr>``),
the format horovodrun uses. Each pipe is read by its own thread; a line is written
with a single write under a lock shared by everyone writing to the same destination,
so lines of different ranks never interleave mid-line. Optionally the raw, unprefixed
bytes are also written to ``<output_dir>/rank.<rank>/<stdout|stderr>``, the rank
zero-padded to the width of the largest rank as horovodrun names them (``rank.08`` in a
job of 10 ranks or more; ``set_rank_count``). With
``set_timestamps(True)`` (``--prefix-output-with-timestamp``) each line starts with the
local time it arrived, as horovodrun writes it:
``Mon Nov 23 15:22:20 2026[1]<stdout>:...``.

This module must stay importable on its own (only the standard library): the MPI
rank wrapper imports it by file location, and it then loads the one prefix format
(tf_hvd/job/output_prefix.py) by its path (job_files.py).
"""

import os
import re
import sys
import threading

if __package__:
    from tf_hvd.job import output_prefix
else:  # loaded by file location (rank_wrapper.py): stdlib only, the job's file by path
    import job_files  # noqa: E402
    output_prefix = job_files.load("output_prefix")

_locks_guard = threading.Lock()
_locks = {}
_timestamps = [False]
_rank_width = [1]
_quiet = [False, False]  # [drop TensorFlow's start-up lines, this host has a GPU]

# TensorFlow's start-up lines that TF_CPP_MIN_LOG_LEVEL cannot hide (printed before its
# logging is set up): absl's preamble and INFO lines (oneDNN's notice); and, on a host
# without an NVIDIA device, the failed cuInit.
_NOISE = [re.compile(p) for p in (
    rb"^WARNING: All log messages before absl::InitializeLog\(\) is called are written "
    rb"to STDERR\s*$",
    rb"^I\d{4} [\d:.]+ +\d+ [\w./-]+:\d+\] ")]
_NO_GPU_NOISE = re.compile(rb"^E\d{4} .*\] failed call to cuInit: ")


def set_timestamps(enabled):
    """Start every forwarded line with the time (for lines forwarded from now on)."""
    _timestamps[0] = bool(enabled)


def timestamp():
    return output_prefix.stamp().encode()


def lock_for(stream):
    """One lock per destination stream object."""
    with _locks_guard:
        key = id(stream)
        if key not in _locks:
            _locks[key] = threading.Lock()
        return _locks[key]


def log_line(message):
    """Write ``tfhvdrun: <message>`` to stderr as one line, never inside a rank's line."""
    dest = sys.stderr.buffer
    with lock_for(dest):
        try:
            sys.stderr.flush()
            dest.write(("tfhvdrun: %s\n" % message).encode("utf-8", "replace"))
            dest.flush()
        except (OSError, ValueError):
            pass


def prefix(rank, stream_name):
    return output_prefix.prefix(rank, stream_name).encode()


def set_quiet(enabled, has_gpu=None):
    """Drop TensorFlow's start-up lines from the forwarded output (not from the
    --output-filename copies); ``has_gpu`` defaults to whether this host has one."""
    if has_gpu is None:
        has_gpu = os.path.exists("/dev/nvidiactl")
    _quiet[:] = [bool(enabled), bool(has_gpu)]


def is_noise(line):
    """Whether set_quiet(True) drops ``line`` (bytes)."""
    if not _quiet[0]:
        return False
    if any(p.match(line) for p in _NOISE):
        return True
    return not _quiet[1] and bool(_NO_GPU_NOISE.match(line))


def rank_width(num_ranks):
    """Digits of the largest rank of a job of ``num_ranks`` (10 ranks: 1, 11 ranks: 2)."""
    return len(str(max(int(num_ranks) - 1, 0)))


def set_rank_count(num_ranks):
    """Pad the rank in the names of --output-filename folders for this many ranks."""
    _rank_width[0] = rank_width(num_ranks)


def rank_output_dir(output_dir, rank):
    return os.path.join(output_dir, "rank.%0*d" % (_rank_width[0], rank))


def open_rank_file(output_dir, rank, stream_name):
    """Create ``<output_dir>/rank.<rank>/`` if needed and open ``stream_name`` in it."""
    directory = rank_output_dir(output_dir, rank)
    os.makedirs(directory, exist_ok=True)
    return open(os.path.join(directory, stream_name), "wb")


def _copy_lines(pipe, rank, stream_name, dest, dest_lock, copy_file, redact=None,
                on_line=None, stamped=False):
    head = prefix(rank, stream_name)
    try:
        while True:
            line = pipe.readline()
            if not line:
                break
            if on_line is not None:
                on_line(line)
            if redact and redact in line:
                line = line.replace(redact, b"****")
            if not line.endswith(b"\n"):
                line_out = line + b"\n"
            else:
                line_out = line
            if copy_file is not None:
                try:
                    copy_file.write(line)
                    copy_file.flush()
                except (OSError, ValueError):
                    copy_file = None
            if is_noise(line):
                continue  # kept in the copy above, not shown
            with dest_lock:
                try:
                    dest.write((timestamp() if stamped else b"") + head + line_out)
                    dest.flush()
                except (OSError, ValueError):
                    # Our own stdout went away (closed pipe); keep draining the rank's
                    # pipe so it never blocks on a full buffer.
                    pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass
        if copy_file is not None:
            try:
                copy_file.close()
            except OSError:
                pass


def forward(pipe, rank, stream_name, dest, output_dir=None, redact=None, on_line=None):
    """Start a daemon thread copying ``pipe`` (binary, readable) to binary ``dest``.

    ``redact`` (bytes or str, e.g. the job's secret) is replaced by ``****`` wherever a
    line contains it; ``on_line(line)`` is called with each raw line as it arrives.
    Returns the thread; it ends when the pipe reaches EOF.
    """
    if isinstance(redact, str):
        redact = redact.encode()
    copy_file = open_rank_file(output_dir, rank, stream_name) if output_dir else None
    thread = threading.Thread(
        target=_copy_lines,
        args=(pipe, rank, stream_name, dest, lock_for(dest), copy_file, redact, on_line,
              _timestamps[0]),
        name="tf_hvd-rank%d-%s" % (rank, stream_name), daemon=True)
    thread.start()
    return thread
