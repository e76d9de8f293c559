"""Host list parsing and rank placement (tf_hvd.job.placement; no processes started)."""

import pytest

from tf_hvd.job import placement
from tf_hvd.job import host_spec as hosts
from tf_hvd.job.host_spec import HostSlots, HostSpecError


# -- -H ---------------------------------------------------------------------------

def test_parse_hosts_with_slots():
    assert hosts.parse_hosts("h1:2,h2:4") == [HostSlots("h1", 2), HostSlots("h2", 4)]


def test_parse_hosts_default_one_slot_and_spaces():
    assert hosts.parse_hosts(" a , b:3 ") == [HostSlots("a", 1), HostSlots("b", 3)]


def test_parse_hosts_addresses_and_users():
    assert hosts.parse_hosts("10.0.0.1:2,me@node-2.example.com:1") == [
        HostSlots("10.0.0.1", 2), HostSlots("me@node-2.example.com", 1)]


@pytest.mark.parametrize("text", [
    "", "  ", "h1:", "h1:x", "h1:0", "h1:-1", "h1:2:3", ":2", "h1,,h2", "h1:2,",
    "bad host:2", "h1:1.5", "h/1:2", "h1:2,h1:1",
])
def test_parse_hosts_malformed(text):
    with pytest.raises(HostSpecError) as info:
        hosts.parse_hosts(text)
    assert "\n" not in str(info.value)


def test_format_hosts_round_trip():
    text = "a:2,b:1"
    assert hosts.format_hosts(hosts.parse_hosts(text)) == text
    assert hosts.total_slots(hosts.parse_hosts(text)) == 3


# -- --hostfile ---------------------------------------------------------------------

def test_parse_hostfile_text_forms():
    text = """
    # cluster
    node1 slots=4
    node2 slots=2   # trailing comment
    node3
    node4:3
    """
    assert hosts.parse_hostfile_text(text) == [
        HostSlots("node1", 4), HostSlots("node2", 2), HostSlots("node3", 1),
        HostSlots("node4", 3)]


@pytest.mark.parametrize("text", [
    "node1 slots=", "node1 slots=abc", "node1 slots=0", "node1 cores=2",
    "node1 slots=2 extra", "node1:2 slots=2", "# nothing\n\n", "a slots=1\na slots=2",
])
def test_parse_hostfile_malformed(text):
    with pytest.raises(HostSpecError) as info:
        hosts.parse_hostfile_text(text, "hf")
    assert "\n" not in str(info.value)


def test_parse_hostfile_error_names_line(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("a slots=2\nb slots=zz\n")
    with pytest.raises(HostSpecError, match="line 2"):
        hosts.parse_hostfile(str(f))


def test_parse_hostfile_missing(tmp_path):
    with pytest.raises(HostSpecError, match="cannot read host file"):
        hosts.parse_hostfile(str(tmp_path / "nope"))


def test_parse_hostfile_file(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("a slots=2\nb slots=2\n")
    assert hosts.parse_hostfile(str(f)) == [HostSlots("a", 2), HostSlots("b", 2)]


# -- placement ------------------------------------------------------------------------

def _topology(slots):
    return [(s.rank, s.hostname, s.local_rank, s.local_size, s.cross_rank, s.cross_size)
            for s in slots]


def test_single_host():
    slots = placement.assign_ranks([HostSlots("localhost", 3)], 3)
    assert _topology(slots) == [
        (0, "localhost", 0, 3, 0, 1),
        (1, "localhost", 1, 3, 0, 1),
        (2, "localhost", 2, 3, 0, 1),
    ]
    assert all(s.size == 3 for s in slots)


def test_two_hosts_full():
    slots = placement.assign_ranks(hosts.parse_hosts("a:2,b:2"), 4)
    assert _topology(slots) == [
        (0, "a", 0, 2, 0, 2),
        (1, "a", 1, 2, 0, 2),
        (2, "b", 0, 2, 1, 2),
        (3, "b", 1, 2, 1, 2),
    ]


def test_partial_last_host_and_unused_host():
    slots = placement.assign_ranks(hosts.parse_hosts("a:2,b:2,c:4"), 3)
    assert _topology(slots) == [
        (0, "a", 0, 2, 0, 2),
        (1, "a", 1, 2, 0, 1),
        (2, "b", 0, 1, 1, 2),
    ]
    assert placement.hosts_used(slots) == ["a", "b"]


def test_uneven_hosts():
    slots = placement.assign_ranks(hosts.parse_hosts("a:1,b:3,c:2"), 6)
    assert _topology(slots) == [
        (0, "a", 0, 1, 0, 3),
        (1, "b", 0, 3, 1, 3),
        (2, "b", 1, 3, 0, 2),
        (3, "b", 2, 3, 0, 1),
        (4, "c", 0, 2, 2, 3),
        (5, "c", 1, 2, 1, 2),
    ]


def test_placement_invariants():
    slots = placement.assign_ranks(hosts.parse_hosts("a:3,b:2,c:3"), 7)
    assert [s.rank for s in slots] == list(range(7))
    for s in slots:
        same_host = [t for t in slots if t.hostname == s.hostname]
        assert s.local_size == len(same_host)
        peers = [t for t in slots if t.local_rank == s.local_rank]
        assert s.cross_size == len(peers)
        assert peers[s.cross_rank] is s


@pytest.mark.parametrize("np_", [0, 5])
def test_assign_ranks_rejects_bad_counts(np_):
    with pytest.raises(ValueError):
        placement.assign_ranks(hosts.parse_hosts("a:2,b:2"), np_)
