"""What the Spark tests share: whether Spark can run here, and the settings every test
session gets (the tree on the executors' PYTHONPATH, this Python for their workers,
quiet logs).

    reason = spark_unavailable()      # None, or why the module is skipped
"""

import os
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(REPO, "python", "examples", "spark")


def spark_unavailable():
    """Why Spark cannot run here (no pyspark, no Java 17+), or None."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (tools/setup.sh installs tools/requirements-spark.txt)"
    java = shutil.which("java")
    if java is None:
        return "no Java runtime (tools/setup.sh installs Debian's openjdk-17-jre-headless)"
    out = subprocess.run([java, "-version"], stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                         timeout=60).stderr.decode(errors="replace")
    version = out.split('"')[1] if '"' in out else ""
    if not version or int(version.split(".")[0]) < 17:
        return "Spark 4 needs Java 17 or newer; %s is %r" % (java, version)
    return None


def session_conf(extra_pythonpath=()):
    """Spark settings for a test session: {key: value}."""
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": os.pathsep.join([REPO] + list(extra_pythonpath)),
        "spark.executorEnv.TF_CPP_MIN_LOG_LEVEL": "1",
        "spark.sql.shuffle.partitions": "4",
    }


def rank_processes(root_pid=None):
    """tf_hvd.spark.rank_main processes under ``root_pid`` (default: this process)."""
    import psutil
    root = psutil.Process(root_pid)
    found = []
    for p in root.children(recursive=True):
        try:
            if "tf_hvd.spark.rank_main" in " ".join(p.cmdline()):
                found.append(p.pid)
        except psutil.NoSuchProcess:
            pass
    return found
