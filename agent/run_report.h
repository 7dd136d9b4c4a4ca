// RunReport: what a node saw of the job, for the summary table (printed on
// failure and with --summary) and the --report JSON file. Field names and
// meanings are documented in docs/report.md.
#ifndef DRUN_AGENT_RUN_REPORT_H_
#define DRUN_AGENT_RUN_REPORT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/worker_group.h"
#include "drun/v1/rendezvous.pb.h"

namespace drun {

struct RankStats {
  std::string host;
  int rank = -1;
  int local_rank = -1;
  int attempts = 0;       // rounds this rank ran in
  int exit_code = 0;      // of its last attempt; 128+N for signal N
  int signal = 0;
  bool stopped_by_drun = false;  // its last attempt died of drun's stop signal
  double wall_s = 0;      // of its last attempt
  long peak_rss_kb = 0;   // the largest over its attempts
};

struct RoundStats {
  int64_t round = 0;
  double rendezvous_s = 0;  // from asking to join until the assignment arrived
  int group_rank = 0;
  int world_size = 0;
  int restart_count = 0;
};

struct RunReport {
  std::string run_id;
  std::string host;
  int exit_code = 0;
  std::string message;
  std::optional<v1::Failure> failure;
  // The last kKeptRounds rounds (a restart loop must not grow memory);
  // rounds_total counts them all.
  static constexpr size_t kKeptRounds = 1000;
  std::vector<RoundStats> rounds;
  int64_t rounds_total = 0;
  std::string log_dir;  // where this node's logs went ("" without --log-dir), absolute
  uint64_t log_dir_inode = 0;  // log_dir's, for a launcher's same-directory check
  std::vector<std::string> incomplete_logs;  // log files a write error cut short
  // A launcher's: where the logs it could not collect stay (HOST:DIR).
  std::vector<std::string> logs_not_collected;
  // Connections the job's store refused (not from a member: rendezvous/admission.h);
  // known where the rendezvous runs (the host node, or the launcher), else 0.
  uint64_t refused_connections = 0;
  std::map<int, RankStats> ranks;  // by global rank
  double wall_s = 0;
  // Stack dumps taken during the run (drun stacks, --hang-timeout), the last
  // kKeptDumps of them: when, why, and every rank's stack (agent/stack_dump.h).
  struct Dump {
    double time_unix_s = 0;
    bool hang = false;  // false: asked for with drun stacks
    std::string file;   // where it was written under --log-dir ("" when not)
    std::string text;
  };
  static constexpr size_t kKeptDumps = 10;
  std::vector<Dump> stack_dumps;
  void AddDump(Dump d);

  void AddRound(const RoundStats& r);
  // Folds one finished worker group of `round` into the per-rank stats.
  void AddAttempt(const std::string& host, const std::vector<WorkerRecord>& records);

  // A launcher's report (ssh, --launcher slurm): what each host's agent sent
  // at its end, by host; their workers are folded into `ranks`.
  std::vector<v1::NodeReport> nodes;
  void AddNode(const v1::NodeReport& node);
};

// What this node saw, for its launcher (NodeReport in rendezvous.proto).
v1::NodeReport ToNodeReport(const RunReport& report);

// "drun: " prefixed lines: host, rank, exit, attempts, wall time, peak RSS.
std::string FormatSummaryTable(const RunReport& report);
// Pretty-printed JSON (via protobuf's JSON printer).
std::string RenderReportJson(const RunReport& report);

// --report FILE is written at exit as FILE.tmp renamed to FILE. Before any
// worker starts, CheckReportPath proves both can be created; WriteReportFile
// writes. Each returns a one-line reason on failure.
absl::Status CheckReportPath(const std::string& path);
absl::Status WriteReportFile(const std::string& path, const RunReport& report);

}  // namespace drun

#endif  // DRUN_AGENT_RUN_REPORT_H_
