// A link set: the links among a subset of the job's ranks. Member i of the
// set (a global rank) is rank i inside it, so any algorithm written against
// Links (cc/common/algorithms/) runs over a subset unchanged. The hierarchical
// collectives use two per rank (the ranks of its host; the ranks with its
// local rank on every host, algorithms/topology_links.h); a process set can
// use one for its own members.
//
// Transport::OpenLinkSet makes one: by default a view of the job's links
// (SubsetLinks below: Gloo's mesh and pairs reach every rank already); MPI
// gives a communicator of its own, with MPI_Allreduce over it.
//
//   std::unique_ptr<LinkSet> host;
//   Status s = transport->OpenLinkSet({4, 5, 6, 7}, &host);  // on ranks 4..7 only
//   s = ring.Run(*host, in, out, count, dtype, op);          // host->rank(): 0..3
#ifndef TFHVD_COMMON_TRANSPORT_LINK_SET_H_
#define TFHVD_COMMON_TRANSPORT_LINK_SET_H_

#include <memory>
#include <string>
#include <vector>

#include "cc/common/common.h"
#include "cc/common/transport/links.h"

namespace tfhvd {

class LinkSet : public Links {
 public:
  LinkSet(std::vector<int> members, int rank) : members_(std::move(members)), rank_(rank) {}

  // Global ranks of the members, in the order of their ranks in the set.
  const std::vector<int>& members() const { return members_; }
  int global_rank(int set_rank) const { return members_[static_cast<size_t>(set_rank)]; }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  // "ranks 0,2,5", for messages.
  std::string Describe() const;

  // A backend with a tuned allreduce over these ranks (MPI) says so here.
  virtual bool has_backend_allreduce() const { return false; }
  virtual Status BackendAllreduce(const void*, void*, int64_t, DataType, ReduceOp) {
    return Status::Precondition("this link set has no allreduce of its own");
  }

 protected:
  std::vector<int> members_;
  int rank_;
};

// Checks a member list: non-empty, distinct ranks in [0, job_size), and
// my_rank among them; *index is my_rank's place. The error names the problem.
Status FindMember(const std::vector<int>& members, int job_size, int my_rank, int* index);

// A link set over another Links (the job's): set ranks are translated to the
// parent's ranks, and errors name the parent's (global) ranks.
class SubsetLinks : public LinkSet {
 public:
  SubsetLinks(Links* parent, std::vector<int> members, int rank)
      : LinkSet(std::move(members), rank), parent_(parent) {}
  Status Send(int to, const void* data, size_t bytes) override;
  Status Recv(int from, void* data, size_t bytes) override;
  Status Exchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                  size_t recv_bytes) override;
  Status StartExchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                       size_t recv_bytes) override;
  Status FinishExchange() override { return parent_->FinishExchange(); }

 private:
  Status Peer(int set_rank, int* global) const;
  Links* parent_;
};

// A SubsetLinks over parent (whose rank()/size() are the job's), after
// FindMember's checks. Not collective: nothing is sent.
Status MakeSubsetLinks(Links* parent, const std::vector<int>& members,
                       std::unique_ptr<LinkSet>* out);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_TRANSPORT_LINK_SET_H_
