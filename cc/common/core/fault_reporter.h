// Blame when the core stops: turns the error that ended the background loop
// into the one every pending op gets (naming the peer rank and where it runs,
// and the rank that failed first when the peer stopped because of a third
// one), and publishes a FaultRecord on every FaultChannel of the launcher.
//
//   FaultReporter blame(/*rank=*/0, {"node0", "node1"}, std::move(channels));
//   Status s = blame.Failed(Status::Unavailable("connection closed").WithPeer(1));
//   // s.message(): "connection closed (rank 1 (on node1))"; channels got
//   // "culprit=1\nkind=lost\nconnection closed (rank 1 (on node1))"
#ifndef TFHVD_COMMON_CORE_FAULT_REPORTER_H_
#define TFHVD_COMMON_CORE_FAULT_REPORTER_H_

#include <memory>
#include <string>
#include <vector>

#include "cc/common/common.h"
#include "cc/common/core/fault_record.h"
#include "cc/common/transport/fault_channel.h"
#include "cc/common/negotiation/message.h"

namespace tfhvd {

class FaultReporter {
 public:
  // hosts: every rank's host by global rank (may be empty: ranks are then
  // named without a host).
  FaultReporter(int rank, std::vector<std::string> hosts,
                std::vector<std::unique_ptr<FaultChannel>> channels);

  // "rank 2 (on node1)".
  std::string RankAt(int rank) const;
  // The error the loop stops with after `s` (a failed negotiation or
  // collective), reported to the launcher.
  Status Failed(const Status& s);
  // The error of every collective on a rank whose peers asked to shut down
  // (list.shutdown_called_by / list.exiting), reported to the launcher.
  Status LeftByOthers(const ResponseList& list);
  void Publish(const FaultRecord& record);

 private:
  int rank_;
  std::vector<std::string> hosts_;
  std::vector<std::unique_ptr<FaultChannel>> channels_;
};

// TF_HVD_FAULT_FILE, set by tfhvdrun --mpi's rank wrapper (MPI has no
// rendezvous store): the record is written aside, then renamed, so the
// launcher never reads half a record.
class FaultFileChannel : public FaultChannel {
 public:
  explicit FaultFileChannel(std::string path) : path_(std::move(path)) {}
  void Publish(const std::string& text) override;

 private:
  std::string path_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_CORE_FAULT_REPORTER_H_
