// The agent's part of `drun stacks` and --hang-timeout (docs/hangs.md): the
// control socket, sampling the workers for progress, and what a hang does.
// Member functions of Agent (agent/agent.h), kept apart from the job loop.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/agent.h"
#include "agent/process.h"
#include "rendezvous/base/private_files.h"
#include "rendezvous/base/exit_code.h"
#include "rendezvous/base/say.h"
#include "rendezvous/stacks_relay.h"

namespace drun {

void Agent::OpenControl() {
  if (opt_.control_dir.empty()) return;
  absl::StatusOr<ControlListener> l = ControlListener::Open(opt_.control_dir);
  if (!l.ok()) {
    Log(absl::StrCat("drun stacks will not find this job: ", l.status().message()));
    return;
  }
  control_.emplace(*std::move(l));
  guardian_->RemoveOnDeath(control_->path());  // drun stacks never lists a job killed with -9
}

namespace {

v1::RankSummary ToSummary(const RankStack& r) {
  v1::RankSummary s;
  s.set_rank(r.target.rank);
  s.set_local_rank(r.target.local_rank);
  s.set_host(r.target.host);
  s.set_pid(r.target.pid);
  s.set_state(std::string(1, r.state));
  s.set_wchan(r.wchan);
  s.set_where(r.where);
  s.set_cpu_last_interval(r.target.cpu_last_interval);
  s.set_window_s(r.target.window_s);
  s.set_quiet_s(r.target.quiet_s);
  return s;
}

// How long `pid`'s main thread was runnable but waited for a CPU, so far
// (/proc/PID/schedstat: CPU ns, run_delay ns, timeslices); 0 when unknown
// (the process is gone, or a kernel without schedstats).
double RunDelaySeconds(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/schedstat"));
  unsigned long long cpu_ns = 0, wait_ns = 0;
  if (!(f >> cpu_ns >> wait_ns)) return 0;
  return static_cast<double>(wait_ns) / 1e9;
}

// The rank whose failure ends a hung round: the culprit, else (none stands
// out) the first, whose root cause then says that none does.
int Reporter(const StackDump& dump, int culprit) {
  if (culprit >= 0 || dump.ranks.empty()) return culprit;
  return dump.ranks.front().target.rank;
}

RankStack FromSummary(const v1::RankSummary& s) {
  RankStack r;
  r.target.rank = s.rank();
  r.target.local_rank = s.local_rank();
  r.target.host = s.host();
  r.target.pid = s.pid();
  r.target.cpu_last_interval = s.cpu_last_interval();
  r.target.window_s = s.window_s();
  r.target.quiet_s = s.quiet_s();
  r.state = s.state().empty() ? '?' : s.state()[0];
  r.wchan = s.wchan();
  r.where = s.where();
  return r;
}

}  // namespace

v1::ControlReply Agent::ControlHeader() const {
  v1::ControlReply reply;
  reply.set_run_id(opt_.spec.run_id());
  reply.set_host(opt_.hostname);
  reply.set_pid(getpid());
  reply.set_local_ranks(group_ && !group_is_setup_ ? static_cast<int>(group_->activity().size()) : 0);
  reply.set_world_size(assignment_ ? assignment_->world_size() : 0);
  return reply;
}

std::string Agent::NoStacksReason() const {
  if (!opt_.capture) return "this drun was built without the stack reader";
  if (group_ && !group_is_setup_ && !group_->activity().empty()) return "";
  return machine_.state() == AgentMachine::State::kRendezvous ? "no worker runs yet: the rendezvous is waiting"
                                      : "no worker runs on this node now";
}

// A caller on the control socket: INFO is answered at once. STACKS, on one
// node, waits for a dump (one dump serves every caller waiting when it
// completes); on many, for every node's answer through the rendezvous.
void Agent::OnControl(TimePoint now) {
  v1::ControlRequest request;
  UniqueFd caller = control_->Accept(&request);
  if (!caller) return;
  v1::ControlReply reply = ControlHeader();
  if (request.kind() == v1::ControlRequest::INFO) {
    reply.set_whole_job(rdzv_->relays_stacks());
    return SendControlReply(caller, reply);
  }
  if (rdzv_->relays_stacks()) {
    v1::AgentMessage ask;
    ask.mutable_stacks_request()->set_request_id(++gather_seq_);
    rdzv_->Send(ask, now);
    gather_callers_[gather_seq_].push_back(std::move(caller));
    return;
  }
  reply.set_error(NoStacksReason());
  if (!reply.error().empty()) return SendControlReply(caller, reply);
  stack_callers_.push_back(std::move(caller));
  StartDump(/*for_hang=*/false, now);
}

void Agent::OnStacksWanted(uint64_t id, bool for_hang, TimePoint now) {
  v1::ControlReply reply = ControlHeader();
  reply.set_error(NoStacksReason());
  if (!reply.error().empty()) return SendStacksReply(id, reply, now);
  stack_asks_.push_back(id);
  StartDump(for_hang, now);
}

void Agent::SendStacksReply(uint64_t id, const v1::ControlReply& reply, TimePoint now) {
  v1::AgentMessage m;
  m.mutable_stacks_reply()->set_request_id(id);
  *m.mutable_stacks_reply()->mutable_reply() = reply;
  StacksRelay::CapDump(m.mutable_stacks_reply()->mutable_reply(), StacksRelay::kAnswerBudget);
  rdzv_->Send(m, now);
}

void Agent::OnStacksGathered(const v1::StacksGathered& g) {
  auto it = gather_callers_.find(g.request_id());
  if (it == gather_callers_.end()) return;
  const v1::ControlReply reply =
      GatheredReply(ControlHeader(), std::vector<v1::ControlReply>(g.nodes().begin(), g.nodes().end()));
  for (const UniqueFd& caller : it->second) SendControlReply(caller, reply);
  gather_callers_.erase(it);
}

// What the agent knows of each live worker, for a dump.
std::vector<RankTarget> Agent::DumpTargets(TimePoint now) const {
  std::vector<RankTarget> targets;
  if (!group_ || group_is_setup_) return targets;
  for (const WorkerGroup::Activity& a : group_->activity()) {
    RankTarget t;
    t.host = opt_.hostname;
    t.rank = a.rank;
    t.local_rank = a.local_rank;
    t.pid = a.pid;
    t.last_line = a.last_line;
    // Known always, --hang-timeout or not (the group notes every worker's output).
    t.quiet_s = DurationToSeconds(now - a.last_output);
    if (hang_) {
      auto it = hang_->ranks().find(a.rank);
      if (it != hang_->ranks().end()) {
        t.cpu_last_interval = it->second.cpu_last_interval;
        t.window_s = DurationToSeconds(hang_->interval());
      }
    }
    targets.push_back(std::move(t));
  }
  return targets;
}

void Agent::StartDump(bool for_hang, TimePoint now) {
  dump_for_hang_ = dump_for_hang_ || for_hang;
  if (dump_) return;  // the dump under way serves this request too
  if (group_) group_->NoteOutput(now);  // what the pumps moved since the last wake-up
  dump_ = std::make_unique<DumpJob>(DumpTargets(now), opt_.capture);
}

void Agent::OnDumpDone(TimePoint now) {
  std::optional<StackDump> dump = dump_->Take();
  if (!dump) return;
  dump_.reset();
  const bool hang = std::exchange(dump_for_hang_, false);
  const std::string text = FormatDump(*dump);
  RunReport::Dump record;
  record.time_unix_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  record.hang = hang;
  record.file = WriteDumpFile(text, hang);
  record.text = text;
  v1::ControlReply reply = ControlHeader();
  reply.set_local_ranks(static_cast<int>(dump->ranks.size()));
  reply.set_dump(text);
  reply.set_dump_file(record.file);
  reply.set_capture_ms(dump->capture_ms);
  for (UniqueFd& caller : stack_callers_) SendControlReply(caller, reply);
  for (const RankStack& r : dump->ranks) *reply.add_ranks() = ToSummary(r);
  for (uint64_t id : stack_asks_) SendStacksReply(id, reply, now);
  stack_asks_.clear();
  stack_callers_.clear();
  if (hang && rdzv_->relays_stacks()) {
    hang_ranks_ = dump->ranks;  // the server sends every node's (HangFound)
  } else if (hang) {
    OnHang(*dump, record, now);
  }
  report_.AddDump(std::move(record));
}

std::vector<HangMonitor::Sample> Agent::SampleWorkers() const {
  std::vector<HangMonitor::Sample> samples;
  if (!group_ || group_is_setup_) return samples;
  for (const WorkerGroup::Activity& a : group_->activity()) {
    std::optional<ProcStat> st = ReadProcStat(a.pid);
    samples.push_back({a.rank, a.output_bytes, st ? st->cpu_seconds : 0, RunDelaySeconds(a.pid)});
  }
  return samples;
}

// Workers of a new round started: watch them from now.
void Agent::StartHangWatch(TimePoint now) {
  if (opt_.spec.hang_timeout_s() <= 0) return;
  hang_.emplace(SecondsToDuration(opt_.spec.hang_timeout_s()));
  hang_->Start(SampleWorkers(), now);
  hang_quiet_sent_ = false;
}

void Agent::WatchHang(TimePoint now) {
  if (!hang_ || machine_.state() != AgentMachine::State::kRunning || !group_ || dump_for_hang_) return;
  if (!hang_->NextSample() || now < *hang_->NextSample()) return;
  hang_->Observe(SampleWorkers(), now);
  const bool hung = hang_->Hung(now);
  if (!rdzv_->relays_stacks()) {
    if (hung) StartDump(/*for_hang=*/true, now);
    return;
  }
  // Many nodes: the job hangs only when every node is quiet; the server decides.
  if (hung == hang_quiet_sent_) return;
  hang_quiet_sent_ = hung;
  v1::AgentMessage m;
  m.mutable_hang_quiet()->set_round(assignment_ ? assignment_->round() : 0);
  m.mutable_hang_quiet()->set_quiet(hung);
  rdzv_->Send(m, now);
}

// Under --log-dir, a dump is also kept as a file of the run's attempt
// (LogLayout::StacksFile). Returns its path, "" when none.
std::string Agent::WriteDumpFile(const std::string& text, bool hang) {
  if (!assignment_) return "";
  const std::string path = logs_.StacksFile(assignment_->round(), hang, absl::ToUnixMillis(absl::Now()));
  if (path.empty()) return "";
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kPrivateFileMode));
  if (!fd || WriteAll(fd.get(), text) != 0) {
    Log(absl::StrCat("cannot write the stack dump to ", path, ": ", strerror(errno)));
    return "";
  }
  return path;
}

// No rank of this node made progress for --hang-timeout, on one node: say
// where each one is, and end the round as a failure of the rank that stands out.
void Agent::OnHang(const StackDump& dump, const RunReport::Dump& record, TimePoint now) {
  DeclareHang(dump, hang_ ? hang_->QuietestRank() : -1,
              record.file.empty() ? record.text : "", record.file, now);
}

// Every node of the round was quiet (HangFound): each node's summaries, and
// where each kept its full dump. The agent of the rank that stands out says so.
void Agent::OnHangFound(const v1::HangFound& found, TimePoint now) {
  if (!assignment_ || found.round() != assignment_->round()) return;
  StackDump all;
  std::vector<std::string> files;
  std::string unkept;  // the dumps of nodes without --log-dir are shown whole
  for (const v1::ControlReply& node : found.nodes()) {
    for (const v1::RankSummary& r : node.ranks()) all.ranks.push_back(FromSummary(r));
    if (!node.dump_file().empty()) files.push_back(absl::StrCat(node.host(), ":", node.dump_file()));
    if (!node.error().empty()) files.push_back(absl::StrCat(node.host(), ": ", node.error()));
    if (node.dump_file().empty()) unkept += node.dump();
  }
  std::sort(all.ranks.begin(), all.ranks.end(),
            [](const RankStack& a, const RankStack& b) { return a.target.rank < b.target.rank; });
  const int reporter = Reporter(all, Culprit(all, QuietestRank(all)));
  const bool mine = std::any_of(hang_ranks_.begin(), hang_ranks_.end(), [&](const RankStack& r) {
    return r.target.rank == reporter;
  });
  if (!mine) return;  // its own agent reports it; the server stops this node's ranks
  DeclareHang(all, QuietestRank(all), unkept, absl::StrJoin(files, ", "), now);
}

// The rank to blame: the odd one; else the one that went quiet first; else
// none (-1): all alike, or nothing tells them apart.
int Agent::Culprit(const StackDump& dump, int quietest) {
  const std::vector<int> odd = OddRanks(dump);
  if (!odd.empty()) return odd.front();
  return quietest;
}



// Prints the table of every rank in `dump` (and `full_text`, or where the full
// dumps are) and reports the round's failure as this node's rank's hang.
void Agent::DeclareHang(const StackDump& dump, int quietest, const std::string& full_text,
                        const std::string& files, TimePoint now) {
  if (machine_.state() != AgentMachine::State::kRunning || !group_) return;  // it ended meanwhile
  const int culprit = Culprit(dump, quietest);
  const int reporter = Reporter(dump, culprit);
  Log(absl::StrFormat("no rank made progress (output or CPU) for %gs (--hang-timeout); where each one is:",
                      opt_.spec.hang_timeout_s()));
  console_.Text(FormatHangTable(dump, quietest));
  if (!files.empty()) Log(absl::StrCat("every rank's full stack: ", files));
  if (!full_text.empty()) console_.Text(full_text);
  WorkerExit e;
  e.exit_code = kExitHung;
  e.when = now;
  for (const RankStack& r : dump.ranks) {
    if (r.target.rank != reporter) continue;
    e.rank = r.target.rank;
    e.local_rank = r.target.local_rank;
    e.pid = r.target.pid;
    e.error_message = absl::StrFormat("hung: no rank made progress for %gs; %s",
                                      opt_.spec.hang_timeout_s(), HangVerdict(dump, culprit));
  }
  Apply(machine_.OnHang(e, now), now);
  hang_.reset();
}

}  // namespace drun
