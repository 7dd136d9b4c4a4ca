#include "agent/run_report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "rendezvous/base/signal_name.h"

namespace drun {

void RunReport::AddRound(const RoundStats& r) {
  ++rounds_total;
  if (rounds.size() >= kKeptRounds) {
    // Drop the older half at once: amortised O(1), memory bounded.
    rounds.erase(rounds.begin(), rounds.begin() + kKeptRounds / 2);
  }
  rounds.push_back(r);
}

void RunReport::AddAttempt(const std::string& h, const std::vector<WorkerRecord>& records) {
  for (const auto& r : records) {
    if (r.rank < 0) continue;
    RankStats& s = ranks[r.rank];
    s.host = h;
    s.rank = r.rank;
    s.local_rank = r.local_rank;
    s.attempts += 1;
    s.exit_code = r.exit_code;
    s.signal = r.signal;
    s.wall_s = r.exited ? std::chrono::duration<double>(r.end - r.start).count() : 0;
    s.peak_rss_kb = std::max(s.peak_rss_kb, r.peak_rss_kb);
  }
}

namespace {

std::string ExitText(int code, int signal) {
  if (signal > 0) return SignalName(signal);
  return absl::StrCat(code);
}

}  // namespace

std::string FormatSummaryTable(const RunReport& report) {
  std::string out = absl::StrFormat("drun: %-16s %6s %6s %-10s %8s %9s %10s\n", "host", "rank",
                                    "local", "exit", "attempts", "wall s", "peak RSS");
  for (const auto& [rank, s] : report.ranks) {
    absl::StrAppend(&out, absl::StrFormat("drun: %-16s %6d %6d %-10s %8d %9.2f %7.1f MiB\n",
                                          s.host, s.rank, s.local_rank,
                                          ExitText(s.exit_code, s.signal), s.attempts, s.wall_s,
                                          s.peak_rss_kb / 1024.0));
  }
  absl::StrAppend(&out, absl::StrFormat("drun: %d round(s), exit code %d, %.2f s in all\n",
                                        std::max<int64_t>(report.rounds_total, static_cast<int64_t>(report.rounds.size())),
                                        report.exit_code, report.wall_s));
  return out;
}

void RunReport::AddDump(Dump d) {
  if (stack_dumps.size() == kKeptDumps) stack_dumps.erase(stack_dumps.begin());
  stack_dumps.push_back(std::move(d));
}

std::string RenderReportJson(const RunReport& report) {
  using google::protobuf::Struct;
  using google::protobuf::Value;
  Struct root;
  auto& f = *root.mutable_fields();
  f["run_id"].set_string_value(report.run_id);
  f["host"].set_string_value(report.host);
  f["exit_code"].set_number_value(report.exit_code);
  f["message"].set_string_value(report.message);
  f["wall_s"].set_number_value(report.wall_s);
  if (report.failure) {
    std::string json;
    google::protobuf::util::JsonPrintOptions o;
    o.always_print_primitive_fields = true;
    o.preserve_proto_field_names = true;
    if (google::protobuf::util::MessageToJsonString(*report.failure, &json, o).ok()) {
      Struct failure;
      if (google::protobuf::util::JsonStringToMessage(json, &failure).ok()) {
        *f["failure"].mutable_struct_value() = failure;
      }
    }
  } else {
    f["failure"].set_null_value(google::protobuf::NULL_VALUE);
  }
  f["rounds_total"].set_number_value(
      static_cast<double>(std::max<int64_t>(report.rounds_total, static_cast<int64_t>(report.rounds.size()))));
  f["log_dir"].set_string_value(report.log_dir);
  auto* dumps = f["stack_dumps"].mutable_list_value();
  for (const auto& d : report.stack_dumps) {
    Struct s;
    auto& sf = *s.mutable_fields();
    sf["time_unix_s"].set_number_value(d.time_unix_s);
    sf["reason"].set_string_value(d.hang ? "hang-timeout" : "drun stacks");
    sf["file"].set_string_value(d.file);
    sf["text"].set_string_value(d.text);
    *dumps->add_values()->mutable_struct_value() = s;
  }
  auto* incomplete = f["incomplete_logs"].mutable_list_value();
  for (const auto& path : report.incomplete_logs) incomplete->add_values()->set_string_value(path);
  auto* rounds = f["rounds"].mutable_list_value();
  for (const auto& r : report.rounds) {
    Struct s;
    auto& sf = *s.mutable_fields();
    sf["round"].set_number_value(static_cast<double>(r.round));
    sf["rendezvous_s"].set_number_value(r.rendezvous_s);
    sf["group_rank"].set_number_value(r.group_rank);
    sf["world_size"].set_number_value(r.world_size);
    sf["restart_count"].set_number_value(r.restart_count);
    *rounds->add_values()->mutable_struct_value() = s;
  }
  auto* workers = f["workers"].mutable_list_value();
  for (const auto& [rank, w] : report.ranks) {
    Struct s;
    auto& sf = *s.mutable_fields();
    sf["host"].set_string_value(w.host);
    sf["rank"].set_number_value(w.rank);
    sf["local_rank"].set_number_value(w.local_rank);
    sf["attempts"].set_number_value(w.attempts);
    sf["exit_code"].set_number_value(w.exit_code);
    sf["signal"].set_number_value(w.signal);
    sf["wall_s"].set_number_value(w.wall_s);
    sf["peak_rss_kb"].set_number_value(static_cast<double>(w.peak_rss_kb));
    *workers->add_values()->mutable_struct_value() = s;
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  (void)google::protobuf::util::MessageToJsonString(root, &json, o);
  return json;
}

}  // namespace drun
