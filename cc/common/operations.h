// The core's public entry points: start and stop the background thread, query
// the topology, and hand tensors to it. Framework adapters call only these.
// A thin facade over the core's parts (cc/common/core/): the background loop,
// the process-set table, the transport choice and fault blame.
#ifndef TFHVD_COMMON_OPERATIONS_H_
#define TFHVD_COMMON_OPERATIONS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cc/common/core/background_loop.h"
#include "cc/common/core/transport_choice.h"
#include "cc/common/negotiation/message.h"
#include "cc/common/negotiation/tensor_queue.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {

// Starts the background thread, which selects and connects the transport.
// Blocks until that is done; idempotent while running. process_sets: the
// static process sets (global ranks), the same list on every rank; they get
// ids 1, 2, ... in order (an entry equal to an earlier one or to the global
// set gets that set's id).
// comm: hvd.init(comm=...) (core/transport_choice.h).
Status Initialize(const std::vector<std::vector<int>>& process_sets = {},
                  const JobCommunicator& comm = JobCommunicator());
// Asks every rank to shut down, completes pending ops with an error, joins
// the background thread. The other ranks' errors say whether this rank
// called hvd.shutdown() or is exiting (`exiting`: called at process exit).
void Shutdown(bool exiting = false);
bool IsInitialized();
// True from a successful Initialize() until this process calls Shutdown(),
// also after the core stopped because another rank exited.
bool TopologyKnown();
// FAILED_PRECONDITION unless initialized (and not shut down).
Status CheckInitialized();
Topology GetTopology();
const char* TransportName();  // "gloo", "mpi" or "local"

// Timeline control at run time (rank 0 writes; other ranks ignore).
Status StartTimeline(const std::string& path, bool mark_cycles);
Status StopTimeline();
// MPI job whose MPI provides MPI_THREAD_MULTIPLE (HOROVOD_MPI_THREADS_DISABLE).
bool MpiThreadsSupported();
// The MPI library (loaded at run time, never linked): SetMpiSearchDirs adds the Python
// environment's lib/ to where it is looked for; MpiAvailable loads it (once per process,
// HOROVOD_MPI_LIBRARY's choice) and is OK or says every place tried; MpiLibraryFound is
// its path and version, "" before a load.
void SetMpiSearchDirs(std::vector<std::string> dirs);
Status MpiAvailable();
// The folders where the CUDA variant looks for libcudart.so.12 and libnccl.so.2 (the
// nvidia-* wheels' lib/), loaded at the first GPU tensor.
void SetGpuSearchDirs(std::vector<std::string> dirs);
Status GpuLibrariesAvailable();
std::string MpiLibraryFound();
// The CPU the background thread is pinned to (HOROVOD_THREAD_AFFINITY), or -1.
int BackgroundThreadCpu();

// Autotune (HOROVOD_AUTOTUNE): the values this rank switched to
// (core/background_loop.h). Cleared at init.
std::vector<AutotuneRecord> AutotuneHistory();

// Hands one tensor to the background thread. On error the callback is NOT
// called; the caller completes the op with the returned status.
// process_set_id: the set whose members run it (0: every rank); a broadcast's
// root_rank is a global rank, translated here.
Status Enqueue(TensorTableEntry entry, int32_t process_set_id = 0);
// Hands the tensors of one group (grouped allreduce) to the background thread
// at once under the group id `group` (the grouped op's name, the same on every
// rank); they are negotiated and performed together, all or nothing. Each
// entry's request.name must be set; the group fields are filled here. On
// error no callback is called and nothing was queued.
Status EnqueueGroup(const std::string& group, std::vector<TensorTableEntry> entries,
                    int32_t process_set_id = 0);

// Process sets (process_set.h). The registered sets by id, with their ranks.
std::vector<std::pair<int32_t, std::vector<int>>> ProcessSetRanks();
// This rank's view of set `id`: *member, and (members) the topology within it.
// INVALID_ARGUMENT when no such set is registered.
Status ProcessSetTopology(int32_t id, Topology* topology, bool* member);
// Collective over all ranks, in the same order on each (HOROVOD_DYNAMIC_PROCESS_SETS=1):
// registers a set of `ranks` and returns its id; *id = -1 when a set of these
// ranks exists already (nothing happens then). Ranks that pass different
// lists all get INVALID_ARGUMENT naming them.
Status AddProcessSet(const std::vector<int>& ranks, int32_t* id);
// Collective like AddProcessSet: removes set `id` (its pending collectives
// fail). *removed = false when no such set exists (or id is 0).
Status RemoveProcessSet(int32_t id, bool* removed);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_OPERATIONS_H_
