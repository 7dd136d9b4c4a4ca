#include "agent/run_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

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

// A rank drun stopped says "stopped" (and stopped_by_drun in the JSON and the
// launcher's NodeReport); a signal from outside keeps its name.
TEST(RunReportTest, RanksDrunStoppedSayStopped) {
  RunReport r;
  TimePoint t0 = TimePoint() + std::chrono::seconds(10);
  WorkerRecord failed{0, 0, 100, t0, t0 + std::chrono::seconds(1), true, 137, 9, 1024, false};
  WorkerRecord stopped{1, 1, 101, t0, t0 + std::chrono::seconds(1), true, 143, 15, 1024, true};
  r.AddAttempt("n1", {failed, stopped});
  const std::string t = FormatSummaryTable(r);
  EXPECT_NE(t.find(" SIGKILL "), std::string::npos) << t;
  EXPECT_NE(t.find(" stopped "), std::string::npos) << t;
  EXPECT_EQ(t.find("SIGTERM"), std::string::npos) << t;
  google::protobuf::Struct doc;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(RenderReportJson(r), &doc).ok());
  const auto& workers = doc.fields().at("workers").list_value().values();
  ASSERT_EQ(workers.size(), 2);
  EXPECT_FALSE(workers[0].struct_value().fields().at("stopped_by_drun").bool_value());
  EXPECT_TRUE(workers[1].struct_value().fields().at("stopped_by_drun").bool_value());
  EXPECT_EQ(workers[1].struct_value().fields().at("signal").number_value(), 15);
  // Through a launcher: the host's report keeps it.
  RunReport launcher;
  launcher.AddNode(ToNodeReport(r));
  EXPECT_TRUE(launcher.ranks[1].stopped_by_drun);
  EXPECT_FALSE(launcher.ranks[0].stopped_by_drun);
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

TEST(RunReportTest, JsonKeysAreSortedAndCountsAreNumbers) {
  RunReport r = Sample();
  r.failure->set_attempt(3);
  r.failure->set_host("n1");
  const std::string json = RenderReportJson(r);
  // The same report renders the same bytes, keys in order at every level.
  EXPECT_EQ(json, RenderReportJson(r));
  std::vector<std::string> top;
  for (size_t pos = json.find("\n  \""); pos != std::string::npos; pos = json.find("\n  \"", pos + 1)) {
    const size_t start = pos + 4;
    top.push_back(json.substr(start, json.find('"', start) - start));
  }
  ASSERT_GT(top.size(), 8u);
  EXPECT_TRUE(std::is_sorted(top.begin(), top.end())) << json;
  google::protobuf::Struct doc;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &doc).ok()) << json;
  const auto& failure = doc.fields().at("failure").struct_value().fields();
  ASSERT_TRUE(failure.at("attempt").has_number_value()) << json;
  EXPECT_EQ(failure.at("attempt").number_value(), 3);
  EXPECT_NE(json.find("\"wall_s\": 0"), std::string::npos);
}

TEST(RunReportTest, JsonStringsAreEscaped) {
  RunReport r = Sample();
  r.message = "a \"quoted\" back\\slash\tand\x01control";
  google::protobuf::Struct doc;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(RenderReportJson(r), &doc).ok());
  EXPECT_EQ(doc.fields().at("message").string_value(), r.message);
}

TEST(RunReportTest, TableSaysLocalRank) {
  EXPECT_NE(FormatSummaryTable(Sample()).find("local rank"), std::string::npos);
}

}  // namespace
}  // namespace drun
