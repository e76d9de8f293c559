#include "cc/common/gpu/batched_copy.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "cc/common/gpu/runtime_compiler.h"

namespace tfhvd {

namespace {

// Row blockIdx.y of the grid copies range blockIdx.y; its blocks stride over the
// bytes in 16-byte words when both ends are 16-byte aligned, else in 4-byte
// words when they are 4-byte aligned (fused float tensors), then bytewise for
// what is left. Struct layouts match CopyRange / Batch below (LP64 on both sides).
const char kKernel[] = R"(
struct Range { unsigned char* dst; const unsigned char* src; unsigned long long bytes; };
struct Batch { Range r[64]; };
struct alignas(16) Word16 { unsigned long long lo, hi; };
typedef unsigned long long u64;

template <typename W>
__device__ u64 CopyWords(const Range& c, u64 start, u64 stride) {
  const u64 n = c.bytes / sizeof(W);
  const W* s = reinterpret_cast<const W*>(c.src);
  W* d = reinterpret_cast<W*>(c.dst);
  for (u64 i = start; i < n; i += stride) d[i] = s[i];
  return n * sizeof(W);
}

extern "C" __global__ void tfhvd_batched_copy(Batch b) {
  const Range c = b.r[blockIdx.y];
  const u64 start = u64(blockIdx.x) * blockDim.x + threadIdx.x;
  const u64 stride = u64(gridDim.x) * blockDim.x;
  const u64 ends = reinterpret_cast<u64>(c.src) | reinterpret_cast<u64>(c.dst);
  u64 done = 0;
  if ((ends & 15) == 0) done = CopyWords<Word16>(c, start, stride);
  else if ((ends & 3) == 0) done = CopyWords<unsigned int>(c, start, stride);
  for (u64 i = done + start; i < c.bytes; i += stride) c.dst[i] = c.src[i];
}
)";

struct Batch {
  CopyRange r[BatchedCopy::kMaxRanges];
};
static_assert(sizeof(CopyRange) == 24 && sizeof(Batch) <= 4096, "kernel parameter layout");
static_assert(BatchedCopy::kMaxRanges == 64, "the kernel's Batch holds 64 ranges");

// Blocks per range: enough for the largest to have ~4 words of 16 bytes per
// thread, at most 256 (with up to 64 rows, 16384 blocks: the GPU is full).
unsigned int BlocksPerRange(size_t largest) {
  const size_t per_block = static_cast<size_t>(BatchedCopy::kThreads) * 16 * 4;
  const size_t blocks = (largest + per_block - 1) / per_block;
  return static_cast<unsigned int>(std::min<size_t>(256, std::max<size_t>(1, blocks)));
}

// The driver's module API, reached through the runtime (cudaGetDriverEntryPointByVersion,
// CUDA 12.5+), so the library links no libcuda; the runtime's own cudaLibrary API
// is newer than the CUDA 12.5 runtime it builds against.
struct DriverModuleApi {
  CUresult (*load)(CUmodule*, const void*);
  CUresult (*function)(CUfunction*, CUmodule, const char*);
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                     unsigned, CUstream, void**, void**);
};

template <typename F>
Status Entry(const char* symbol, F* out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
    return Status::Unknown(std::string("the CUDA driver offers no ") + symbol + ": " +
                           cudaGetErrorString(e));
  }
  *out = reinterpret_cast<F>(fn);
  return Status();
}

Status LoadApi(DriverModuleApi* api) {
  Status s = Entry("cuModuleLoadData", &api->load);
  if (s.ok()) s = Entry("cuModuleGetFunction", &api->function);
  if (s.ok()) s = Entry("cuLaunchKernel", &api->launch);
  return s;
}

std::string DriverError(const char* call, CUresult r) {
  return std::string(call) + " of the batched-copy kernel failed (CUDA driver error " +
         std::to_string(static_cast<int>(r)) + "; a driver older than NVRTC " +
         RuntimeCompilerPath() + " cannot load its PTX)";
}

}  // namespace

const std::string& BatchedCopy::Source() {
  static const std::string* source = new std::string(kKernel);
  return *source;
}

Status BatchedCopy::Get(int device, const BatchedCopy** out) {
  // The PTX and the driver's entry points once per process; a module per device
  // (loaded into that device's primary context, as the runtime uses it).
  static std::mutex mu;
  static Status* compiled = nullptr;
  static std::string* ptx = nullptr;
  static DriverModuleApi api;
  static std::map<int, std::pair<Status, BatchedCopy*>>* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (compiled == nullptr) {
    ptx = new std::string;
    compiled = new Status(CompileToPtx(Source(), "tfhvd_batched_copy.cu", ptx));
    if (compiled->ok()) *compiled = LoadApi(&api);
    loaded = new std::map<int, std::pair<Status, BatchedCopy*>>;
  }
  *out = nullptr;
  if (!compiled->ok()) return *compiled;
  auto it = loaded->find(device);
  if (it == loaded->end()) {
    Status s;
    BatchedCopy* copier = nullptr;
    cudaError_t e = cudaSetDevice(device);  // makes its primary context current
    if (e != cudaSuccess) s = Status::Unknown(std::string("cudaSetDevice: ") + cudaGetErrorString(e));
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    CUresult r = CUDA_SUCCESS;
    if (s.ok() && (r = api.load(&module, ptx->c_str())) != CUDA_SUCCESS) {
      s = Status::Unknown(DriverError("cuModuleLoadData", r));
    }
    if (s.ok() && (r = api.function(&function, module, "tfhvd_batched_copy")) != CUDA_SUCCESS) {
      s = Status::Unknown(DriverError("cuModuleGetFunction", r));
    }
    if (s.ok()) copier = new BatchedCopy(function, api.launch);
    it = loaded->emplace(device, std::make_pair(s, copier)).first;
  }
  *out = it->second.second;
  return it->second.first;
}

Status BatchedCopy::Run(const std::vector<CopyRange>& ranges, cudaStream_t stream) const {
  Batch batch;
  int n = 0;
  size_t largest = 0;
  auto launch = [&]() -> Status {
    if (n == 0) return Status();
    void* args[] = {&batch};
    CUresult r = launch_(function_, BlocksPerRange(largest), static_cast<unsigned>(n), 1,
                         kThreads, 1, 1, 0, stream, args, nullptr);
    n = 0;
    largest = 0;
    if (r == CUDA_SUCCESS) return Status();
    return Status::Unknown("cuLaunchKernel of the batched-copy kernel failed (CUDA driver error " +
                           std::to_string(static_cast<int>(r)) + ")");
  };
  for (const CopyRange& r : ranges) {
    if (r.bytes == 0 || r.dst == r.src) continue;
    batch.r[n++] = r;
    largest = std::max(largest, r.bytes);
    if (n == kMaxRanges) {
      Status s = launch();
      if (!s.ok()) return s;
    }
  }
  return launch();
}

}  // namespace tfhvd
