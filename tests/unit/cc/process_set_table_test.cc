// The process-set table (core/process_set_table.h) with threads as ranks over
// in-memory links: static sets at start-up, lookups, and the collective add and
// remove (their allgather runs over the links instead of the negotiation).
// GoogleTest: bazel test //:process_set_table_test
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "cc/common/core/process_set_table.h"
#include "tests/unit/cc/thread_links.h"
#include "tests/unit/cc/thread_transport.h"

using namespace tfhvd;
using tfhvd::testing::OnThreadRanks;
using tfhvd::testing::ThreadTransport;

namespace {

// The global negotiation's allgather of int32 words, done at once over the links.
EnqueueGlobal AllgatherOver(Links* links) {
  return [links](TensorTableEntry e) {
    const size_t bytes = static_cast<size_t>(e.request.shape[0]) * sizeof(int32_t);
    std::vector<std::string> all;
    Status s = AllgatherStrings(*links, std::string(static_cast<const char*>(e.input), bytes), &all);
    if (!s.ok()) return s;
    std::string joined;
    for (const auto& part : all) joined += part;
    void* out = nullptr;
    s = e.allocate_output({static_cast<int64_t>(joined.size() / sizeof(int32_t))}, &out);
    if (!s.ok()) return s;
    std::memcpy(out, joined.data(), joined.size());
    e.callback(Status());
    return Status();
  };
}

// Runs body(table, links) on 3 thread ranks, each with a started table.
void OnThreeRanks(const std::vector<std::vector<int>>& static_sets,
                  const std::function<void(ProcessSetTable&, Links&)>& body) {
  OnThreadRanks(3, [&](Links& links) {
    ThreadTransport transport(&links);
    Topology topology;
    ASSERT_TRUE(transport.Init(&topology).ok());
    Parameters params;
    TensorQueue queue;
    ProcessSetTable table;
    table.Reset(std::shared_ptr<ProcessSet>(
                    ProcessSet::Global(&transport, topology, &queue, params)),
                SetContext{&transport, topology, params});
    // Each rank its own host: no shared memory between the threads.
    Status s = table.OpenStatic(static_sets, "host" + std::to_string(links.rank()));
    ASSERT_TRUE(s.ok()) << s.message();
    body(table, links);
    for (auto& kv : table.Snapshot()) kv.second->Close();
  });
}

TEST(ProcessSetTable, StaticSetsGetIdsInOrderAndDuplicatesAreSkipped) {
  std::mutex m;
  std::vector<std::string> seen;
  OnThreeRanks({{2, 0}, {0, 2}, {1}}, [&](ProcessSetTable& table, Links& links) {
    const int r = links.rank();
    auto ranks = table.Ranks();
    ASSERT_EQ(ranks.size(), 3u);
    EXPECT_EQ(ranks[0], (std::pair<int32_t, std::vector<int>>{0, {0, 1, 2}}));
    EXPECT_EQ(ranks[1], (std::pair<int32_t, std::vector<int>>{1, {0, 2}}));
    EXPECT_EQ(ranks[2], (std::pair<int32_t, std::vector<int>>{2, {1}}));
    EXPECT_EQ(table.Find(1)->label, "process set 1 (ranks 0, 2)");
    EXPECT_EQ(table.Find(1)->member(), r != 1);
    EXPECT_EQ(table.FindByRanks({1}), 2);
    EXPECT_EQ(table.FindByRanks({0, 1}), -1);
    EXPECT_EQ(table.Find(7), nullptr);
    bool several = false;
    std::string ids;
    for (auto& set : table.MemberSets(&several)) ids += std::to_string(set->id);
    EXPECT_TRUE(several);
    std::lock_guard<std::mutex> lock(m);
    seen.push_back(std::to_string(r) + ":" + ids);
  });
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"0:01", "1:02", "2:01"}));
}

TEST(ProcessSetTable, StaticSetsMustBeTheSameOnEveryRank) {
  OnThreadRanks(2, [](Links& links) {
    ThreadTransport transport(&links);
    Topology topology;
    transport.Init(&topology);
    TensorQueue queue;
    ProcessSetTable table;
    table.Reset(std::shared_ptr<ProcessSet>(
                    ProcessSet::Global(&transport, topology, &queue, Parameters())),
                SetContext{&transport, topology, Parameters()});
    std::vector<std::vector<int>> mine = {{links.rank()}};
    Status s = table.OpenStatic(mine, "host" + std::to_string(links.rank()));
    EXPECT_EQ(s.code(), Status::INVALID_ARGUMENT);
    EXPECT_EQ(s.message(),
              "hvd.init(process_sets=...) must list the same process sets on every rank: [[0]] "
              "on rank 0 but [[1]] on rank 1");
  });
}

TEST(ProcessSetTable, AddAndRemoveEverywhere) {
  OnThreeRanks({}, [](ProcessSetTable& table, Links& links) {
    EnqueueGlobal enqueue = AllgatherOver(&links);
    int32_t id = 0;
    Status s = table.AddEverywhere({2, 1}, enqueue, &id);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(id, 1);
    EXPECT_EQ(table.Find(1)->ranks, (std::vector<int>{1, 2}));
    EXPECT_EQ(table.Find(1)->member(), links.rank() != 0);
    // A set of the same ranks exists: nothing happens, on every rank alike.
    EXPECT_TRUE(table.AddEverywhere({1, 2}, enqueue, &id).ok());
    EXPECT_EQ(id, -1);
    s = table.AddEverywhere(links.rank() == 0 ? std::vector<int>{0} : std::vector<int>{1, 0},
                            enqueue, &id);
    EXPECT_EQ(s.code(), Status::INVALID_ARGUMENT);
    EXPECT_EQ(s.message(),
              "hvd.add_process_set must be called by every rank with the same arguments, in the "
              "same order: [0] on rank 0 but [0, 1] on rank 1; nothing was changed");
    s = table.AddEverywhere({0, 5}, enqueue, &id);
    EXPECT_EQ(s.code(), Status::INVALID_ARGUMENT);
    bool removed = false;
    s = table.RemoveEverywhere(1, enqueue, &removed);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(removed);
    EXPECT_EQ(table.Find(1), nullptr);
    EXPECT_TRUE(table.RemoveEverywhere(1, enqueue, &removed).ok());
    EXPECT_FALSE(removed);
    EXPECT_TRUE(table.RemoveEverywhere(0, enqueue, &removed).ok());
    EXPECT_FALSE(removed);
    // Ids are never reused within a job.
    ASSERT_TRUE(table.AddEverywhere({0, 1}, enqueue, &id).ok());
    EXPECT_EQ(id, 2);
  });
}

}  // namespace
