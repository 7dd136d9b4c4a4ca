#include "launcher/job_control.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "launcher/node.h"
#include "rendezvous/base/say.h"

namespace drun {

std::optional<JobControl> JobControl::Open(const std::map<std::string, std::string>& env,
                                           const std::string& run_id, RendezvousServer* server) {
  absl::StatusOr<std::string> dir = ControlDir(env, /*create=*/true);
  absl::StatusOr<ControlListener> l =
      dir.ok() ? ControlListener::Open(*dir) : absl::StatusOr<ControlListener>(dir.status());
  if (!l.ok()) {
    Say(absl::StrCat("drun stacks will not find this job: ", l.status().message()));
    return std::nullopt;
  }
  return JobControl(*std::move(l), run_id, server);
}

v1::ControlReply JobControl::Header() const {
  v1::ControlReply r;
  r.set_run_id(run_id_);
  r.set_host(Hostname());
  r.set_pid(getpid());
  r.set_whole_job(true);
  return r;
}

void JobControl::OnReadable() {
  v1::ControlRequest request;
  UniqueFd caller = listener_.Accept(&request);
  if (!caller) return;
  if (request.kind() == v1::ControlRequest::INFO) return SendControlReply(caller, Header());
  waiting_[server_->AskStacks()].push_back(std::move(caller));
}

void JobControl::OnStacks(const RendezvousServer::Event& e) {
  auto it = waiting_.find(e.stacks_id);
  if (it == waiting_.end()) return;
  const v1::ControlReply reply = GatheredReply(Header(), e.stacks);
  for (const UniqueFd& caller : it->second) SendControlReply(caller, reply);
  waiting_.erase(it);
}

}  // namespace drun
