// Chrome-trace timeline (HOROVOD_TIMELINE, hvd.start_timeline): rank 0 writes
// per-tensor phases -- NEGOTIATE_<OP> with the ranks as they become ready,
// QUEUE, MEMCPY_IN_FUSION_BUFFER, the collective, MEMCPY_OUT_FUSION_BUFFER --
// one JSON event per line, flushed every cycle, so a killed job still leaves a
// readable trace (the closing bracket is written on stop).
#ifndef TFHVD_COMMON_TIMELINE_TIMELINE_H_
#define TFHVD_COMMON_TIMELINE_TIMELINE_H_

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "cc/common/common.h"

namespace tfhvd {

class Timeline {
 public:
  // Opens path for writing (truncating); false with *error if it cannot.
  bool Start(const std::string& path, bool mark_cycles, std::string* error);
  void Stop();
  bool active() const { return file_ != nullptr; }

  void NegotiateStart(const std::string& tensor, OpType op);
  void NegotiateRankReady(const std::string& tensor, int rank);
  // Ends negotiation and starts the QUEUE phase, which ends at QueueEnd.
  void NegotiateEnd(const std::string& tensor);
  void QueueEnd(const std::string& tensor);
  void ActivityStart(const std::string& tensor, const char* activity);
  // The collective's own phase carries what this rank sends into it, as
  // Horovod's timeline carries dtype and shape: "args": {"dtype", "bytes"}.
  // That is where a compressed tensor shows what crossed the wire.
  void ActivityStart(const std::string& tensor, const char* activity, DataType dtype,
                     int64_t bytes);
  void ActivityEnd(const std::string& tensor);
  void MarkCycle();
  void Flush();

 private:
  int TensorId(const std::string& tensor);  // writes the process_name record once
  void Event(const std::string& tensor, char phase, const char* name,
             const std::string& args = "");
  int64_t Now() const;

  std::mutex mutex_;
  std::FILE* file_ = nullptr;
  bool mark_cycles_ = false;
  std::chrono::steady_clock::time_point start_;
  std::unordered_map<std::string, int> ids_;
  std::unordered_set<std::string> queued_;
};

// The process-wide timeline, fed by rank 0's background thread.
Timeline& GlobalTimeline();

// HOROVOD_TIMELINE=DYNAMIC (any case): no timeline until hvd.start_timeline().
bool TimelineIsDynamic(const std::string& value);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_TIMELINE_TIMELINE_H_
