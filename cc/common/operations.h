// The core's public entry points: start and stop the background thread, query
// the topology, and hand tensors to it. Framework adapters call only these.
#ifndef TFHVD_COMMON_OPERATIONS_H_
#define TFHVD_COMMON_OPERATIONS_H_

#include <string>
#include <vector>

#include "cc/common/tensor_queue.h"
#include "cc/common/transport.h"

namespace tfhvd {

// Starts the background thread, which selects and connects the transport.
// Blocks until that is done; idempotent while running.
Status Initialize();
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
// HOROVOD_TIMELINE=DYNAMIC (any case): no timeline until StartTimeline.
bool TimelineIsDynamic(const std::string& value);
// MPI job whose MPI provides MPI_THREAD_MULTIPLE (HOROVOD_MPI_THREADS_DISABLE).
bool MpiThreadsSupported();
// The CPU the background thread is pinned to (HOROVOD_THREAD_AFFINITY), or -1.
int BackgroundThreadCpu();

// Hands one tensor to the background thread. On error the callback is NOT
// called; the caller completes the op with the returned status.
Status Enqueue(TensorTableEntry entry);
// Hands the tensors of one group (grouped allreduce) to the background thread
// at once under the group id `group` (the grouped op's name, the same on every
// rank); they are negotiated and performed together, all or nothing. Each
// entry's request.name must be set; the group fields are filled here. On
// error no callback is called and nothing was queued.
Status EnqueueGroup(const std::string& group, std::vector<TensorTableEntry> entries);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_OPERATIONS_H_
