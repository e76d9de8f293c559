"""The built library links no MPI, CUDA or NCCL and leaves no MPI call unbound
(cc/common/mpi/mpi_library.h loads MPI at run time; a new MPI call needs its row in
cc/common/mpi/mpi_symbols.h), and MPI is found, or refused, with a message that says where
it looked."""
import os

from jobrunner import PYTHON, REPO, run, run_python


def test_library_links_no_mpi_and_binds_every_mpi_call():
    res = run([PYTHON, os.path.join(REPO, "tools", "release", "check_wheels.py"), "--library",
               os.path.join(REPO, "tf_hvd", "_hvd.so")], 120)
    assert res.ok and res.output.strip().endswith(": ok"), res.describe()


def test_mpi_is_found_in_the_python_environment_or_refused_naming_every_place_tried(tmp_path):
    code = """
        import tf_hvd as hvd
        from tf_hvd._library import lib
        print("BUILT", hvd.mpi_built())
        print("LIBRARY", lib._mpi_library())
        """
    out = run_python(code, timeout=120)
    assert "BUILT True" in out, out
    assert "/libmpi.so.12 (MPICH Version:" in out, out

    # An Open MPI-like library (it has ompi_mpi_comm_world) and a missing file: refused.
    fake = tmp_path / "libompi_like.so"
    src = tmp_path / "ompi_like.c"
    src.write_text("int ompi_mpi_comm_world;\n")
    built = run(["gcc", "-shared", "-fPIC", "-o", str(fake), str(src)], 60)
    assert built.ok, built.describe()
    for path, why in [(str(fake), "this is Open MPI, whose ABI differs from MPICH's"),
                      (str(tmp_path / "missing.so"), "cannot open shared object file")]:
        text = " ".join(run_python(code, timeout=120, env={"HOROVOD_MPI_LIBRARY": path}).split())
        assert "BUILT False" in text, text
        assert "no MPICH-ABI MPI library could be loaded. Tried (HOROVOD_MPI_LIBRARY): " \
               "%s: " % path in text, text
        assert why in text, text
        assert "`pip install mpich`" in text and "HOROVOD_MPI_LIBRARY" in text


def test_an_mpi_job_without_an_mpi_library_fails_on_init_saying_so():
    out = run_python("""
        import tf_hvd as hvd
        try:
            hvd.init()
        except Exception as e:
            print("TYPE", type(e).__name__)
            print("MESSAGE", " ".join(str(e).split()))
        """, timeout=120, env={"HOROVOD_CONTROLLER": "mpi",
                               "HOROVOD_MPI_LIBRARY": "/nonexistent/libmpi.so.12"})
    assert "TYPE RuntimeError" in out, out
    assert "no MPICH-ABI MPI library could be loaded" in out, out
    assert "/nonexistent/libmpi.so.12" in out, out
