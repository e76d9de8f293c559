#include "cc/common/core/process_set_table.h"

#include <future>

#include "cc/common/transport/link_collectives.h"

namespace tfhvd {

namespace {

std::string SetsText(const std::vector<std::vector<int>>& sets) {
  std::string out = "[";
  for (size_t i = 0; i < sets.size(); ++i) out += (i ? ", [" : "[") + RankListText(sets[i]) + "]";
  return out + "]";
}

std::string WordsText(const std::vector<int32_t>& words) {
  return "[" + RankListText(std::vector<int>(words.begin(), words.end())) + "]";
}

// INVALID_ARGUMENT naming what differs when ranks passed different words.
Status SameOnEveryRank(const char* what, const std::vector<std::vector<int32_t>>& all) {
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      return Status::InvalidArgument(
          std::string(what) + " must be called by every rank with the same arguments, in the "
          "same order: " + WordsText(all[0]) + " on rank 0 but " + WordsText(all[r]) +
          " on rank " + std::to_string(r) + "; nothing was changed");
    }
  }
  return Status();
}

using ApplyWords = std::function<Status(const std::vector<std::vector<int32_t>>&)>;

// A registration step every rank takes at the same point of the global
// negotiation: an allgather named `name` of this rank's int32 words; then
// `apply` runs on the background thread with every rank's words (in rank
// order), the same on every rank. Blocks the caller until it has run.
Status AllgatherAndApply(const EnqueueGlobal& enqueue, int size, const std::string& name,
                         std::vector<int32_t> words, ApplyWords apply) {
  struct Shared {
    std::vector<int32_t> in, out;
    std::promise<Status> done;
  };
  auto shared = std::make_shared<Shared>();
  shared->in = std::move(words);
  shared->in.insert(shared->in.begin(), static_cast<int32_t>(shared->in.size()));
  TensorTableEntry e;
  e.request.type = OpType::ALLGATHER;
  e.request.dtype = DataType::INT32;
  e.request.name = name;
  e.request.shape = {static_cast<int64_t>(shared->in.size())};
  e.input = shared->in.data();
  e.allocate_output = [shared](const Shape& shape, void** data) {
    shared->out.resize(static_cast<size_t>(NumElements(shape)) + 1);
    *data = shared->out.data();
    return Status();
  };
  e.callback = [shared, apply, size](const Status& s) {
    if (!s.ok()) {
      shared->done.set_value(s);
      return;
    }
    // Every rank's words, each preceded by their count.
    std::vector<std::vector<int32_t>> all;
    size_t at = 0;
    for (int r = 0; r < size; ++r) {
      size_t n = static_cast<size_t>(shared->out[at]);
      all.emplace_back(shared->out.begin() + static_cast<long>(at + 1),
                       shared->out.begin() + static_cast<long>(at + 1 + n));
      at += n + 1;
    }
    shared->done.set_value(apply(all));
  };
  std::future<Status> result = shared->done.get_future();
  Status s = enqueue(std::move(e));
  if (!s.ok()) return s;
  return result.get();
}

}  // namespace

void ProcessSetTable::Reset(std::shared_ptr<ProcessSet> global, const SetContext& context) {
  std::lock_guard<std::mutex> lock(mutex_);
  sets_.clear();
  next_id_ = 1;
  context_ = context;
  host_keys_.clear();
  sets_[0] = std::move(global);
}

void ProcessSetTable::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  sets_.clear();
}

Status ProcessSetTable::OpenStatic(const std::vector<std::vector<int>>& requested,
                                   const std::string& host_key) {
  Links& links = *context_.transport->links();
  Status s = AllgatherStrings(links, host_key, &host_keys_);
  if (!s.ok()) return s;
  std::vector<std::string> all;
  s = AllgatherStrings(links, SetsText(requested), &all);
  if (!s.ok()) return s;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      return Status::InvalidArgument(
          "hvd.init(process_sets=...) must list the same process sets on every rank: " + all[0] +
          " on rank 0 but " + all[r] + " on rank " + std::to_string(r));
    }
  }
  for (const auto& ranks : requested) {
    std::vector<int> sorted;
    s = ValidateProcessSetRanks(ranks, context_.topology.size, &sorted);
    if (!s.ok()) return s;
    if (FindByRanks(sorted) >= 0) continue;  // a duplicate: Python reports it
    int32_t id;
    s = Register(std::move(sorted), &id);
    if (!s.ok()) return s;
  }
  return Status();
}

std::shared_ptr<ProcessSet> ProcessSetTable::Find(int32_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sets_.find(id);
  return it == sets_.end() ? nullptr : it->second;
}

int32_t ProcessSetTable::FindByRanks(const std::vector<int>& ranks) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& kv : sets_)
    if (kv.second->ranks == ranks) return kv.first;
  return -1;
}

std::vector<std::shared_ptr<ProcessSet>> ProcessSetTable::MemberSets(bool* several) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<ProcessSet>> out;
  for (const auto& kv : sets_)
    if (kv.second->member()) out.push_back(kv.second);
  *several = sets_.size() > 1;
  return out;
}

std::map<int32_t, std::shared_ptr<ProcessSet>> ProcessSetTable::Snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sets_;
}

std::vector<std::pair<int32_t, std::vector<int>>> ProcessSetTable::Ranks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::pair<int32_t, std::vector<int>>> out;
  for (const auto& kv : sets_) out.emplace_back(kv.first, kv.second->ranks);
  return out;
}

Status ProcessSetTable::Register(std::vector<int> ranks, int32_t* id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    *id = next_id_++;
  }
  std::unique_ptr<ProcessSet> created;
  Status s = ProcessSet::Create(*id, std::move(ranks), context_.transport, context_.topology,
                                host_keys_, context_.params, &created);
  std::shared_ptr<ProcessSet> set(std::move(created));
  if (s.ok()) s = set->Open();
  if (!s.ok()) return Status(s.code(), set->label + ": " + s.message());
  std::lock_guard<std::mutex> lock(mutex_);
  sets_[*id] = std::move(set);
  return Status();
}

Status ProcessSetTable::AddEverywhere(const std::vector<int>& ranks, const EnqueueGlobal& enqueue,
                                      int32_t* id) {
  std::vector<int> sorted;
  Status s = ValidateProcessSetRanks(ranks, context_.topology.size, &sorted);
  if (!s.ok()) return s;
  // Every rank has the same table, so every rank decides this alike.
  if (FindByRanks(sorted) >= 0) {
    *id = -1;
    return Status();
  }
  int32_t new_id = -1;
  s = AllgatherAndApply(
      enqueue, context_.topology.size, "process_set.add",
      std::vector<int32_t>(sorted.begin(), sorted.end()),
      [this, &new_id, sorted](const std::vector<std::vector<int32_t>>& all) {
        Status same = SameOnEveryRank("hvd.add_process_set", all);
        if (!same.ok()) return same;
        if (FindByRanks(sorted) >= 0) {
          return Status::InvalidArgument("hvd.add_process_set: a process set of ranks [" +
                                         RankListText(sorted) + "] was added meanwhile");
        }
        return Register(sorted, &new_id);
      });
  if (!s.ok()) return s;
  *id = new_id;
  return Status();
}

Status ProcessSetTable::RemoveEverywhere(int32_t id, const EnqueueGlobal& enqueue,
                                         bool* removed) {
  *removed = false;
  if (id == 0 || !Find(id)) return Status();
  Status s = AllgatherAndApply(
      enqueue, context_.topology.size, "process_set.remove", {id},
      [this, id](const std::vector<std::vector<int32_t>>& all) {
        Status same = SameOnEveryRank("hvd.remove_process_set", all);
        if (!same.ok()) return same;
        std::shared_ptr<ProcessSet> set;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          auto it = sets_.find(id);
          if (it == sets_.end()) return Status();
          set = it->second;
          sets_.erase(it);
        }
        set->removed = true;
        if (set->member()) {
          set->queue->FailAll(Status::Aborted(set->label +
                                              " was removed (hvd.remove_process_set) before "
                                              "this collective ran"));
        }
        set->Close();
        return Status();
      });
  if (!s.ok()) return s;
  *removed = true;
  return Status();
}

}  // namespace tfhvd
