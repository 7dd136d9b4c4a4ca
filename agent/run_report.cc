#include "agent/run_report.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "rendezvous/base/private_files.h"
#include "rendezvous/base/say.h"
#include "rendezvous/base/signal_name.h"
#include "rendezvous/base/unique_fd.h"
#include "rendezvous/base/words.h"

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
    s.stopped_by_drun = r.stopped_by_drun;
    s.wall_s = r.exited ? std::chrono::duration<double>(r.end - r.start).count() : 0;
    s.peak_rss_kb = std::max(s.peak_rss_kb, r.peak_rss_kb);
  }
}

void RunReport::AddNode(const v1::NodeReport& node) {
  for (const v1::WorkerStats& w : node.workers()) {
    RankStats& s = ranks[w.rank()];
    s.host = w.host();
    s.rank = w.rank();
    s.local_rank = w.local_rank();
    s.attempts = w.attempts();
    s.exit_code = w.exit_code();
    s.signal = w.signal();
    s.stopped_by_drun = w.stopped_by_drun();
    s.wall_s = w.wall_s();
    s.peak_rss_kb = w.peak_rss_kb();
  }
  rounds_total = std::max<int64_t>(rounds_total, node.rounds_total());
  for (const std::string& path : node.incomplete_logs()) {
    incomplete_logs.push_back(absl::StrCat(node.host(), ":", path));
  }
  nodes.push_back(node);
}

v1::NodeReport ToNodeReport(const RunReport& report) {
  v1::NodeReport n;
  n.set_host(report.host);
  n.set_exit_code(report.exit_code);
  n.set_log_dir(report.log_dir);
  n.set_log_dir_inode(report.log_dir_inode);
  for (const std::string& path : report.incomplete_logs) n.add_incomplete_logs(path);
  n.set_rounds_total(static_cast<int32_t>(
      std::max<int64_t>(report.rounds_total, static_cast<int64_t>(report.rounds.size()))));
  n.set_wall_s(report.wall_s);
  for (const auto& [rank, s] : report.ranks) {
    v1::WorkerStats* w = n.add_workers();
    w->set_host(s.host);
    w->set_rank(s.rank);
    w->set_local_rank(s.local_rank);
    w->set_attempts(s.attempts);
    w->set_exit_code(s.exit_code);
    w->set_signal(s.signal);
    w->set_stopped_by_drun(s.stopped_by_drun);
    w->set_wall_s(s.wall_s);
    w->set_peak_rss_kb(static_cast<int32_t>(std::min<long>(s.peak_rss_kb, INT32_MAX)));
  }
  for (const RunReport::Dump& d : report.stack_dumps) {
    if (!d.file.empty()) n.add_stack_dump_files(d.file);
  }
  return n;
}

namespace {

// proto3's JSON writes 64-bit integers as strings ("attempt": "0"); the
// report's readers want numbers, as every other count in it.
void Int64sAsNumbers(const google::protobuf::Descriptor& d, google::protobuf::Struct* s) {
  for (int i = 0; i < d.field_count(); ++i) {
    const google::protobuf::FieldDescriptor& f = *d.field(i);
    const auto type = f.cpp_type();
    if (f.is_repeated() || (type != google::protobuf::FieldDescriptor::CPPTYPE_INT64 &&
                            type != google::protobuf::FieldDescriptor::CPPTYPE_UINT64)) {
      continue;
    }
    auto it = s->mutable_fields()->find(f.name());
    if (it == s->mutable_fields()->end() || !it->second.has_string_value()) continue;
    double v = 0;
    if (absl::SimpleAtod(it->second.string_value(), &v)) it->second.set_number_value(v);
  }
}

// A message as a JSON object of the report (field names as in the proto).
google::protobuf::Struct AsStruct(const google::protobuf::Message& m) {
  std::string json;
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  o.preserve_proto_field_names = true;
  google::protobuf::Struct s;
  if (google::protobuf::util::MessageToJsonString(m, &json, o).ok()) {
    (void)google::protobuf::util::JsonStringToMessage(json, &s);
  }
  Int64sAsNumbers(*m.GetDescriptor(), &s);
  return s;
}

// A healthy rank drun stopped is "stopped", not the signal drun sent it: a
// signal name stays for what came from elsewhere.
std::string ExitText(const RankStats& s) {
  if (s.signal > 0 && s.stopped_by_drun) return "stopped";
  if (s.signal > 0) return SignalName(s.signal);
  return absl::StrCat(s.exit_code);
}

}  // namespace

std::string FormatSummaryTable(const RunReport& report) {
  std::string out = absl::StrFormat("drun: %-16s %6s %10s %-10s %8s %9s %10s\n", "host", "rank",
                                    "local rank", "exit", "attempts", "wall s", "peak RSS");
  for (const auto& [rank, s] : report.ranks) {
    absl::StrAppend(&out, absl::StrFormat("drun: %-16s %6d %10d %-10s %8d %9.2f %7.1f MiB\n",
                                          s.host, s.rank, s.local_rank,
                                          ExitText(s), s.attempts, s.wall_s,
                                          s.peak_rss_kb / 1024.0));
  }
  const int64_t rounds = std::max<int64_t>(report.rounds_total, static_cast<int64_t>(report.rounds.size()));
  absl::StrAppend(&out, absl::StrFormat("drun: %s, exit code %d, %.2f s in all\n", Count(rounds, "round"),
                                        report.exit_code, report.wall_s));
  return out;
}

void RunReport::AddDump(Dump d) {
  if (stack_dumps.size() == kKeptDumps) stack_dumps.erase(stack_dumps.begin());
  stack_dumps.push_back(std::move(d));
}

namespace {

// The report's lists, one struct per item.
google::protobuf::ListValue DumpsList(const RunReport& report) {
  google::protobuf::ListValue dumps;
  for (const auto& d : report.stack_dumps) {
    google::protobuf::Struct s;
    auto& sf = *s.mutable_fields();
    sf["time_unix_s"].set_number_value(d.time_unix_s);
    sf["reason"].set_string_value(d.hang ? "hang-timeout" : "drun stacks");
    sf["file"].set_string_value(d.file);
    sf["text"].set_string_value(d.text);
    *dumps.add_values()->mutable_struct_value() = s;
  }
  return dumps;
}

google::protobuf::ListValue RoundsList(const RunReport& report) {
  google::protobuf::ListValue rounds;
  for (const auto& r : report.rounds) {
    google::protobuf::Struct s;
    auto& sf = *s.mutable_fields();
    sf["round"].set_number_value(static_cast<double>(r.round));
    sf["rendezvous_s"].set_number_value(r.rendezvous_s);
    sf["group_rank"].set_number_value(r.group_rank);
    sf["world_size"].set_number_value(r.world_size);
    sf["restart_count"].set_number_value(r.restart_count);
    *rounds.add_values()->mutable_struct_value() = s;
  }
  return rounds;
}

google::protobuf::ListValue WorkersList(const RunReport& report) {
  google::protobuf::ListValue workers;
  for (const auto& [rank, w] : report.ranks) {
    google::protobuf::Struct s;
    auto& sf = *s.mutable_fields();
    sf["host"].set_string_value(w.host);
    sf["rank"].set_number_value(w.rank);
    sf["local_rank"].set_number_value(w.local_rank);
    sf["attempts"].set_number_value(w.attempts);
    sf["exit_code"].set_number_value(w.exit_code);
    sf["signal"].set_number_value(w.signal);
    sf["stopped_by_drun"].set_bool_value(w.stopped_by_drun);
    sf["wall_s"].set_number_value(w.wall_s);
    sf["peak_rss_kb"].set_number_value(static_cast<double>(w.peak_rss_kb));
    *workers.add_values()->mutable_struct_value() = s;
  }
  return workers;
}

void AppendJson(const google::protobuf::Value& v, int indent, std::string* out);

void AppendJsonString(const std::string& text, std::string* out) {
  *out += '"';
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      *out += '\\';
      *out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppend(out, absl::StrFormat("\\u%04x", c));
    } else {
      *out += static_cast<char>(c);
    }
  }
  *out += '"';
}

void AppendJsonNumber(double d, std::string* out) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d);  // the shortest text that reads back as d
  out->append(buf, r.ptr);
}

// Keys in sorted order, so two runs' reports differ only where the runs did.
void AppendJsonObject(const google::protobuf::Struct& s, int indent, std::string* out) {
  if (s.fields().empty()) return out->append("{}"), void();
  const std::map<std::string, const google::protobuf::Value*> sorted = [&] {
    std::map<std::string, const google::protobuf::Value*> m;
    for (const auto& [k, v] : s.fields()) m[k] = &v;
    return m;
  }();
  const std::string pad(indent + 2, ' ');
  *out += "{\n";
  bool first = true;
  for (const auto& [k, v] : sorted) {
    if (!first) *out += ",\n";
    first = false;
    *out += pad;
    AppendJsonString(k, out);
    *out += ": ";
    AppendJson(*v, indent + 2, out);
  }
  absl::StrAppend(out, "\n", std::string(indent, ' '), "}");
}

void AppendJsonList(const google::protobuf::ListValue& l, int indent, std::string* out) {
  if (l.values().empty()) return out->append("[]"), void();
  const std::string pad(indent + 2, ' ');
  *out += "[\n";
  for (int i = 0; i < l.values_size(); ++i) {
    if (i > 0) *out += ",\n";
    *out += pad;
    AppendJson(l.values(i), indent + 2, out);
  }
  absl::StrAppend(out, "\n", std::string(indent, ' '), "]");
}

void AppendJson(const google::protobuf::Value& v, int indent, std::string* out) {
  switch (v.kind_case()) {
    case google::protobuf::Value::kNumberValue:
      return AppendJsonNumber(v.number_value(), out);
    case google::protobuf::Value::kStringValue:
      return AppendJsonString(v.string_value(), out);
    case google::protobuf::Value::kBoolValue:
      return out->append(v.bool_value() ? "true" : "false"), void();
    case google::protobuf::Value::kStructValue:
      return AppendJsonObject(v.struct_value(), indent, out);
    case google::protobuf::Value::kListValue:
      return AppendJsonList(v.list_value(), indent, out);
    default:
      return out->append("null"), void();
  }
}

}  // namespace

std::string RenderReportJson(const RunReport& report) {
  google::protobuf::Struct root;
  auto& f = *root.mutable_fields();
  f["run_id"].set_string_value(report.run_id);
  f["host"].set_string_value(report.host);
  f["exit_code"].set_number_value(report.exit_code);
  f["message"].set_string_value(report.message);
  f["wall_s"].set_number_value(report.wall_s);
  if (report.failure) {
    *f["failure"].mutable_struct_value() = AsStruct(*report.failure);
  } else {
    f["failure"].set_null_value(google::protobuf::NULL_VALUE);
  }
  f["rounds_total"].set_number_value(
      static_cast<double>(std::max<int64_t>(report.rounds_total, static_cast<int64_t>(report.rounds.size()))));
  f["log_dir"].set_string_value(report.log_dir);
  *f["stack_dumps"].mutable_list_value() = DumpsList(report);
  f["refused_connections"].set_number_value(static_cast<double>(report.refused_connections));
  auto* incomplete = f["incomplete_logs"].mutable_list_value();
  for (const auto& path : report.incomplete_logs) incomplete->add_values()->set_string_value(path);
  auto* stay = f["logs_not_collected"].mutable_list_value();
  for (const auto& where : report.logs_not_collected) stay->add_values()->set_string_value(where);
  *f["rounds"].mutable_list_value() = RoundsList(report);
  *f["workers"].mutable_list_value() = WorkersList(report);
  auto* nodes = f["nodes"].mutable_list_value();
  for (v1::NodeReport n : report.nodes) {
    n.clear_workers();  // they are in "workers", with every host's
    google::protobuf::Struct node = AsStruct(n);
    node.mutable_fields()->erase("log_dir_inode");  // for the launcher's own check only
    *nodes->add_values()->mutable_struct_value() = std::move(node);
  }
  std::string json;
  AppendJsonObject(root, 0, &json);
  return json + "\n";
}

absl::Status CheckReportPath(const std::string& path) {
  const std::string tmp = path + ".tmp";
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kPrivateFileMode));
  if (!fd.valid()) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        absl::StrCat("cannot write the report to ", path, ": ", strerror(errno),
                                     "; give --report a path in a directory you can write"));
  }
  fd.reset();
  unlink(tmp.c_str());
  return absl::OkStatus();
}

absl::Status WriteReportFile(const std::string& path, const RunReport& report) {
  const std::string tmp = path + ".tmp";
  const std::string json = RenderReportJson(report);
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kPrivateFileMode));
  if (!fd.valid() || WriteAll(fd.get(), json) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        absl::StrCat("cannot write the report to ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace drun
