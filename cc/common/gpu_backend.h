// What the core knows about GPU tensors, without any CUDA header: where a
// tensor lives (GpuPlacement, filled by a framework's GPU kernel) and the
// backend that performs responses on GPU tensors (GpuBackend). The CUDA
// variant implements these in cc/common/gpu/ and cc/common/nccl/; the CPU
// variant links cc/common/gpu_backend_none.cc (no backend, nothing built).
//
//   // a GPU kernel, on the framework's thread:
//   entry.gpu.device = ordinal;
//   entry.gpu.stream = framework_stream;            // a cudaStream_t
//   RecordReadyEvent(ordinal, framework_stream, &entry.gpu.ready);
//   Enqueue(std::move(entry));
#ifndef TFHVD_COMMON_GPU_BACKEND_H_
#define TFHVD_COMMON_GPU_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "cc/common/common.h"

namespace tfhvd {

struct Parameters;
struct Response;
struct TensorTableEntry;
struct Topology;
class Transport;

// An event recorded on a device stream (a cudaEvent_t in the CUDA variant).
class GpuEvent {
 public:
  virtual ~GpuEvent() = default;
};

// Where a tensor's input and output buffers live. device < 0: host memory.
struct GpuPlacement {
  int device = -1;                  // CUDA device ordinal
  void* stream = nullptr;           // the framework's stream (cudaStream_t) the tensor is on
  std::shared_ptr<GpuEvent> ready;  // recorded on `stream` after the input's producers
  bool on_gpu() const { return device >= 0; }
};

// Performs responses whose tensors are in GPU memory. Only the background
// thread calls it, between Open and Close. Completing a GPU entry (its
// callback) happens after the framework's stream has been told to wait for the
// collective, so the framework's consumers run after it; the host never waits
// for the whole device.
class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  virtual Status Open(Transport* transport, const Topology& topology,
                      const Parameters& params) = 0;
  virtual void Close() = 0;
  // Whether the device backend (NCCL) runs response r. Decided from r alone
  // (the same on every rank) and the knobs, so every rank decides alike.
  virtual bool RunsOnDevice(const Response& r) const = 0;
  // Runs r on the device. Same contract as CollectiveOps::Perform: per-tensor
  // errors go to the callbacks; a returned error is fatal for the job.
  virtual Status Perform(const Response& r, std::vector<TensorTableEntry>& entries,
                         const std::vector<bool>& present) = 0;
  // Host staging for a GPU entry that runs on the CPU transport: copies its
  // input to host memory and rewires the entry (input, output,
  // allocate_output, callback) so that the CPU path works on host buffers and
  // the result is copied back to the device before the entry completes.
  virtual Status StageThroughHost(TensorTableEntry* entry) = 0;
};

// The GPU backend of this build, or nullptr in the CPU variant.
std::unique_ptr<GpuBackend> CreateGpuBackend();
// What this build was compiled with (hvd.cuda_built(), hvd.nccl_built()).
bool CudaBuilt();
bool NcclBuilt();
// Where the CUDA variant looks for libcudart.so.12 and libnccl.so.2 (loaded at the first
// GPU tensor, not linked) before the loader's path; nothing in the CPU variant.
void SetGpuLibraryDirs(std::vector<std::string> dirs);
// Loads them now (once per process): OK, or what was tried and what to install.
Status LoadGpuLibraries();
// Records an event on `stream` (a cudaStream_t of device `device`) that the
// background thread waits for before it reads the tensor. Called on the
// framework's thread. PRECONDITION in the CPU variant.
Status RecordReadyEvent(int device, void* stream, std::shared_ptr<GpuEvent>* event);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GPU_BACKEND_H_
