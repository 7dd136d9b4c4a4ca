#include "launcher/job_host.h"

#include <errno.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "agent/output.h"
#include "launcher/job/cli.h"
#include "launcher/node.h"
#include "rendezvous/base/say.h"

namespace drun {

absl::StatusOr<std::unique_ptr<JobHost>> JobHost::Start(const v1::JobSpec& spec,
                                                        const std::string& token,
                                                        const std::string& listen_host, int port,
                                                        Members members) {
  auto host = std::unique_ptr<JobHost>(new JobHost);
  host->spec_ = spec;
  host->token_ = token;
  const std::string addr = listen_host.find(':') == std::string::npos
                               ? absl::StrCat(listen_host, ":", port)
                               : absl::StrCat("[", listen_host, "]:", port);
  RendezvousState::Config config = RendezvousConfigFor(spec, token);
  config.closed_membership = members == Members::kFixed;
  auto server = RendezvousServer::Start(addr, config);
  if (!server.ok()) return server.status();
  host->server_ = std::move(*server);
  return host;
}

v1::AgentLaunch JobHost::Launch(const std::string& dial_host) const {
  v1::AgentLaunch launch;
  *launch.mutable_spec() = spec_;
  launch.set_token(token_);
  launch.set_rdzv_target(dial_host.find(':') == std::string::npos
                             ? absl::StrCat(dial_host, ":", port())
                             : absl::StrCat("[", dial_host, "]:", port()));
  launch.set_launcher_reports_end(true);
  launch.set_launcher_version(VersionWords());
  return launch;
}

int JobHost::Report(const v1::Finish& finish) {
  if (finish.exit_code() != 0) {
    Say(absl::StrCat("job failed: ", finish.message()));
    if (finish.has_failure()) WriteAll(2, FormatRootCause(finish.failure()));
  }
  return finish.exit_code();
}

void LauncherReport::End(int exit_code, const v1::Finish* finish, TimePoint now) {
  report_.host = Hostname();
  report_.exit_code = exit_code;
  report_.wall_s = std::chrono::duration<double>(now - started_).count();
  if (finish != nullptr && finish->exit_code() != 0) report_.message = finish->message();
  if (finish != nullptr && finish->has_failure()) report_.failure = finish->failure();
  const bool failed = exit_code != 0 && !report_.ranks.empty() && report_.failure;
  if (summary_ || failed) WriteAll(2, FormatSummaryTable(report_));
  if (path_.empty()) return;
  if (absl::Status st = WriteReportFile(path_, report_); !st.ok()) Say(std::string(st.message()));
}

}  // namespace drun
