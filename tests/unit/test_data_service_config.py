"""tf_hvd.data (horovod.tensorflow.data) in one process: TfDataServiceConfig's fields and
its JSON file, the compute service's registrations and errors, the compute_worker command
line, and a training-side dispatcher serving a dataset through an in-process worker."""

import dataclasses
import json
import threading
import time

import pytest
import tensorflow as tf

from tf_hvd.data import compute_worker
from tf_hvd.data.compute_service import (TfDataServiceConfig, compute_worker_fn,
                                         send_to_data_service, tf_data_service)
from tf_hvd.data.registry import ComputeClient, ComputeService

ADDRESSES = {"lo": [("127.0.0.1", 4711)], "eth0": [("10.0.0.5", 4711)]}


def _config(**changes):
    fields = dict(dispatchers=2, workers_per_dispatcher=3, dispatcher_side="compute",
                  addresses=ADDRESSES, key=b"\x00\x01secret\xff")
    fields.update(changes)
    return TfDataServiceConfig(**fields)


@pytest.fixture
def service():
    key = b"k" * 32
    svc = ComputeService(2, 2, key=key)
    yield svc, key
    svc.shutdown()


# -- TfDataServiceConfig ---------------------------------------------------------------------

def test_config_fields_and_default_timeout():
    config = _config()
    assert [f.name for f in dataclasses.fields(TfDataServiceConfig)] == [
        "dispatchers", "workers_per_dispatcher", "dispatcher_side", "addresses", "key",
        "timeout"]
    assert config.timeout == 60
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.timeout = 5


def test_config_dict_has_hex_key_and_round_trips():
    config = _config(timeout=7)
    as_dict = config.to_dict()
    assert as_dict["key"] == "0001736563726574ff"  # b"\0\1secret\xff" in hex
    assert json.loads(json.dumps(as_dict)) == {
        "dispatchers": 2, "workers_per_dispatcher": 3, "dispatcher_side": "compute",
        "addresses": {"lo": [["127.0.0.1", 4711]], "eth0": [["10.0.0.5", 4711]]},
        "key": "0001736563726574ff", "timeout": 7}
    assert TfDataServiceConfig.from_dict(json.loads(json.dumps(as_dict))) == config


def test_config_file_round_trip(tmp_path):
    path = str(tmp_path / "compute.json")
    config = _config(dispatcher_side="training", timeout=11)
    config.write(path)
    assert json.load(open(path))["dispatcher_side"] == "training"
    read = TfDataServiceConfig.read(path)
    assert read == config
    assert read.addresses["lo"] == [("127.0.0.1", 4711)]  # tuples again
    assert sorted(p.name for p in tmp_path.iterdir()) == ["compute.json"]  # no temp file


def test_config_read_waits_for_the_file(tmp_path):
    path = str(tmp_path / "late.json")
    writer = threading.Timer(0.5, _config().write, args=(path,))
    writer.start()
    start = time.monotonic()
    assert TfDataServiceConfig.read(path, wait_for_file_creation=True) == _config()
    assert time.monotonic() - start >= 0.4
    writer.join()


def test_config_rejects_unknown_dispatcher_side():
    with pytest.raises(ValueError) as e:
        _config(dispatcher_side="driver")
    assert str(e.value) == "dispatcher_side must be 'compute' or 'training': 'driver'"


def test_send_to_data_service_refuses_training_side_dispatcher():
    ds = tf.data.Dataset.range(3)
    with pytest.raises(RuntimeError) as e:
        ds.send_to_data_service(_config(dispatcher_side="training"), 0, 1)
    assert "use the tf_data_service context manager instead" in str(e.value)
    with pytest.raises(ValueError) as e:
        send_to_data_service(ds, _config(), 0, reuse_dataset=True, round_robin=True)
    assert str(e.value) == "round_robin needs the number of training ranks: pass size"


# -- the compute service ---------------------------------------------------------------------

def test_service_rejects_empty_layouts():
    with pytest.raises(ValueError) as e:
        ComputeService(0, 1, key=b"k")
    assert str(e.value) == "The number of dispatchers must be larger than 0: 0"
    with pytest.raises(ValueError) as e:
        ComputeService(1, 0, key=b"k")
    assert str(e.value) == "The number of workers per dispatcher must be larger than 0: 0"


def test_registrations(service):
    svc, key = service
    client = ComputeClient(svc.addresses(), key)
    client.register_dispatcher(1, "grpc://10.0.0.5:5000")
    client.register_dispatcher(1, "grpc://10.0.0.5:5000")  # the same again is fine
    assert client.wait_for_dispatcher_registration(1, timeout=1) == "grpc://10.0.0.5:5000"
    with pytest.raises(ValueError) as e:
        client.register_dispatcher(1, "grpc://10.0.0.6:5000")
    assert str(e.value) == ("Dispatcher with id 1 has already been registered under different "
                            "address grpc://10.0.0.5:5000: grpc://10.0.0.6:5000")
    with pytest.raises(IndexError) as e:
        client.register_dispatcher(2, "grpc://x:1")
    assert str(e.value) == "Dispatcher id must be within [0..1]: 2"

    # Dispatcher 1's workers are compute ranks 2 and 3.
    client.register_worker_for_dispatcher(1, 2)
    with pytest.raises(TimeoutError) as e:
        client.wait_for_dispatcher_worker_registration(1, timeout=0.3)
    assert str(e.value).startswith("Timed out waiting for workers for dispatcher 1 to register "
                                   "after 0.3s.")
    client.register_worker_for_dispatcher(1, 3)
    client.wait_for_dispatcher_worker_registration(1, timeout=1)


def test_waiting_for_a_missing_dispatcher_times_out(service):
    svc, key = service
    client = ComputeClient(svc.addresses(), key)
    start = time.monotonic()
    with pytest.raises(TimeoutError) as e:
        client.wait_for_dispatcher_registration(0, timeout=0.5)
    assert 0.5 <= time.monotonic() - start < 5
    assert str(e.value) == ("Timed out waiting for dispatcher 0 to register after 0.5s. Check "
                            "that the compute job is running, or increase the timeout.")


def test_wrong_key_is_refused(service):
    svc, _ = service
    with pytest.raises(PermissionError) as e:
        ComputeClient(svc.addresses(), b"x" * 32).register_dispatcher(0, "grpc://a:1")
    assert "the config's key does not match the service's" in str(e.value)


def test_shutdown_releases_waiters(service):
    svc, key = service
    client = ComputeClient(svc.addresses(), key)
    waiter = threading.Thread(target=client.wait_for_shutdown)
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive()
    ComputeClient(svc.addresses(), key).shutdown()
    waiter.join(5)
    assert not waiter.is_alive()


def test_unreachable_service():
    with pytest.raises(ConnectionError) as e:
        ComputeClient({"lo": [("127.0.0.1", 1)]}, b"k").shutdown()
    assert str(e.value).startswith("Cannot reach the compute service at any of its addresses: "
                                   "127.0.0.1:1 (")


# -- compute_worker ----------------------------------------------------------------------------

def test_compute_worker_command_line():
    args = compute_worker._parse(["/tmp/c.json", "--dispatchers", "2"])
    assert (args.configfile, args.dispatchers, args.dispatcher_side, args.timeout,
            args.workers_per_dispatcher) == ("/tmp/c.json", 2, "compute", 60, None)
    args = compute_worker._parse(["--compute-service-config-file", "/tmp/d.json",
                                  "--workers-per-dispatcher", "4",
                                  "--dispatcher-side", "training"])
    assert (args.configfile, args.workers_per_dispatcher, args.dispatcher_side) == (
        "/tmp/d.json", 4, "training")
    for argv in ([], ["a.json", "--compute-service-config-file", "b.json"],
                 ["a.json", "--dispatcher-side", "driver"]):
        with pytest.raises(SystemExit):
            compute_worker._parse(argv)


def test_compute_worker_checks_the_layout(tmp_path):
    path = str(tmp_path / "c.json")
    with pytest.raises(ValueError) as e:
        compute_worker.main(2, "compute", path)  # this process is a job of size 1
    assert str(e.value) == ("Number of processes (1) must be a multiple of number of "
                            "dispatchers (2).")
    with pytest.raises(ValueError) as e:
        compute_worker.main(1, "compute", path, workers_per_dispatcher=2)
    assert str(e.value) == "1 dispatchers with 2 workers each need 2 processes, the job has 1."


# -- a training-side dispatcher with an in-process worker --------------------------------------

def test_training_side_dispatcher_serves_the_dataset():
    key = b"t" * 32
    svc = ComputeService(1, 1, key=key)
    try:
        config = TfDataServiceConfig(1, 1, "training", svc.addresses(), key, timeout=30)
        worker = threading.Thread(target=compute_worker_fn, args=(config,), daemon=True)
        worker.start()
        with tf_data_service(config, 0) as address:
            assert address.startswith("grpc://")
            ds = tf.data.Dataset.range(10).map(lambda i: i * i).apply(
                tf.data.experimental.service.distribute("distributed_epoch", address))
            assert sorted(int(v) for v in ds.as_numpy_iterator()) == [i * i for i in range(10)]
        config.compute_client().shutdown()
        worker.join(30)
        assert not worker.is_alive()
    finally:
        svc.shutdown()
