// The pybind11 module tf_hvd._hvd: the basics (init, shutdown, size, rank,
// ...) over the same core state the TensorFlow ops use, since both live in
// one shared library.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <variant>

#include "cc/common/algorithms/algorithm_counts.h"
#include "cc/common/host/cpu_binding.h"
#include "cc/common/knobs.h"
#include "cc/common/operations.h"
#include "cc/common/parameters.h"
#if HAVE_GLOO
#include "cc/common/gloo/signing.h"
#endif

namespace py = pybind11;

namespace {

const char kNotInitialized[] = "Horovod has not been initialized; use hvd.init().";

tfhvd::Topology RequireTopology() {
  if (!tfhvd::TopologyKnown()) throw py::value_error(kNotInitialized);
  return tfhvd::GetTopology();
}

// One knob's value in Python terms: bool, int, float or str.
py::object KnobValue(const tfhvd::KnobSpec& spec, const tfhvd::Parameters& p) {
  return std::visit([&p](auto member) -> py::object { return py::cast(p.*member); },
                    spec.target);
}

bool TransportIs(const char* name) {
  return tfhvd::IsInitialized() && std::string(tfhvd::TransportName()) == name;
}

}  // namespace

PYBIND11_MODULE(_hvd, m) {
  m.doc() = "tf_hvd core: process topology and lifecycle";
  m.def(
      "init",
      [](const std::vector<std::vector<int>>& process_sets, const std::vector<int>& comm_ranks,
         py::object comm_handle) {
        tfhvd::JobCommunicator comm;
        comm.ranks = comm_ranks;
        if (!comm_handle.is_none()) {
          comm.has_handle = true;
          comm.handle = comm_handle.cast<int64_t>();
        }
        tfhvd::Status s;
        {
          py::gil_scoped_release release;
          s = tfhvd::Initialize(process_sets, comm);
        }
        if (!s.ok()) throw std::runtime_error(s.message());
      },
      py::arg("process_sets") = std::vector<std::vector<int>>(),
      py::arg("comm_ranks") = std::vector<int>(), py::arg("comm_handle") = py::none(),
      "Starts the background thread and connects to the other ranks; registers the static "
      "process sets (lists of global ranks, the same on every rank).");
  // Process sets (cc/common/core/process_set.h). Errors: ValueError with Horovod's messages.
  m.def("process_sets", [] {
    py::dict out;
    for (const auto& set : tfhvd::ProcessSetRanks()) out[py::int_(set.first)] = set.second;
    return out;
  }, "{process set id: its global ranks} of every registered set.");
  m.def("process_set_topology", [](int id) {
    tfhvd::Topology t;
    bool member = false;
    tfhvd::Status s = tfhvd::ProcessSetTopology(id, &t, &member);
    if (!s.ok()) throw py::value_error(s.message());
    if (!member) return py::object(py::none());
    return py::object(py::make_tuple(t.rank, t.size, t.local_rank, t.local_size));
  }, py::arg("process_set_id"),
     "(rank, size, local_rank, local_size) within the set, or None on a non-member.");
  m.def("add_process_set", [](const std::vector<int>& ranks) {
    tfhvd::Status s;
    int32_t id = -1;
    {
      py::gil_scoped_release release;
      s = tfhvd::AddProcessSet(ranks, &id);
    }
    if (!s.ok()) throw py::value_error(s.message());
    return id;
  }, py::arg("ranks"), "Collective: registers a set; its id, or -1 if one of these ranks exists.");
  m.def("remove_process_set", [](int id) {
    tfhvd::Status s;
    bool removed = false;
    {
      py::gil_scoped_release release;
      s = tfhvd::RemoveProcessSet(id, &removed);
    }
    if (!s.ok()) throw py::value_error(s.message());
    return removed;
  }, py::arg("process_set_id"), "Collective: removes a set; False if there is none.");
  m.def(
      "knobs",
      [] {
        py::list out;
        for (const auto& k : tfhvd::Knobs()) {
          py::dict d;
          d["name"] = k.name;
          d["type"] = tfhvd::KnobTypeName(k.type);
          d["default"] = k.default_text;
          d["values"] = k.values;
          bool numeric = k.type != tfhvd::KnobType::BOOL && k.type != tfhvd::KnobType::STRING &&
                         k.type != tfhvd::KnobType::ENUM;
          d["min"] = numeric ? py::object(py::float_(k.min)) : py::object(py::none());
          d["max"] = numeric && k.max < tfhvd::kNoMax ? py::object(py::float_(k.max))
                                                      : py::object(py::none());
          d["set_by"] = k.set_by;
          d["flag"] = k.flag;
          d["meaning"] = k.meaning;
          out.append(d);
        }
        return out;
      },
      "The HOROVOD_* knobs tf_hvd reads (cc/common/knobs.cc), as dicts: name, type, "
      "default, values (enums), min/max (numbers; max None: unbounded), set_by, flag (tfhvdrun), meaning.");
  m.def(
      "knob_values",
      [] {
        tfhvd::Parameters p;
        tfhvd::Status s = tfhvd::Parameters::FromEnvironment(&p);
        if (!s.ok()) throw std::runtime_error("Horovod initialization failed: " + s.message());
        py::dict out;
        for (const auto& k : tfhvd::Knobs()) out[k.name] = KnobValue(k, p);
        return out;
      },
      "Every knob parsed from the environment now, by name (the same parser as init); "
      "a malformed value raises RuntimeError naming it.");
  m.def(
      "parse_knob",
      [](const std::string& name, const std::string& text) {
        const tfhvd::KnobSpec* spec = tfhvd::FindKnob(name);
        if (spec == nullptr) throw py::key_error(name + " is not a tf_hvd knob");
        tfhvd::Parameters p;
        tfhvd::Status s = tfhvd::ParseKnob(*spec, text, &p);
        if (!s.ok()) throw py::value_error(s.message());
        return KnobValue(*spec, p);
      },
      py::arg("name"), py::arg("text"), "Parses one knob's text as init would.");
  m.def(
      "default_knob_values",
      [] {
        tfhvd::Parameters p;
        tfhvd::Parameters::FromLookup([](const char*) -> const char* { return nullptr; }, &p);
        py::dict out;
        for (const auto& k : tfhvd::Knobs()) out[k.name] = KnobValue(k, p);
        return out;
      },
      "Every knob's value when nothing is set.");
  m.def(
      "shutdown",
      [](bool exiting) {
        py::gil_scoped_release release;
        tfhvd::Shutdown(exiting);
      },
      py::arg("exiting") = false,
      "exiting: called as the process ends (the other ranks' errors say so).");
  m.def("is_initialized", [] { return tfhvd::IsInitialized(); });
  m.def("topology_known", [] { return tfhvd::TopologyKnown(); });
  // (code, message) of why collectives cannot run now: ("ok", "") while
  // running; "not_initialized" before init and after this process's
  // shutdown; "aborted" after another rank shut down or left;
  // "unavailable" after a rank died; "invalid_argument" after a failed init.
  m.def("status", [] {
    tfhvd::Status s = tfhvd::CheckInitialized();
    const char* code = "unknown";
    switch (s.code()) {
      case tfhvd::Status::OK: code = "ok"; break;
      case tfhvd::Status::PRECONDITION: code = "not_initialized"; break;
      case tfhvd::Status::ABORTED: code = "aborted"; break;
      case tfhvd::Status::UNAVAILABLE: code = "unavailable"; break;
      case tfhvd::Status::INVALID_ARGUMENT: code = "invalid_argument"; break;
      case tfhvd::Status::DEADLINE_EXCEEDED: code = "deadline_exceeded"; break;
      default: break;
    }
    return py::make_tuple(code, s.message());
  });
  m.def("size", [] { return RequireTopology().size; });
  m.def("rank", [] { return RequireTopology().rank; });
  m.def("local_size", [] { return RequireTopology().local_size; });
  m.def("local_rank", [] { return RequireTopology().local_rank; });
  m.def("cross_size", [] { return RequireTopology().cross_size; });
  m.def("cross_rank", [] { return RequireTopology().cross_rank; });
  m.def("is_homogeneous", [] { return RequireTopology().homogeneous; });
  m.def(
      "start_timeline",
      [](const std::string& path, bool mark_cycles) {
        tfhvd::Status s = tfhvd::StartTimeline(path, mark_cycles);
        if (!s.ok()) throw std::runtime_error(s.message());
      },
      py::arg("file_path"), py::arg("mark_cycles") = false);
  m.def("stop_timeline", [] {
    tfhvd::Status s = tfhvd::StopTimeline();
    if (!s.ok()) throw std::runtime_error(s.message());
  });
  m.def("autotune_history", [] {
    // [(round, fusion_threshold_bytes, cycle_time_ms, response_cache, hierarchical_allreduce)]
    py::list out;
    for (const auto& r : tfhvd::AutotuneHistory()) {
      out.append(py::make_tuple(r.round, r.values.fusion_threshold_bytes, r.values.cycle_time_ms,
                                r.values.response_cache, r.values.hierarchical_allreduce));
    }
    return out;
  }, "Autotune: the values this rank switched to, with the global round of each switch.");
  // Debug hook: {"allreduce/hierarchical": n, "allgather/backend": m, ...},
  // the collectives each algorithm ran in this process (tests check a knob's path).
  m.def("algorithm_counts", [] { return tfhvd::AlgorithmCounts(); });
  m.def("transport", [] { return std::string(tfhvd::TransportName()); });
  m.def("mpi_threads_supported", [] { return tfhvd::MpiThreadsSupported(); });
  m.def("background_thread_cpu", [] { return tfhvd::BackgroundThreadCpu(); },
        "The CPU the background thread is pinned to (HOROVOD_THREAD_AFFINITY), or -1.");
  m.def(
      "bind_cpus",
      [](const std::vector<int>& bound, const std::vector<int>& wide, double retry_s) {
        tfhvd::Status s = tfhvd::GlobalCpuBinding().Bind(bound, wide, retry_s);
        if (!s.ok()) throw std::runtime_error(s.message());
      },
      "Binds every thread to `bound`; the background thread widens the process to `wide` "
      "while other processes use those CPUs (cc/common/host/cpu_binding.h).");
  m.def("cpu_binding_state", [] {
    tfhvd::CpuBinding::State st = tfhvd::GlobalCpuBinding().state();
    py::dict d;
    d["active"] = st.active;
    d["bound"] = st.bound;
    d["releases"] = st.releases;
    d["cpus"] = st.cpus;
    return d;
  });
  // MPI is loaded at run time: "built" means an MPICH-ABI library was found (Horovod:
  // compiled in). _mpi_library says which, or why none (every place tried).
  m.def("mpi_built", [] { return HAVE_MPI + 0 == 1 && tfhvd::MpiAvailable().ok(); });
  m.def("_mpi_library", [] {
    tfhvd::Status s = tfhvd::MpiAvailable();
    return s.ok() ? tfhvd::MpiLibraryFound() : s.message();
  });
  m.def("_set_mpi_search_dirs", [](std::vector<std::string> dirs) {
    tfhvd::SetMpiSearchDirs(std::move(dirs));
  });
  m.def("_set_gpu_search_dirs", [](std::vector<std::string> dirs) {
    tfhvd::SetGpuSearchDirs(std::move(dirs));
  });
  // The CUDA variant: loads the CUDA runtime and NCCL now; "" or why they cannot be.
  m.def("_gpu_libraries", [] { return tfhvd::GpuLibrariesAvailable().message(); });
  m.def("gloo_built", [] { return HAVE_GLOO + 0 == 1; });
  m.def("nccl_built", [] { return tfhvd::NcclBuilt(); });
  m.def("cuda_built", [] { return tfhvd::CudaBuilt(); });
  m.def("mpi_enabled", [] { return TransportIs("mpi"); });
  m.def("gloo_enabled", [] { return TransportIs("gloo"); });
#if HAVE_GLOO
  // The rendezvous client's signing, for tests that check it against
  // tf_hvd/job/auth.py and Python's hmac (bytes in, hex text out).
  m.def("_hmac_sha256_hex", [](py::bytes key, py::bytes data) {
    return tfhvd::ToHex(tfhvd::HmacSha256(key, data));
  });
  m.def("_rendezvous_request_signature",
        [](py::bytes secret, py::bytes method, py::bytes path, py::bytes timestamp,
           py::bytes nonce, py::bytes body) {
          return tfhvd::RendezvousRequestSignature(secret, method, path, timestamp, nonce,
                                                   body);
        });
  m.def("_rendezvous_response_signature",
        [](py::bytes secret, int status, py::bytes nonce, py::bytes body) {
          return tfhvd::RendezvousResponseSignature(secret, status, nonce, body);
        });
#endif
}
