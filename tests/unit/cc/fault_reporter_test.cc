// The fault report the launcher reads (FaultRecord's text, both ways) and the
// blame a stopping rank puts in it (FaultReporter), with a recording channel.
// GoogleTest: bazel test //:fault_reporter_test
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include <unistd.h>

#include "cc/common/core/fault_record.h"
#include "cc/common/core/fault_reporter.h"

using namespace tfhvd;

namespace {

// Remembers what was published; answers Read from `peers`.
class RecordingChannel : public FaultChannel {
 public:
  RecordingChannel(std::vector<std::string>* published, std::map<int, std::string> peers)
      : published_(published), peers_(std::move(peers)) {}
  void Publish(const std::string& text) override { published_->push_back(text); }
  bool Read(int rank, std::string* text) override {
    auto it = peers_.find(rank);
    if (it == peers_.end()) return false;
    *text = it->second;
    return true;
  }

 private:
  std::vector<std::string>* published_;
  std::map<int, std::string> peers_;
};

FaultReporter Reporter(int rank, std::vector<std::string>* published,
                       std::map<int, std::string> peers = {}) {
  std::vector<std::unique_ptr<FaultChannel>> channels;
  channels.emplace_back(new RecordingChannel(published, std::move(peers)));
  return FaultReporter(rank, {"node0", "node1", "node2"}, std::move(channels));
}

TEST(FaultRecord, TextIsTheLaunchersFormat) {
  FaultRecord r{2, "lost", "connection closed\nby peer"};
  EXPECT_EQ(r.Text(), "culprit=2\nkind=lost\nconnection closed\nby peer");
  EXPECT_EQ((FaultRecord{-1, "error", "boom"}).Text(), "culprit=-1\nkind=error\nboom");
}

TEST(FaultRecord, ParseReadsWhatTextWrites) {
  FaultRecord back;
  ASSERT_TRUE(FaultRecord::Parse(FaultRecord{3, "stall", "a\nb"}.Text(), &back));
  EXPECT_EQ(back.culprit, 3);
  EXPECT_EQ(back.kind, "stall");
  EXPECT_EQ(back.message, "a\nb");
  ASSERT_TRUE(FaultRecord::Parse("culprit=-1\nkind=shutdown", &back));
  EXPECT_EQ(back.culprit, -1);
  EXPECT_EQ(back.kind, "shutdown");
  EXPECT_EQ(back.message, "");
}

TEST(FaultRecord, ParseRefusesMalformedText) {
  FaultRecord back{7, "kept", "kept"};
  EXPECT_FALSE(FaultRecord::Parse("", &back));
  EXPECT_FALSE(FaultRecord::Parse("culprit=1", &back));
  EXPECT_FALSE(FaultRecord::Parse("kind=x\nculprit=1\n", &back));
  EXPECT_FALSE(FaultRecord::Parse("culprit=one\nkind=x\n", &back));
  EXPECT_FALSE(FaultRecord::Parse("culprit=\nkind=x\n", &back));
  EXPECT_EQ(back.culprit, 7);
  EXPECT_EQ(back.kind, "kept");
}

TEST(FaultReporter, ALostPeerIsNamedWithItsHostAndBlamed) {
  std::vector<std::string> published;
  FaultReporter reporter = Reporter(0, &published);
  Status s = reporter.Failed(Status::Unavailable("connection closed").WithPeer(1));
  EXPECT_EQ(s.code(), Status::UNAVAILABLE);
  EXPECT_EQ(s.peer(), 1);
  EXPECT_EQ(s.message(), "connection closed (rank 1 (on node1))");
  ASSERT_EQ(published.size(), 1u);
  EXPECT_EQ(published[0], "culprit=1\nkind=lost\nconnection closed (rank 1 (on node1))");
}

TEST(FaultReporter, APeerThatStoppedBecauseOfAThirdRankPassesTheBlameOn) {
  std::vector<std::string> published;
  FaultReporter reporter =
      Reporter(0, &published, {{1, "culprit=2\nkind=error\nout of memory"}});
  Status s = reporter.Failed(Status::Unavailable("connection closed").WithPeer(1));
  EXPECT_EQ(s.message(),
            "rank 2 (on node2) failed first; rank 1 (on node1) stopped because: out of memory "
            "[here: connection closed]");
  ASSERT_EQ(published.size(), 1u);
  EXPECT_EQ(published[0], "culprit=2\nkind=lost\n" + s.message());
}

TEST(FaultReporter, APeerBlamingThisRankOrAMalformedReportKeepsThePeer) {
  for (const std::string& report : {std::string("culprit=0\nkind=lost\nx"), std::string("junk")}) {
    std::vector<std::string> published;
    FaultReporter reporter = Reporter(0, &published, {{1, report}});
    Status s = reporter.Failed(Status::Unavailable("reset").WithPeer(1));
    EXPECT_EQ(s.message(), "reset (rank 1 (on node1))") << report;
  }
}

TEST(FaultReporter, ErrorsWithoutAPeerBlameNobody) {
  std::vector<std::string> published;
  FaultReporter reporter = Reporter(1, &published);
  EXPECT_EQ(reporter.Failed(Status::Aborted("stall shutdown: tensor x")).message(),
            "stall shutdown: tensor x");
  EXPECT_EQ(reporter.Failed(Status::InvalidArgument("bad")).message(), "bad");
  ASSERT_EQ(published.size(), 2u);
  EXPECT_EQ(published[0], "culprit=-1\nkind=stall\nstall shutdown: tensor x");
  EXPECT_EQ(published[1], "culprit=-1\nkind=error\nbad");
}

TEST(FaultReporter, LeftByOthersNamesWhoLeftAndHow) {
  std::vector<std::string> published;
  FaultReporter reporter = Reporter(0, &published);
  ResponseList list;
  list.shutdown_called_by = {0, 2};
  list.exiting = {1};
  Status s = reporter.LeftByOthers(list);
  EXPECT_EQ(s.code(), Status::ABORTED);
  EXPECT_EQ(s.message(),
            "rank 2 (on node2) called hvd.shutdown(); rank 1 (on node1) left the job (its "
            "process is exiting); this collective did not run");
  ASSERT_EQ(published.size(), 1u);
  EXPECT_EQ(published[0], "culprit=2\nkind=shutdown\n" + s.message());
}

TEST(FaultReporter, RanksBeyondTheHostListAreNamedAlone) {
  FaultReporter reporter(0, {}, {});
  EXPECT_EQ(reporter.RankAt(5), "rank 5");
}

TEST(FaultFileChannel, WritesTheWholeRecordUnderItsName) {
  const std::string path = ::testing::TempDir() + "/fault_" + std::to_string(getpid());
  FaultFileChannel(path).Publish("culprit=1\nkind=lost\nx");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "culprit=1\nkind=lost\nx");
  EXPECT_NE(std::remove(path.c_str()), -1);
  // Nothing left aside.
  EXPECT_EQ(std::remove((path + ".tmp." + std::to_string(getpid())).c_str()), -1);
}

}  // namespace
