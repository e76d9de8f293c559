"""HOROVOD_PEER_TIMEOUT_SECONDS (the liveness bound, cc/common/core/liveness_monitor.h) is
range-checked like every knob, and a bound below two liveness proofs is refused at
hvd.init() with a message that says why; 0 turns the check off."""

import os
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bad_bounds_fail_init_saying_why_and_good_ones_pass():
    code = textwrap.dedent("""
        import os
        import tf_hvd as hvd
        cases = [("abc", "is not a valid value: expected a non-negative number of seconds"),
                 ("-1", "is not a valid value: expected a non-negative number of seconds"),
                 ("2000000", "is not a valid value: expected"),
                 ("0.5", "is below 2 s: each rank's core proves it is alive every 1 s, so a "
                         "bound shorter than 2 proof periods would declare healthy ranks "
                         "lost between two proofs; use at least 2, or 0 to turn the check "
                         "off"),
                 ("1.99", "is below 2 s")]
        for value, expected in cases:
            os.environ["HOROVOD_PEER_TIMEOUT_SECONDS"] = value
            try:
                hvd.init()
                raise AssertionError("init accepted %s" % value)
            except RuntimeError as e:
                msg = str(e)
                assert msg.startswith("Horovod initialization failed: "
                                      "HOROVOD_PEER_TIMEOUT_SECONDS='%s' " % value), msg
                assert expected in msg, msg
            assert not hvd.is_initialized()
        for value in ("0", "2", "20", ""):
            os.environ["HOROVOD_PEER_TIMEOUT_SECONDS"] = value
            hvd.init()
            assert hvd.is_initialized()
            hvd.shutdown()
        print("CHECKED")
        """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOROVOD_", "PMI_"))}
    env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, timeout=300,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.decode("utf-8", "replace")
    assert proc.returncode == 0 and "CHECKED" in out, out[-4000:]
