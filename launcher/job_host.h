// JobHost: what a launcher that starts agents elsewhere (ssh, srun) runs in
// its own process: the rendezvous server (and its per-round c10d store), the
// launch message each remote `drun agent` reads on its standard input, and
// the end of the job (exit code and root-cause summary).
#ifndef DRUN_LAUNCHER_JOB_HOST_H_
#define DRUN_LAUNCHER_JOB_HOST_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "drun/v1/job.pb.h"
#include "agent/agent_launch.h"
#include "agent/run_report.h"
#include "rendezvous/base/clock.h"
#include "rendezvous/rendezvous_server.h"

namespace drun {

class JobHost {
 public:
  // kFixed: every agent is started at once and none can come later (an srun
  // step; RendezvousState::Config::closed_membership). kOpen: hosts may join
  // later (ssh spares).
  enum class Members { kOpen, kFixed };
  // Serves the job's rendezvous on listen_host:port (port 0: a free one).
  static absl::StatusOr<std::unique_ptr<JobHost>> Start(const v1::JobSpec& spec,
                                                        const std::string& token,
                                                        const std::string& listen_host, int port,
                                                        Members members);
  int port() const { return server_->port(); }
  RendezvousServer* server() { return server_.get(); }
  // The launch for a remote `drun agent` (EncodeAgentLaunch gives the bytes
  // for its standard input). `dial_host`: the address that host reaches this
  // launcher at.
  v1::AgentLaunch Launch(const std::string& dial_host) const;
  // Prints the job's end like an agent would (on failure: the message and the
  // root cause) and returns the exit code.
  static int Report(const v1::Finish& finish);

 private:
  v1::JobSpec spec_;
  std::string token_;
  std::unique_ptr<RendezvousServer> server_;
};

// A launcher's --summary and --report: every host's agent sends its node's
// report as it ends (RendezvousServer kReport events); at the job's end the
// launcher prints one table of every host's ranks (on failure, or with
// --summary) and writes one JSON file (docs/report.md).
class LauncherReport {
 public:
  LauncherReport(std::string run_id, bool summary, std::string path, TimePoint started)
      : summary_(summary), path_(std::move(path)), started_(started) {
    report_.run_id = std::move(run_id);
  }
  void Add(const v1::NodeReport& node) { report_.AddNode(node); }
  void SetRefusedConnections(uint64_t n) { report_.refused_connections = n; }
  // Every node's report, for the launcher to add where their logs are.
  std::vector<v1::NodeReport>& nodes() { return report_.nodes; }
  const std::vector<v1::NodeReport>& nodes() const { return report_.nodes; }
  void SetLogsNotCollected(std::vector<std::string> stay) { report_.logs_not_collected = std::move(stay); }
  // Before the table, the root cause comes last (JobHost::Report). `finish`:
  // the rendezvous' end, when there was one.
  void End(int exit_code, const v1::Finish* finish, TimePoint now);

 private:
  RunReport report_;
  bool summary_;
  std::string path_;
  TimePoint started_;
};

}  // namespace drun

#endif  // DRUN_LAUNCHER_JOB_HOST_H_
