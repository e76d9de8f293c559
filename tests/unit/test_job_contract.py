"""The job contract (tf_hvd.job): one rank's environment as one value, its names in one
place, and the knob table's rules for the few knobs read outside the core."""

import glob
import os
import re

import pytest

from tf_hvd.job import knob_rules, rank_env
from tf_hvd.job.placement import RankSlot
from tf_hvd.job.rank_env import RankEnv
from tf_hvd.runner.processes import rank_wrapper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_to_environ_and_back():
    env = RankEnv(rank=3, size=4, local_rank=1, local_size=2, cross_rank=1, cross_size=2,
                  hostname="10.0.0.2", slot_hostname="node2", rendezvous_addr="10.0.0.1",
                  rendezvous_port=4242, controller="gloo", restart_count=1, elastic=True,
                  elastic_timeout=30.5, elastic_min_np=2, elastic_id=3, elastic_join=True,
                  elastic_host="node2", quiet_tf_startup=True, fault_file="/s/rank.3.fault",
                  secret="s3cret", knobs={"HOROVOD_CYCLE_TIME": "5"})
    environ = env.to_environ()
    assert environ == {
        "HOROVOD_CYCLE_TIME": "5",
        "HOROVOD_RANK": "3", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1",
        "HOROVOD_LOCAL_SIZE": "2", "HOROVOD_CROSS_RANK": "1", "HOROVOD_CROSS_SIZE": "2",
        "HOROVOD_HOSTNAME": "10.0.0.2", "HOROVOD_SLOT_HOSTNAME": "node2",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.1", "HOROVOD_GLOO_RENDEZVOUS_PORT": "4242",
        "HOROVOD_CONTROLLER": "gloo", "TF_HVD_RESTART_COUNT": "1", "HOROVOD_ELASTIC": "1",
        "TF_HVD_ELASTIC_TIMEOUT": "30.5", "TF_HVD_ELASTIC_MIN_NP": "2",
        "TF_HVD_ELASTIC_ID": "3", "TF_HVD_ELASTIC_JOIN": "1", "TF_HVD_ELASTIC_HOST": "node2",
        "TF_HVD_QUIET_TF_STARTUP": "1", "TF_HVD_FAULT_FILE": "/s/rank.3.fault",
        "HOROVOD_GLOO_RENDEZVOUS_SECRET": "s3cret"}
    assert rank_env.SECRET not in env.to_environ(with_secret=False)
    assert "s3cret" not in repr(env)  # never printed
    assert RankEnv.from_environ(environ) == env.replace(knobs={})
    assert RankEnv.from_environ({}) == RankEnv()


def test_a_value_is_frozen_and_its_knobs_too():
    env = RankEnv(rank=0, knobs={"HOROVOD_CYCLE_TIME": "5"})
    with pytest.raises(AttributeError):
        env.rank = 1
    with pytest.raises(TypeError):
        env.knobs["HOROVOD_CYCLE_TIME"] = "1"
    assert env.replace(rank=1).rank == 1 and env.rank == 0


def test_for_slot_takes_the_placement():
    slot = RankSlot(rank=2, size=3, local_rank=0, local_size=1, cross_rank=1, cross_size=2,
                    hostname="me@node2")
    env = RankEnv.for_slot(slot, controller="gloo")
    assert (env.rank, env.size, env.local_rank, env.local_size, env.cross_rank,
            env.cross_size, env.slot_hostname, env.controller) == (2, 3, 0, 1, 1, 2, "node2",
                                                                   "gloo")


def test_from_environ_names_a_malformed_variable():
    with pytest.raises(ValueError) as e:
        RankEnv.from_environ({"HOROVOD_RANK": "1M"})
    assert str(e.value) == ("HOROVOD_RANK='1M' is not a valid value: expected a non-negative "
                            "number up to 16777216, written as a plain integer (no suffix "
                            "such as 1M)")
    with pytest.raises(ValueError, match="TF_HVD_ELASTIC_TIMEOUT='soon'"):
        RankEnv.from_environ({"TF_HVD_ELASTIC_TIMEOUT": "soon"})


def test_private_names_are_written_once():
    """Every TF_HVD_* variable is named in tf_hvd/job/rank_env.py alone; the rank wrapper,
    which runs without the package, repeats two of them and must agree."""
    found = []
    for path in glob.glob(os.path.join(REPO, "tf_hvd", "**", "*.py"), recursive=True):
        if path.endswith(os.path.join("job", "rank_env.py")):
            continue
        for line in open(path):
            if re.search(r"""["']TF_HVD_[A-Z_]+["']""", line) and ">>>" not in line:
                found.append("%s: %s" % (os.path.relpath(path, REPO), line.strip()))
    wrapper = [f for f in found if f.startswith(os.path.join("tf_hvd", "runner"))
               and "rank_wrapper.py" in f]
    assert sorted(set(found) - set(wrapper)) == []
    assert rank_wrapper.QUIET_ENV == rank_env.QUIET_TF_STARTUP
    assert rank_wrapper.FAULT_FILE_ENV == rank_env.FAULT_FILE


@pytest.mark.parametrize("text,value", [("45", 45.0), (" 0.5 ", 0.5), ("1e3", 1000.0),
                                        ("+7", 7.0), ("1000000", 1e6)])
def test_seconds_by_the_tables_rules(text, value):
    assert knob_rules.parse_seconds("HOROVOD_START_TIMEOUT", text) == value


@pytest.mark.parametrize("text", ["soon", "0x10", "inf", "nan", "-1", "1000001", "", "1 2"])
def test_malformed_seconds_are_refused_with_the_tables_message(text):
    with pytest.raises(ValueError) as e:
        knob_rules.parse_seconds("HOROVOD_ELASTIC_TIMEOUT", text)
    assert str(e.value) == ("HOROVOD_ELASTIC_TIMEOUT='%s' is not a valid value: expected a "
                            "non-negative number of seconds up to 1000000" % text)


def test_timeout_defaults():
    assert knob_rules.seconds_knob({}, "HOROVOD_START_TIMEOUT", 30.0) == 30.0
    assert knob_rules.seconds_knob({"HOROVOD_START_TIMEOUT": " "}, "HOROVOD_START_TIMEOUT",
                                   30.0) == 30.0
    # the table: "0: as the default" for the start-up timeout, not for the elastic one
    assert knob_rules.seconds_knob({"HOROVOD_START_TIMEOUT": "0"}, "HOROVOD_START_TIMEOUT",
                                   30.0) == 30.0
    assert knob_rules.seconds_knob({"HOROVOD_ELASTIC_TIMEOUT": "0"},
                                   "HOROVOD_ELASTIC_TIMEOUT", 600.0) == 0.0
