#include "cc/common/negotiation/tensor_queue.h"

namespace tfhvd {

void TensorQueue::AddLocked(TensorTableEntry entry) {
  entry.enqueued = std::chrono::steady_clock::now();
  std::deque<TensorTableEntry>& fifo = table_[entry.request.name];
  // Only the head of a name is negotiated; later ones wait for Take.
  if (fifo.empty()) new_requests_.push_back(entry.request);
  fifo.push_back(std::move(entry));
  ++entries_;
}

Status TensorQueue::Add(TensorTableEntry entry, bool wake) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return closed_status_;
  AddLocked(std::move(entry));
  if (wake) cv_.notify_one();
  return Status();
}

Status TensorQueue::AddGroup(std::vector<TensorTableEntry> entries, bool wake) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return closed_status_;
  for (auto& e : entries) AddLocked(std::move(e));
  if (wake) cv_.notify_one();
  return Status();
}

void TensorQueue::PopNewRequests(std::vector<Request>* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!new_requests_.empty()) {
    out->push_back(std::move(new_requests_.front()));
    new_requests_.pop_front();
  }
}

void TensorQueue::WaitForWork(std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout.count() <= 0) {
    notified_ = false;
    return;
  }
  cv_.wait_for(lock, timeout, [this] { return !new_requests_.empty() || notified_; });
  notified_ = false;
}

void TensorQueue::Notify() {
  std::lock_guard<std::mutex> lock(mutex_);
  notified_ = true;
  cv_.notify_one();
}

bool TensorQueue::Take(const std::string& name, TensorTableEntry* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = table_.find(name);
  if (it == table_.end()) return false;
  *out = std::move(it->second.front());
  it->second.pop_front();
  --entries_;
  if (it->second.empty()) {
    table_.erase(it);
  } else {
    new_requests_.push_back(it->second.front().request);  // the next one's turn
  }
  return true;
}

bool TensorQueue::Contains(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.count(name) > 0;
}

void TensorQueue::FailAll(const Status& status) {
  std::unordered_map<std::string, std::deque<TensorTableEntry>> table;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    table.swap(table_);
    new_requests_.clear();
    entries_ = 0;
    closed_ = true;
    closed_status_ = status;
  }
  for (auto& kv : table) {
    for (auto& e : kv.second) {
      if (e.callback) e.callback(status);
    }
  }
}

size_t TensorQueue::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_;
}

}  // namespace tfhvd
