#include "agent/run_report.h"

#include <gtest/gtest.h>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace drun {
namespace {

RunReport Sample() {
  RunReport r;
  r.run_id = "job";
  r.host = "n1";
  r.exit_code = 139;
  r.message = "rank 1 failed";
  v1::Failure f;
  f.set_rank(1);
  f.set_signal(11);
  f.set_exit_code(139);
  f.add_stderr_tail("boom");
  r.failure = f;
  r.rounds.push_back({0, 0.5, 0, 2, 0});
  TimePoint t0 = TimePoint() + std::chrono::seconds(10);
  WorkerRecord a{0, 0, 100, t0, t0 + std::chrono::seconds(2), true, 0, 0, 2048};
  WorkerRecord b{1, 1, 101, t0, t0 + std::chrono::seconds(1), true, 139, 11, 4096};
  r.AddAttempt("n1", {a, b});
  a.peak_rss_kb = 1024;
  r.AddAttempt("n1", {a});
  return r;
}

TEST(RunReportTest, AttemptsAndPeaksAccumulate) {
  RunReport r = Sample();
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[0].attempts, 2);
  EXPECT_EQ(r.ranks[0].peak_rss_kb, 2048);
  EXPECT_EQ(r.ranks[1].attempts, 1);
  EXPECT_DOUBLE_EQ(r.ranks[1].wall_s, 1.0);
}

TEST(RunReportTest, TableNamesSignals) {
  std::string t = FormatSummaryTable(Sample());
  EXPECT_NE(t.find("SIGSEGV"), std::string::npos);
  EXPECT_NE(t.find("peak RSS"), std::string::npos);
  EXPECT_NE(t.find("exit code 139"), std::string::npos);
  for (size_t pos = 0; pos < t.size(); pos = t.find('\n', pos) + 1) {
    EXPECT_EQ(t.compare(pos, 6, "drun: "), 0);
  }
}

TEST(RunReportTest, JsonHasDocumentedFields) {
  google::protobuf::Struct doc;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(RenderReportJson(Sample()), &doc).ok());
  const auto& f = doc.fields();
  for (const char* k : {"run_id", "host", "exit_code", "message", "failure", "wall_s", "rounds", "workers"}) {
    EXPECT_TRUE(f.count(k)) << k;
  }
  EXPECT_EQ(f.at("exit_code").number_value(), 139);
  EXPECT_EQ(f.at("failure").struct_value().fields().at("stderr_tail").list_value().values(0).string_value(),
            "boom");
  const auto& w = f.at("workers").list_value().values(1).struct_value().fields();
  for (const char* k : {"host", "rank", "local_rank", "attempts", "exit_code", "signal", "wall_s", "peak_rss_kb"}) {
    EXPECT_TRUE(w.count(k)) << k;
  }
  EXPECT_EQ(w.at("peak_rss_kb").number_value(), 4096);
  const auto& round = f.at("rounds").list_value().values(0).struct_value().fields();
  EXPECT_EQ(round.at("rendezvous_s").number_value(), 0.5);
}

}  // namespace
}  // namespace drun
