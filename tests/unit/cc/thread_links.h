// Threads as ranks over in-memory links, for tests of code written against
// Links (cc/common/transport/links.h): a FIFO of whole messages per ordered pair of
// ranks; sends never block, receives wait for the next message.
//
//   OnThreadRanks(4, [](Links& links) { ... links.Send(1, p, n) ... });
#ifndef TFHVD_TESTS_UNIT_CC_THREAD_LINKS_H_
#define TFHVD_TESTS_UNIT_CC_THREAD_LINKS_H_

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cc/common/transport/links.h"

namespace tfhvd {
namespace testing {

class MessageWires {
 public:
  explicit MessageWires(int n) : n_(n), streams_(static_cast<size_t>(n * n)) {}
  void Put(int from, int to, const char* p, size_t k) {
    std::lock_guard<std::mutex> lock(m_);
    streams_[static_cast<size_t>(from * n_ + to)].emplace_back(p, k);
    cv_.notify_all();
  }
  void Take(int from, int to, char* p, size_t k) {
    std::unique_lock<std::mutex> lock(m_);
    auto& q = streams_[static_cast<size_t>(from * n_ + to)];
    cv_.wait(lock, [&] { return !q.empty(); });
    std::string m = std::move(q.front());
    q.pop_front();
    lock.unlock();
    if (m.size() != k) {
      std::fprintf(stderr, "rank %d sent %zu bytes to rank %d, which expected %zu\n", from,
                   m.size(), to, k);
      std::abort();
    }
    if (k > 0) std::memcpy(p, m.data(), k);
  }

 private:
  int n_;
  std::vector<std::deque<std::string>> streams_;
  std::mutex m_;
  std::condition_variable cv_;
};

// eager: StartExchange puts its message on the wire at once (as a socket
// takes it), FinishExchange takes the received one; otherwise Links' default
// (the whole exchange in FinishExchange: the send buffer is read as late as
// allowed).
class MessageLinks : public Links {
 public:
  MessageLinks(MessageWires* wires, int rank, int size, bool eager = false)
      : wires_(wires), rank_(rank), size_(size), eager_(eager) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status Send(int to, const void* data, size_t bytes) override {
    if (to == rank_ || to < 0 || to >= size_) return Status::InvalidArgument("bad peer");
    if (bytes > 0) wires_->Put(rank_, to, static_cast<const char*>(data), bytes);
    return Status();
  }
  Status Recv(int from, void* data, size_t bytes) override {
    if (from == rank_ || from < 0 || from >= size_) return Status::InvalidArgument("bad peer");
    if (bytes > 0) wires_->Take(from, rank_, static_cast<char*>(data), bytes);
    return Status();
  }
  Status Exchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                  size_t recv_bytes) override {
    Status s = Send(to, send, send_bytes);
    while (s.ok() && !receiving_.empty()) s = FinishExchange();
    return s.ok() ? Recv(from, recv, recv_bytes) : s;
  }
  Status StartExchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                       size_t recv_bytes) override {
    if (!eager_) return Links::StartExchange(to, send, send_bytes, from, recv, recv_bytes);
    if (receiving_.size() >= kMaxStarted) return TooManyStarted();
    Status s = Send(to, send, send_bytes);
    if (s.ok()) receiving_.push_back({from, recv, recv_bytes});
    return s;
  }
  Status FinishExchange() override {
    if (!eager_) return Links::FinishExchange();
    if (receiving_.empty()) return NothingStarted();
    Receiving r = receiving_.front();
    receiving_.pop_front();
    return Recv(r.from, r.data, r.bytes);
  }

 private:
  struct Receiving {
    int from;
    void* data;
    size_t bytes;
  };
  MessageWires* wires_;
  int rank_, size_;
  bool eager_;
  std::deque<Receiving> receiving_;  // eager: started exchanges' receives
};

// Runs body(links) on n threads, one per rank (eager: see MessageLinks).
inline void OnThreadRanks(int n, const std::function<void(Links&)>& body, bool eager = false) {
  MessageWires wires(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      MessageLinks links(&wires, r, n, eager);
      body(links);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace testing
}  // namespace tfhvd

#endif  // TFHVD_TESTS_UNIT_CC_THREAD_LINKS_H_
