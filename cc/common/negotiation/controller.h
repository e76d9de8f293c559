// One negotiation round, run by every rank's background thread in lockstep:
// sort new requests into cache hits and uncached ones, exchange one bit vector
// (shutdown/uncached flags, invalidated and hit cache bits), gather uncached
// requests on the coordinator when any rank has some, and return the ordered
// list of operations every rank performs.
#ifndef TFHVD_COMMON_NEGOTIATION_CONTROLLER_H_
#define TFHVD_COMMON_NEGOTIATION_CONTROLLER_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cc/common/negotiation/coordinator.h"
#include "cc/common/negotiation/message.h"
#include "cc/common/parameters.h"
#include "cc/common/negotiation/response_cache.h"
#include "cc/common/negotiation/tensor_queue.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {

class Controller {
 public:
  // label and global_ranks name a process set in errors and stall warnings
  // (process_set.h); empty for the global set.
  Controller(Transport* transport, const Topology& topology, const Parameters& params,
             TensorQueue* queue, const std::string& label = "",
             const std::vector<int>& global_ranks = {});

  // How this rank asks to end the job in a round.
  enum class Leaving { NO = 0, SHUTDOWN_CALLED, EXITING };
  // Fills *out with the responses to perform now. out->shutdown is set when
  // any rank asked to shut down, and out->shutdown_called_by / exiting name
  // the ranks that did (so that the others' errors can name them).
  // With `paused`, the round waits for the peers only briefly (where its bit
  // exchange can): when they are late, *paused is set, out is empty and the
  // round stays open; the next call continues it (its `leaving` is not read:
  // this rank's bits went out already) from whichever thread makes it.
  Status ComputeResponseList(Leaving leaving, ResponseList* out, bool* paused = nullptr);
  // Records a performed response in the response cache (all ranks, same order).
  void CacheResponse(const Response& response, const std::vector<Request>& own_requests);
  // Coordinator only (autotune): send these values to every rank in the next
  // round's response list. Every rank applies the fusion threshold and the
  // response cache switch at the end of that round and reports the values in
  // ResponseList::tuned (the caller applies the rest).
  void ProposeTuning(const TunedParameters& values);
  // The round's bit vector through another channel than the transport (on
  // one host: shared memory, without a round trip through the kernel). Every
  // rank of the set must set the same kind of exchange before the first round.
  // bounded: return with *waiting set rather than wait long for the peers;
  // the next call gets the same words and continues the exchange.
  using BitExchange =
      std::function<Status(uint64_t* words, size_t n, bool bounded, bool* waiting)>;
  void SetBitExchange(BitExchange exchange) { bit_exchange_ = std::move(exchange); }

 private:
  struct Waiting {
    Request request;
    std::chrono::steady_clock::time_point since;
  };

  // A round between its start (requests sorted, bits made) and its end.
  struct Round {
    std::chrono::steady_clock::time_point now;
    size_t words = 0, called_at = 0, exiting_at = 0;  // the bit vector's layout
    std::vector<uint64_t> bits;
    std::vector<Request> uncached;
    std::vector<std::pair<Waiting, uint32_t>> hits;  // with their cache slots
  };
  void StartRound(Leaving leaving, Round* round);
  Status FinishRound(Round* round, ResponseList* out);

  // The cache hits every rank has, in the order every rank performs them:
  // by slot, each group's members together; a group not all here yet waits.
  std::vector<uint32_t> OrderCachedHits(std::vector<std::pair<Waiting, uint32_t>>* common);

  Transport* transport_;
  BitExchange bit_exchange_;  // empty: transport_->BitwiseOr
  Topology topology_;
  Parameters params_;
  TensorQueue* queue_;
  ResponseCache cache_;
  std::vector<Waiting> waiting_hits_;  // cache hits not yet hit on every rank
  bool joined_ = false;  // this rank sent a JOIN that has not completed
  std::unique_ptr<Coordinator> coordinator_;  // rank 0 only
  Round round_;              // the round in progress, reused from round to round
  bool round_open_ = false;  // round_ is paused (ComputeResponseList's `paused`)
  std::chrono::steady_clock::time_point last_stall_round_{};
  bool tuning_pending_ = false;  // coordinator: proposed values not sent yet
  TunedParameters tuning_;

  void ApplyTuning(const TunedParameters& values);
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_NEGOTIATION_CONTROLLER_H_
