#include "launcher/stacks_command.h"

#include <unistd.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/control_socket.h"
#include "rendezvous/base/exit_code.h"
#include "rendezvous/base/say.h"
#include "rendezvous/base/words.h"

namespace drun {
namespace {

constexpr const char kUsage[] =
    "usage: drun stacks [RUN_ID]\n"
    "Prints every rank's state and stack (Python frames, or native ones) for the drun job\n"
    "of yours running on this machine, on every node of it (from the machine that started\n"
    "it or any of its nodes); RUN_ID picks one when several run.\n";

// A dump can take a while for native frames (eu-stack, gdb): wait up to this.
constexpr int kAskTimeoutMs = 60000;

int Say1(int code, const std::string& line) {
  Say(line);
  return code;
}

// One entry per job: "run id 'a' (pid 12), run id 'b' (3 agents: pids 14, 15, 16)".
std::string Describe(const std::map<std::string, std::vector<RunningJob>>& by_run) {
  std::vector<std::string> parts;
  for (const auto& [run_id, agents] : by_run) {
    std::vector<std::string> pids;
    for (const RunningJob& j : agents) pids.push_back(absl::StrCat(j.info.pid()));
    parts.push_back(agents.size() == 1
                        ? absl::StrCat("run id '", run_id, "' (pid ", pids[0], ")")
                        : absl::StrCat("run id '", run_id, "' (", agents.size(), " agents: pids ",
                                       absl::StrJoin(pids, ", "), ")"));
  }
  return absl::StrJoin(parts, ", ");
}

// One node's part: a header line and its dump, or its error in one line.
// Returns false for an error.
bool PrintNode(const v1::ControlReply& r, bool gathered) {
  if (!r.error().empty()) {
    Say(absl::StrCat("run '", r.run_id(), "' on ", r.host(),
                     r.node_rank() >= 0 && gathered ? absl::StrCat(" (node rank ", r.node_rank(), ")") : "",
                     ": ", r.error()));
    return false;
  }
  std::string scope = absl::StrCat(Count(r.local_ranks(), "rank"), " on ", r.host());
  if (gathered && r.node_rank() >= 0) absl::StrAppend(&scope, " (node rank ", r.node_rank(), ")");
  if (!gathered && r.world_size() > r.local_ranks()) {
    absl::StrAppend(&scope, " (of ", r.world_size(), "; run drun stacks on the other nodes for theirs)");
  }
  WriteAll(1, absl::StrFormat("drun stacks: %s%s, taken in %.0f ms%s\n",
                              gathered ? "" : absl::StrCat("run '", r.run_id(), "', "), scope, r.capture_ms(),
                              r.dump_file().empty() ? "" : absl::StrCat(", kept in ", r.dump_file())));
  WriteAll(1, r.dump());
  return true;
}

// A whole job's answer: a line for the job, then every node's part.
bool PrintGathered(const v1::ControlReply& r) {
  WriteAll(1, absl::StrFormat("drun stacks: run '%s', %s on %s, gathered by pid %d on %s\n", r.run_id(),
                              Count(r.local_ranks(), "rank"), Count(r.nodes_size(), "host"), r.pid(), r.host()));
  bool any = false;
  for (const v1::ControlReply& n : r.nodes()) any = PrintNode(n, /*gathered=*/true) || any;
  return any;
}

// Asks for one job's stacks and prints them: a socket that gathers every
// node (a multi-node agent, the ssh or Slurm launcher) is asked alone; else
// each agent of the job on this machine.
int DumpJob(const std::vector<RunningJob>& sockets) {
  std::vector<RunningJob> ask;
  for (const RunningJob& j : sockets) {
    if (j.info.whole_job()) {
      ask = {j};
      break;
    }
  }
  if (ask.empty()) ask = sockets;
  int failed = 0;
  for (const RunningJob& j : ask) {
    absl::StatusOr<v1::ControlReply> r = AskAgent(j.socket_path, v1::ControlRequest::STACKS, kAskTimeoutMs);
    if (!r.ok()) {
      ++failed;
      Say(absl::StrCat("host ", j.info.host(), " (pid ", j.info.pid(), "): ", r.status().message()));
      continue;
    }
    const bool ok = r->whole_job() ? PrintGathered(*r) : PrintNode(*r, /*gathered=*/false);
    if (!ok) ++failed;
  }
  return failed == static_cast<int>(ask.size()) ? kExitLauncherFailed : 0;
}

}  // namespace

int RunStacksCommand(const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& env) {
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) return WriteAll(1, kUsage), 0;
  if (args.size() > 1 || (!args.empty() && !args[0].empty() && args[0][0] == '-')) {
    return Say1(kExitBadInput, absl::StrCat("drun stacks takes one RUN_ID at most; ", kUsage));
  }
  const std::string wanted = args.empty() ? "" : args[0];
  absl::StatusOr<std::string> dir = ControlDir(env, /*create=*/false);
  std::vector<RunningJob> all = dir.ok() ? ListRunningJobs(*dir) : std::vector<RunningJob>{};
  if (!dir.ok() && !absl::IsNotFound(dir.status())) return Say1(kExitLauncherFailed, std::string(dir.status().message()));
  if (all.empty()) {
    return Say1(kExitLauncherFailed,
                absl::StrCat("no drun job of yours (uid ", geteuid(),
                             ") is running on this machine (run drun stacks where the job was started, "
                             "or on one of its nodes)"));
  }
  std::map<std::string, std::vector<RunningJob>> by_run;
  for (const RunningJob& j : all) by_run[j.info.run_id()].push_back(j);
  if (!wanted.empty()) {
    auto it = by_run.find(wanted);
    if (it == by_run.end()) {
      return Say1(kExitLauncherFailed,
                  absl::StrCat("no running drun job has run id '", wanted, "'; running: ", Describe(by_run)));
    }
    return DumpJob(it->second);
  }
  if (by_run.size() > 1) {
    return Say1(kExitBadInput, absl::StrCat(by_run.size(), " drun jobs of yours are running: ", Describe(by_run),
                                            "; name one: drun stacks RUN_ID"));
  }
  return DumpJob(by_run.begin()->second);
}

}  // namespace drun
