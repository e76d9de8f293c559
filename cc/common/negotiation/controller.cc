#include "cc/common/negotiation/controller.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "cc/common/negotiation/fusion.h"
#include "cc/common/logging.h"

namespace tfhvd {

namespace {
constexpr uint64_t kShutdownFlag = 1;
constexpr uint64_t kUncachedFlag = 2;
// Set while some rank has joined: cache hits then go through the coordinator,
// which knows which ranks to wait for.
constexpr uint64_t kJoinedFlag = 4;

void SetBit(std::vector<uint64_t>* words, size_t offset, uint32_t bit) {
  (*words)[offset + bit / 64] |= uint64_t{1} << (bit % 64);
}
bool GetBit(const std::vector<uint64_t>& words, size_t offset, uint32_t bit) {
  return (words[offset + bit / 64] >> (bit % 64)) & 1;
}
}  // namespace

Controller::Controller(Transport* transport, const Topology& topology,
                       const Parameters& params, TensorQueue* queue, const std::string& label,
                       const std::vector<int>& global_ranks)
    : transport_(transport),
      topology_(topology),
      params_(params),
      queue_(queue),
      cache_(static_cast<size_t>(params.cache_capacity)) {
  if (topology.rank == 0) {
    coordinator_.reset(new Coordinator(topology.size, params, label, global_ranks));
  }
}

Status Controller::ComputeResponseList(Leaving leaving, ResponseList* out, bool* paused) {
  out->responses.clear();
  out->shutdown = false;
  out->has_tuned = false;
  out->shutdown_called_by.clear();
  out->exiting.clear();
  if (paused != nullptr) *paused = false;
  if (!round_open_) {
    StartRound(leaving, &round_);
    round_open_ = true;
  }
  bool waiting = false;
  Status s = bit_exchange_
                 ? bit_exchange_(round_.bits.data(), round_.bits.size(), paused != nullptr,
                                 &waiting)
                 : transport_->BitwiseOr(round_.bits.data(), round_.bits.size());
  if (s.ok() && waiting) {
    *paused = true;
    return Status();
  }
  round_open_ = false;
  if (!s.ok()) return s;
  return FinishRound(&round_, out);
}

void Controller::StartRound(Leaving leaving, Round* round) {
  std::vector<Request> fresh;
  queue_->PopNewRequests(&fresh);
  const auto now = round->now = std::chrono::steady_clock::now();
  std::vector<Waiting> candidates;
  candidates.swap(waiting_hits_);
  for (auto& q : fresh) candidates.push_back({std::move(q), now});

  // Sort requests: cache hits wait for the bit exchange; everything else goes
  // to the coordinator. A hit that waited past the stall warning time is
  // invalidated so that the coordinator (which names missing ranks) sees it.
  const size_t words = round->words = cache_.words();
  // flags | invalid | not-hit | ranks that called hvd.shutdown() | ranks exiting
  const size_t rank_words = (static_cast<size_t>(topology_.size) + 63) / 64;
  const size_t called_at = round->called_at = 1 + 2 * words;
  const size_t exiting_at = round->exiting_at = called_at + rank_words;
  std::vector<uint64_t>& bits = round->bits;
  bits.assign(exiting_at + rank_words, 0);
  for (size_t i = 0; i < words; ++i) bits[1 + words + i] = ~uint64_t{0};
  std::vector<Request>& uncached = round->uncached;
  std::vector<std::pair<Waiting, uint32_t>>& hits = round->hits;
  uncached.clear();  // the vectors keep their capacity from round to round
  hits.clear();
  double stale_s = params_.stall_check ? params_.stall_warning_s : 1e30;
  if (params_.stall_check && params_.stall_shutdown_s > 0) {
    stale_s = std::min(stale_s, params_.stall_shutdown_s);
  }
  std::vector<ResponseCache::State> states(candidates.size(), ResponseCache::State::MISS);
  std::vector<uint32_t> slot(candidates.size(), 0);
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Waiting& w = candidates[i];
    if (cache_.enabled() && w.request.type != OpType::JOIN &&
        w.request.type != OpType::BARRIER) {
      states[i] = cache_.Lookup(w.request, &slot[i]);
    }
    bool stale = std::chrono::duration<double>(now - w.since).count() > stale_s;
    if (states[i] == ResponseCache::State::HIT && stale) states[i] = ResponseCache::State::INVALID;
  }
  // A group is a cache hit only as a whole: one member that is not (changed,
  // new, stale) sends the whole group to the coordinator and invalidates the
  // members' slots on every rank.
  std::unordered_map<std::string, int> group_hits, group_seen;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Request& q = candidates[i].request;
    if (q.group.empty()) continue;
    ++group_seen[q.group];
    group_hits[q.group] += states[i] == ResponseCache::State::HIT;
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Request& q = candidates[i].request;
    if (!q.group.empty() && states[i] == ResponseCache::State::HIT &&
        (group_hits[q.group] != group_seen[q.group] || group_seen[q.group] < q.group_size)) {
      states[i] = ResponseCache::State::INVALID;
    }
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (states[i] == ResponseCache::State::HIT) {
      hits.emplace_back(std::move(candidates[i]), slot[i]);
      bits[1 + words + slot[i] / 64] &= ~(uint64_t{1} << (slot[i] % 64));
    } else {
      if (states[i] != ResponseCache::State::MISS) SetBit(&bits, 1, slot[i]);
      uncached.push_back(std::move(candidates[i].request));
    }
  }
  if (leaving != Leaving::NO) {
    bits[0] |= kShutdownFlag;
    SetBit(&bits, leaving == Leaving::EXITING ? exiting_at : called_at,
           static_cast<uint32_t>(topology_.rank));
  }
  for (const auto& q : uncached) joined_ |= q.type == OpType::JOIN;
  if (!uncached.empty()) bits[0] |= kUncachedFlag;
  if (joined_) bits[0] |= kJoinedFlag;
  // The coordinator forces a gather about once a second while tensors wait,
  // so that the stall inspector runs even when no rank sends anything new.
  if (coordinator_ && params_.stall_check && coordinator_->HasPending() &&
      now - last_stall_round_ > std::chrono::seconds(1)) {
    bits[0] |= kUncachedFlag;
    last_stall_round_ = now;
  }
  // New autotune values travel in the coordinator's response list.
  if (coordinator_ && tuning_pending_) bits[0] |= kUncachedFlag;
}

Status Controller::FinishRound(Round* round, ResponseList* out) {
  const size_t words = round->words, called_at = round->called_at, exiting_at = round->exiting_at;
  const auto now = round->now;
  std::vector<uint64_t>& bits = round->bits;
  std::vector<Request>& uncached = round->uncached;
  std::vector<std::pair<Waiting, uint32_t>>& hits = round->hits;
  Status s;
  if (bits[0] & kShutdownFlag) {
    out->shutdown = true;
    for (int r = 0; r < topology_.size; ++r) {
      if (GetBit(bits, called_at, static_cast<uint32_t>(r))) out->shutdown_called_by.push_back(r);
      if (GetBit(bits, exiting_at, static_cast<uint32_t>(r))) out->exiting.push_back(r);
    }
    return Status();
  }

  // Apply invalidations everywhere, then collect the bits hit on every rank.
  for (size_t w = 0; w < words; ++w) {
    for (uint64_t word = bits[1 + w]; word != 0; word &= word - 1) {
      cache_.Erase(static_cast<uint32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(word))));
    }
  }
  std::vector<std::pair<Waiting, uint32_t>> common;
  const bool someone_joined = (bits[0] & kJoinedFlag) != 0;
  for (auto& h : hits) {
    if (GetBit(bits, 1, h.second) || someone_joined) {
      uncached.push_back(std::move(h.first.request));  // invalidated meanwhile
    } else if (!GetBit(bits, 1 + words, h.second)) {
      common.push_back(std::move(h));
    } else {
      waiting_hits_.push_back(std::move(h.first));
    }
  }
  std::vector<uint32_t> ordered = OrderCachedHits(&common);
  std::vector<Response> cached;
  for (uint32_t bit : ordered) {
    cached.push_back(cache_.Get(bit));
    cache_.Touch(bit);
  }
  out->responses = FuseResponses(std::move(cached), params_.fusion_threshold_bytes,
                                 params_.disable_group_fusion);

  if (bits[0] & (kUncachedFlag | kJoinedFlag)) {
    RequestList mine;
    mine.requests = std::move(uncached);
    for (auto& q : mine.requests) q.rank = topology_.rank;
    std::vector<std::string> all;
    s = transport_->GatherBytes(SerializeRequestList(mine), &all);
    if (!s.ok()) return s;
    std::string encoded;
    if (coordinator_) {
      for (const auto& bytes : all) {
        RequestList list;
        if (!ParseRequestList(bytes, &list)) {
          return Status::Unknown("corrupt request list received by the coordinator");
        }
        coordinator_->Add(list);
      }
      ResponseList negotiated;
      negotiated.responses = FuseResponses(coordinator_->TakeReadyResponses(&negotiated.shutdown),
                                           params_.fusion_threshold_bytes,
                                           params_.disable_group_fusion);
      if (tuning_pending_ && !negotiated.shutdown) {
        negotiated.has_tuned = true;
        negotiated.tuned = tuning_;
        tuning_pending_ = false;
      }
      encoded = SerializeResponseList(negotiated);
    }
    s = transport_->BroadcastBytes(&encoded, 0);
    if (!s.ok()) return s;
    ResponseList negotiated;
    if (!ParseResponseList(encoded, &negotiated)) {
      return Status::Unknown("corrupt response list received from the coordinator");
    }
    // The coordinator ended the job (stall shutdown): every rank stops in this
    // round with its error, which fails all the collectives it has pending.
    if (negotiated.shutdown) {
      if (negotiated.responses.empty()) return Status::Aborted("the coordinator ended the job");
      const Response& why = negotiated.responses.front();
      return Status(static_cast<Status::Code>(why.error_code), why.error);
    }
    for (auto& r : negotiated.responses) {
      if (r.type == OpType::JOIN && r.kind == Response::OPERATION) joined_ = false;
      out->responses.push_back(std::move(r));
    }
    // Every rank switches here, after this round's fusion decisions.
    if (negotiated.has_tuned) {
      ApplyTuning(negotiated.tuned);
      out->has_tuned = true;
      out->tuned = negotiated.tuned;
    }
  } else if (!uncached.empty()) {
    // Only possible for requests orphaned by an invalidation this round when no
    // rank flagged uncached work: send them next round.
    for (auto& q : uncached) waiting_hits_.push_back({std::move(q), now});
  }
  return Status();
}

void Controller::ProposeTuning(const TunedParameters& values) {
  tuning_ = values;
  tuning_pending_ = true;
}

void Controller::ApplyTuning(const TunedParameters& values) {
  params_.fusion_threshold_bytes = values.fusion_threshold_bytes;
  params_.cycle_time_ms = values.cycle_time_ms;
  if (values.response_cache != cache_.enabled()) {
    // Every rank switches in the same round, so the caches stay alike: a
    // fresh one (or none). Hits waiting for other ranks are looked up again
    // next round, and go to the coordinator when they miss.
    size_t capacity = values.response_cache && params_.cache_capacity > 0
                          ? static_cast<size_t>(params_.cache_capacity)
                          : 0;
    cache_ = ResponseCache(capacity);
  }
}

std::vector<uint32_t> Controller::OrderCachedHits(
    std::vector<std::pair<Waiting, uint32_t>>* common) {
  // The hit set is the same on every rank, and so is every decision below.
  std::unordered_map<std::string, std::vector<uint32_t>> groups;
  for (const auto& h : *common) {
    const Request& q = cache_.GetRequest(h.second);
    if (!q.group.empty()) groups[q.group].push_back(h.second);
  }
  std::vector<uint32_t> bits;
  for (auto& h : *common) {
    const Request& q = cache_.GetRequest(h.second);
    if (!q.group.empty() && groups[q.group].size() < static_cast<size_t>(q.group_size)) {
      waiting_hits_.push_back(std::move(h.first));  // the rest of its group is not here yet
    } else {
      bits.push_back(h.second);
    }
  }
  std::sort(bits.begin(), bits.end());
  // Each group's members next to each other, at the place of its first one.
  std::vector<uint32_t> ordered;
  std::unordered_map<std::string, bool> placed;
  for (uint32_t bit : bits) {
    const Request& q = cache_.GetRequest(bit);
    if (q.group.empty()) {
      ordered.push_back(bit);
    } else if (!placed[q.group]) {
      placed[q.group] = true;
      std::vector<uint32_t> members = groups[q.group];
      std::sort(members.begin(), members.end());
      ordered.insert(ordered.end(), members.begin(), members.end());
    }
  }
  return ordered;
}

void Controller::CacheResponse(const Response& response,
                               const std::vector<Request>& own_requests) {
  if (!cache_.enabled() || !response.cacheable || response.kind != Response::OPERATION) return;
  for (size_t i = 0; i < response.names.size(); ++i) {
    cache_.Put(SingleTensorResponse(response, i, topology_.size), own_requests[i]);
  }
}

}  // namespace tfhvd
