"""Rank output forwarding: prefixes, whole lines, copies in --output-filename."""

import io
import os
import threading

from tf_hvd.runner.processes import output


class _Sink(io.BytesIO):
    """A destination that records each write separately."""

    def __init__(self):
        super().__init__()
        self.writes = []

    def write(self, data):
        self.writes.append(bytes(data))
        return super().write(data)


def _pipe_with(data_chunks):
    r, w = os.pipe()
    reader = os.fdopen(r, "rb")

    def feed():
        with os.fdopen(w, "wb", buffering=0) as f:
            for chunk in data_chunks:
                f.write(chunk)

    t = threading.Thread(target=feed)
    t.start()
    return reader, t


def test_prefix_format():
    assert output.prefix(1, "stdout") == b"[1]<stdout>:"
    assert output.prefix(12, "stderr") == b"[12]<stderr>:"


def test_forward_prefixes_each_line_and_terminates_last():
    pipe, feeder = _pipe_with([b"hello\nwor", b"ld\n", b"\n", b"no newline"])
    sink = _Sink()
    t = output.forward(pipe, 1, "stdout", sink)
    feeder.join(10)
    t.join(10)
    assert not t.is_alive()
    assert sink.getvalue() == (b"[1]<stdout>:hello\n[1]<stdout>:world\n[1]<stdout>:\n"
                               b"[1]<stdout>:no newline\n")
    # one write per line
    assert all(w.count(b"\n") == 1 for w in sink.writes)


def test_forward_binary_and_utf8_safe():
    data = "grüße ✓\n".encode() + b"\xff\xfe raw\n"
    pipe, feeder = _pipe_with([data])
    sink = _Sink()
    t = output.forward(pipe, 0, "stderr", sink)
    feeder.join(10)
    t.join(10)
    assert sink.getvalue() == (b"[0]<stderr>:" + "grüße ✓\n".encode() +
                               b"[0]<stderr>:\xff\xfe raw\n")


def test_output_files(tmp_path):
    pipe, feeder = _pipe_with([b"a\nb\nc"])
    sink = _Sink()
    t = output.forward(pipe, 3, "stdout", sink, output_dir=str(tmp_path))
    feeder.join(10)
    t.join(10)
    assert (tmp_path / "rank.3" / "stdout").read_bytes() == b"a\nb\nc"
    assert sink.getvalue() == b"[3]<stdout>:a\n[3]<stdout>:b\n[3]<stdout>:c\n"


def test_lines_of_many_ranks_never_interleave():
    sink = _Sink()
    threads, feeders = [], []
    n_lines = 300
    for rank in range(4):
        line = (b"%d" % rank) * 5000 + b"\n"
        pipe, feeder = _pipe_with([line] * n_lines)
        feeders.append(feeder)
        threads.append(output.forward(pipe, rank, "stdout", sink))
    for f in feeders:
        f.join(30)
    for t in threads:
        t.join(30)
    lines = sink.getvalue().split(b"\n")[:-1]
    assert len(lines) == 4 * n_lines
    for line in lines:
        head, _, body = line.partition(b":")
        rank = int(head[1:head.index(b"]")])
        assert body == (b"%d" % rank) * 5000


def test_closed_destination_keeps_draining():
    pipe, feeder = _pipe_with([b"x\n" * 100000])  # more than a pipe buffer
    sink = _Sink()
    sink.close()
    t = output.forward(pipe, 0, "stdout", sink)
    feeder.join(30)
    t.join(30)
    assert not feeder.is_alive() and not t.is_alive()


def test_quiet_drops_tensorflows_start_up_lines_only():
    lines = {
        b"WARNING: All log messages before absl::InitializeLog() is called are written to "
        b"STDERR\n": True,
        b"I0000 00:00:1795534917.027345   18860 port.cc:153] oneDNN custom operations are "
        b"on.\n": True,
        b"I1124 15:40:01.123456   18860 cpu_feature_guard.cc:227] This TensorFlow binary\n":
            True,
        b"E0000 00:00:1795534785.066012   12569 cuda_platform.cc:52] failed call to cuInit: "
        b"INTERNAL: CUDA error\n": "no gpu",
        b"W0000 00:00:1795534785.066012   12569 some.cc:1] a warning\n": False,
        b"INFO: user's own line\n": False,
        b"I am a user line\n": False,
    }
    try:
        for has_gpu in (False, True):
            output.set_quiet(True, has_gpu=has_gpu)
            for line, dropped in lines.items():
                expected = (not has_gpu) if dropped == "no gpu" else dropped
                assert output.is_noise(line) is expected, (line, has_gpu)
        output.set_quiet(False)
        assert not any(output.is_noise(line) for line in lines)
    finally:
        output.set_quiet(False)
