#include "agent/agent_machine.h"

#include <signal.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rendezvous/base/exit_code.h"
#include "rendezvous/base/signal_name.h"

namespace drun {

namespace {

AgentAction Act(AgentAction::Kind kind) {
  AgentAction a;
  a.kind = kind;
  return a;
}

AgentAction WithSignal(AgentAction::Kind kind, int sig) {
  AgentAction a = Act(kind);
  a.signal = sig;
  return a;
}

AgentAction SayLine(std::string text) {
  AgentAction a = Act(AgentAction::kSay);
  a.text = std::move(text);
  return a;
}

AgentAction Report(const WorkerExit& e, bool hung) {
  AgentAction a = Act(AgentAction::kReportFailure);
  a.failure = e;
  a.hung = hung;
  return a;
}

void Append(AgentActions* to, AgentActions more) {
  for (AgentAction& a : more) to->push_back(std::move(a));
}

bool IsUserSignal(int sig) { return sig == SIGUSR1 || sig == SIGUSR2; }

}  // namespace

GroupStatus StatusOf(const WorkerProcesses& group) {
  GroupStatus s;
  s.first_failure = group.first_failure();
  s.done = group.done();
  s.all_succeeded = group.all_succeeded();
  s.alive_ranks = group.alive_ranks();
  return s;
}

bool ApplyToGroup(const AgentAction& action, WorkerProcesses* group) {
  switch (action.kind) {
    case AgentAction::kStopGroup:
      group->Stop(action.signal, action.grace);
      return true;
    case AgentAction::kKillGroup:
      group->KillNow();
      return true;
    case AgentAction::kForwardSignal:
      group->Forward(action.signal);
      return true;
    default:
      return false;
  }
}

AgentMachine::AgentMachine(Config config) : config_(std::move(config)) {}

namespace {

using Cell = AgentMachine::Cell;
constexpr Cell Does(const char* why) { return {AgentMachine::CellKind::kAct, why}; }
constexpr Cell Ignores(const char* why) { return {AgentMachine::CellKind::kIgnore, why}; }
constexpr Cell Never(const char* why) { return {AgentMachine::CellKind::kCannotHappen, why}; }

// Reasons shared by several cells.
constexpr const char* kStartOnce = "Start is the first event, once, in the initial kRendezvous";
constexpr const char* kOnlyJoined =
    "the server assigns a round only to a node that sent Join, which it sends in kRendezvous alone";
constexpr const char* kNoGroup = "no group: OnGroup is called only while a group exists";
constexpr const char* kStartedHere =
    "a start fails in the state whose action started the group (kSetup, kRunning) and is "
    "reported at once";
constexpr const char* kStoppingExits = "stopping: exits are not failures";
constexpr const char* kStoppedGroup = "the group is gone after the stop: what the stop was for";
constexpr const char* kHangWorkers = "the hang watch runs over workers only (kRunning)";
constexpr const char* kHangStopping =
    "the round stops: the watch is dropped with the stop; a sample of the same wake-up comes late";
constexpr const char* kNoDeadline = "no stop is under way, so no SIGKILL deadline is set";
constexpr const char* kKill = "the stop's grace has passed: SIGKILL, naming the ranks still alive";
constexpr const char* kShutDown =
    "the first stop signal: Leaving, the signal's exit, the workers get it with their grace";
constexpr const char* kForward = "SIGUSR1/SIGUSR2 reach the group (not when slurmstepd sent them)";
constexpr const char* kLauncherStop =
    "the launcher's first stop signal is this agent's stop signal; its next kills the workers";
constexpr const char* kLauncherGone =
    "the launcher died or its connection was lost: stop as on SIGHUP";
constexpr const char* kDone = "exiting: every later event is ignored";

// The machine, cell by cell: rows are states, columns events, in the order
// of their enums.
constexpr int kS = AgentMachine::kStates;
constexpr int kE = AgentMachine::kEvents;
const Cell kCells[kS][kE] = {
    // kRendezvous: no group; a Join was sent or the round's end reported.
    {Does("join the first round"),
     Does("start the --node-setup command (once per agent) or the round's workers"),
     Does("the round stopped while this node had no group: join the next"),
     Does("the job ended: exit with the Finish's code"),
     Does("rejected: exit 1 with the server's reason"),
     Never(kNoGroup), Never(kNoGroup),
     Never(kStartedHere),
     Ignores("the round ended meanwhile; no workers to watch"),
     Does("a stop signal while waiting: Leaving, said in one line, exit"),
     Ignores("no workers to pass SIGUSR1/SIGUSR2 to"),
     Does(kLauncherStop), Does(kLauncherGone), Never(kNoDeadline)},
    // kSetup: the --node-setup command runs.
    {Never(kStartOnce), Never(kOnlyJoined),
     Does("the server stops the round: stop the setup, rejoin once it is gone"),
     Does("the job ended: stop the setup, then exit"),
     Does("rejected: stop the setup, then exit 1"),
     Does("the setup failed: report it (rank -1); no workers start"),
     Does("the setup is gone: all succeeded starts the workers (and never the setup again); "
         "otherwise it failed, reported as such"),
     Does("a setup that did not start is a failed setup: said, reported; no workers start"),
     Never(kHangWorkers), Does(kShutDown), Does(kForward), Does(kLauncherStop), Does(kLauncherGone),
     Never(kNoDeadline)},
    // kSetupFailed: the failed setup was reported; waiting for it to be gone.
    {Never(kStartOnce), Never(kOnlyJoined),
     Does("the server stops the round: stop what is left of the setup, rejoin once gone"),
     Does("the job ended: stop what is left of the setup, then exit"),
     Does("rejected: stop what is left of the setup, then exit 1"),
     Ignores("reported already: one outcome per round"),
     Does("the failed setup is gone: wait for the server's word, without workers"),
     Never(kStartedHere), Never(kHangWorkers), Does(kShutDown), Does(kForward), Does(kLauncherStop),
     Does(kLauncherGone), Never(kNoDeadline)},
    // kRunning: the round's workers run, their outcome not reported yet.
    {Never(kStartOnce), Never(kOnlyJoined),
     Does("the server stops the round: SIGTERM, rejoin once the workers are gone"),
     Does("the job ended: SIGTERM, exit once the workers are gone"),
     Does("rejected: SIGTERM, exit 1 once the workers are gone"),
     Does("a worker failed: report it, SIGTERM the others"),
     Does("every worker succeeded: report the round's success and wait for the server; "
         "not all succeeded waits for the failure, which comes as kGroupFailed"),
     Does("the workers could not be started: said, reported, what started is killed"),
     Does("the round hangs: report it, SIGTERM the workers"),
     Does(kShutDown), Does(kForward), Does(kLauncherStop), Does(kLauncherGone), Never(kNoDeadline)},
    // kStopping: after this node's reported failure or hang.
    {Never(kStartOnce), Never(kOnlyJoined),
     Does("the server stops the round: SIGTERM again (the deadline stands), rejoin once stopped"),
     Does("the job ended: exit once the workers are gone"),
     Does("rejected: exit 1 once the workers are gone"),
     Ignores(kStoppingExits), Does(kStoppedGroup),
     Never(kStartedHere), Ignores(kHangStopping), Does(kShutDown), Does(kForward),
     Does(kLauncherStop), Does(kLauncherGone), Does(kKill)},
    // kStoppingToRejoin: the server stopped the round.
    {Never(kStartOnce), Never(kOnlyJoined),
     Ignores("one Stop per round, and this node joins no later round before it is stopped"),
     Does("the job ended: exit once stopped, rather than rejoin"),
     Does("rejected: exit 1 once stopped, rather than rejoin"),
     Ignores(kStoppingExits), Does(kStoppedGroup),
     Never(kStartedHere), Ignores(kHangStopping), Does(kShutDown), Does(kForward),
     Does(kLauncherStop), Does(kLauncherGone), Does(kKill)},
    // kStoppingToExit: the server ended the job.
    {Never(kStartOnce), Never(kOnlyJoined),
     Does("a Stop does not undo the end: SIGTERM again, the exit stands"),
     Ignores("the first Finish or Reject decides the exit"),
     Ignores("the first Finish or Reject decides the exit"),
     Ignores(kStoppingExits), Does(kStoppedGroup),
     Never(kStartedHere), Ignores(kHangStopping), Does(kShutDown), Does(kForward),
     Does(kLauncherStop), Does(kLauncherGone), Does(kKill)},
    // kShuttingDown: a stop signal; the workers have it and their grace.
    {Never(kStartOnce),
     Ignores("shutting down on a signal: no new round"),
     Ignores("the workers have the signal and their grace: no second signal"),
     Does("the end is taken without a second signal; a failed end without a failure is said"),
     Does("the end is taken without a second signal: the exit stays the signal's"),
     Ignores(kStoppingExits), Does(kStoppedGroup),
     Never(kStartedHere), Ignores(kHangStopping),
     Does("a second stop signal kills the workers at once (not slurmstepd's, nor a quick repeat)"),
     Does(kForward),
     Does("the launcher's first stop is this stop; its next kills the workers"),
     Does("the launcher closes its channel after the signal it forwarded: said, the stop goes on"),
     Does(kKill)},
    // kDone: the Exit action was given.
    {Never(kStartOnce), Ignores(kDone), Ignores(kDone), Ignores(kDone), Ignores(kDone), Never(kNoGroup),
     Never(kNoGroup), Never(kStartedHere), Ignores(kDone), Ignores(kDone), Ignores(kDone),
     Ignores(kDone), Ignores(kDone), Never(kNoDeadline)},
};

}  // namespace

const AgentMachine::Cell& AgentMachine::CellOf(State s, Event e) {
  return kCells[static_cast<int>(s)][static_cast<int>(e)];
}

const char* AgentMachine::EventName(Event e) {
  switch (e) {
    case Event::kStart: return "start";
    case Event::kAssignment: return "assignment";
    case Event::kStop: return "stop";
    case Event::kFinish: return "finish";
    case Event::kReject: return "reject";
    case Event::kGroupFailed: return "group-failed";
    case Event::kGroupDone: return "group-done";
    case Event::kStartFailed: return "start-failed";
    case Event::kHang: return "hang";
    case Event::kStopSignal: return "stop-signal";
    case Event::kUserSignal: return "user-signal";
    case Event::kLauncherSignal: return "launcher-signal";
    case Event::kLauncherGone: return "launcher-gone";
    case Event::kTick: return "tick";
  }
  return "?";
}

const char* AgentMachine::StateName(State s) {
  switch (s) {
    case State::kRendezvous: return "rendezvous";
    case State::kSetup: return "setup";
    case State::kSetupFailed: return "setup-failed";
    case State::kRunning: return "running";
    case State::kStopping: return "stopping";
    case State::kStoppingToRejoin: return "stopping-to-rejoin";
    case State::kStoppingToExit: return "stopping-to-exit";
    case State::kShuttingDown: return "shutting-down";
    case State::kDone: return "done";
  }
  return "?";
}

bool AgentMachine::Stopping() const {
  return state_ == State::kStopping || state_ == State::kStoppingToRejoin ||
         state_ == State::kStoppingToExit || state_ == State::kShuttingDown;
}

void AgentMachine::SetExit(int code, std::string message, std::optional<v1::Failure> failure) {
  exit_code_ = code;
  exit_message_ = std::move(message);
  exit_failure_ = std::move(failure);
}

AgentAction AgentMachine::ExitAction() const {
  AgentAction a = Act(AgentAction::kExit);
  a.exit_code = exit_code_;
  a.text = exit_message_;
  a.exit_failure = exit_failure_;
  return a;
}

AgentActions AgentMachine::Start(TimePoint now) {
  (void)now;
  if (!Acts(Event::kStart)) return {};
  Enter(State::kRendezvous);
  return {Act(AgentAction::kSendJoin)};
}

AgentActions AgentMachine::OnAssignment(int64_t round, TimePoint now) {
  (void)now;
  if (!Acts(Event::kAssignment)) return {};
  round_ = round;
  kill_at_.reset();  // a new group: no stop under way
  if (config_.node_setup && !setup_done_) {
    Enter(State::kSetup);
    return {Act(AgentAction::kStartSetup)};
  }
  Enter(State::kRunning);
  return {Act(AgentAction::kStartWorkers)};
}

// Sends `sig` to the group (0: none, the grace starts all the same) and moves
// to `target`, or stays in a later stopping state. The first stop of a group
// sets its SIGKILL deadline; a later one may only bring it nearer.
AgentActions AgentMachine::StopGroup(int sig, State target, TimePoint now) {
  const Duration grace = config_.shutdown_timeout;
  const TimePoint kill_at = now + grace;
  if (!Stopping() || (kill_at_ && kill_at < *kill_at_)) kill_at_ = kill_at;
  Enter(Stopping() ? std::max(state_, target) : target);
  AgentAction stop = WithSignal(AgentAction::kStopGroup, sig);
  stop.grace = grace;
  AgentActions acts = {stop};
  if (grace <= Duration::zero()) {
    kill_at_.reset();
    acts.push_back(Act(AgentAction::kKillGroup));
  }
  return acts;
}

AgentActions AgentMachine::OnStop(TimePoint now) {
  if (!Acts(Event::kStop)) return {};
  if (has_group()) return StopGroup(SIGTERM, State::kStoppingToRejoin, now);
  Enter(State::kRendezvous);
  return {Act(AgentAction::kSendJoin)};
}

// The job's end (Finish, Reject): exit once the workers are gone.
AgentActions AgentMachine::TakeEnd(int sig, TimePoint now) {
  if (has_group()) return StopGroup(sig, State::kStoppingToExit, now);
  Enter(State::kDone);
  return {ExitAction()};
}

AgentActions AgentMachine::OnFinish(const v1::Finish& f, TimePoint now) {
  if (!Acts(Event::kFinish) || std::exchange(end_taken_, true)) return {};
  AgentActions acts;
  const bool signalled = state_ == State::kShuttingDown;
  if (!signalled) {
    SetExit(f.exit_code(), f.exit_code() == 0 ? "" : absl::StrCat("job failed: ", f.message()),
            f.has_failure() ? std::optional<v1::Failure>(f.failure()) : std::nullopt);
  } else if (f.exit_code() != 0 && !f.has_failure()) {
    // Stopping on a signal already (srun's, after a node died): still say why
    // the job ended, which names the lost node.
    acts.push_back(SayLine(absl::StrCat("the job ended meanwhile: ", f.message())));
  }
  // Stopping on a signal: the workers got that one, not a SIGTERM too.
  Append(&acts, TakeEnd(signalled ? 0 : SIGTERM, now));
  return acts;
}

AgentActions AgentMachine::OnReject(const std::string& message, TimePoint now) {
  if (!Acts(Event::kReject) || std::exchange(end_taken_, true)) return {};
  const bool signalled = state_ == State::kShuttingDown;
  if (!signalled) SetExit(1, message, std::nullopt);
  // Stopping on a signal: the workers got that one, not a SIGTERM too.
  return TakeEnd(signalled ? 0 : SIGTERM, now);
}

// The group is gone after a stop: what the stop was for.
AgentActions AgentMachine::StoppedGroup(TimePoint now) {
  (void)now;
  AgentActions acts = {Act(AgentAction::kRetireGroup)};
  const State was = state_;
  kill_at_.reset();
  Enter(State::kRendezvous);
  if (was == State::kStoppingToRejoin) {
    acts.push_back(Act(AgentAction::kSendJoin));
  } else if (was == State::kStoppingToExit || was == State::kShuttingDown) {
    Enter(State::kDone);
    acts.push_back(ExitAction());
  }
  return acts;
}

AgentActions AgentMachine::OnGroup(const GroupStatus& status, TimePoint now) {
  alive_ranks_ = status.alive_ranks;
  AgentActions acts;
  if (status.first_failure && Acts(Event::kGroupFailed)) {
    Append(&acts, GroupFailed(*status.first_failure, now));
  }
  if (status.done && Acts(Event::kGroupDone)) Append(&acts, GroupDone(status, now));
  return acts;
}

// The first failure of the setup (kSetup) or of a worker (kRunning).
AgentActions AgentMachine::GroupFailed(const WorkerExit& failure, TimePoint now) {
  AgentActions acts = {Report(failure, /*hung=*/false)};
  if (state_ == State::kSetup) {
    Enter(State::kSetupFailed);
  } else {
    Append(&acts, StopGroup(SIGTERM, State::kStopping, now));
  }
  return acts;
}

AgentActions AgentMachine::GroupDone(const GroupStatus& status, TimePoint now) {
  switch (state_) {
    case State::kSetup:
      if (status.all_succeeded) {
        setup_done_ = true;
        kill_at_.reset();
        Enter(State::kRunning);
        return {Act(AgentAction::kRetireGroup), Act(AgentAction::kStartWorkers)};
      } else {
        // Gone, not all succeeded, no failure seen: it did not run at all.
        WorkerExit e;
        e.exit_code = 1;
        e.error_message = "the --node-setup command did not run";
        Enter(State::kRendezvous);
        return {Act(AgentAction::kRetireGroup), Report(e, /*hung=*/false)};
      }
    case State::kSetupFailed:
      Enter(State::kRendezvous);
      return {Act(AgentAction::kRetireGroup)};
    case State::kRunning: {
      if (!status.all_succeeded) return {};  // the failure comes as kGroupFailed
      Enter(State::kRendezvous);
      AgentAction ok = Act(AgentAction::kReportSuccess);
      ok.round = round_;
      return {Act(AgentAction::kRetireGroup), ok};
    }
    default:
      return StoppedGroup(now);
  }
}

AgentActions AgentMachine::OnStartFailed(const WorkerExit& failure, TimePoint now) {
  if (!Acts(Event::kStartFailed)) return {};
  if (state_ == State::kSetup) {
    // What did start of it is gone (WorkerGroup::Start): the empty group ends it.
    Enter(State::kSetupFailed);
    return {SayLine(absl::StrCat("cannot start --node-setup: ", failure.error_message)),
            Report(failure, /*hung=*/false)};
  }
  AgentActions acts = {SayLine(absl::StrCat("cannot start workers: ", failure.error_message)),
                       Report(failure, /*hung=*/false)};
  Append(&acts, StopGroup(SIGKILL, State::kStopping, now));
  return acts;
}

AgentActions AgentMachine::OnHang(const WorkerExit& culprit, TimePoint now) {
  if (!Acts(Event::kHang)) return {};
  AgentActions acts = {Report(culprit, /*hung=*/true)};
  Append(&acts, StopGroup(SIGTERM, State::kStopping, now));
  return acts;
}

// Inside a Slurm step, slurmstepd (our parent) signals every process of the
// step, the workers included, and scancel may deliver the same signal twice
// within milliseconds: do not forward what the workers got already, and take
// a quick repeat for the same signal rather than "again: kill at once".
AgentActions AgentMachine::OnSignal(int sig, bool from_parent, TimePoint now) {
  if (!Acts(IsUserSignal(sig) ? Event::kUserSignal : Event::kStopSignal)) return {};
  const bool from_stepd = config_.slurm_step && from_parent;
  const bool repeat = config_.slurm_step && sig == last_signal_ &&
                      now - last_signal_at_ < std::chrono::seconds(1);
  last_signal_ = sig;
  last_signal_at_ = now;
  if (repeat) return {};
  if (IsUserSignal(sig)) {
    if (!from_stepd) return {WithSignal(AgentAction::kForwardSignal, sig)};
    return {};
  }
  if (state_ != State::kShuttingDown) return ShutDown(sig, from_stepd, now);
  // Slurm ending the step (scancel, or srun --kill-on-bad-exit after another
  // agent ended) signals every process of it once more, and sends SIGKILL
  // itself after KillWait: the grace under way stands.
  if (from_stepd) return {};
  kill_at_.reset();
  return {SayLine(absl::StrCat("got ", SignalName(sig), " again: killing the workers now")),
          Act(AgentAction::kKillGroup)};
}

// The first stop signal: tell the server, take the signal's exit, and stop the
// workers with it (slurmstepd's: they have it already; the grace starts).
AgentActions AgentMachine::ShutDown(int sig, bool from_stepd, TimePoint now) {
  stop_signal_ = sig;
  // The other nodes hear of this stop as such, not as a lost node.
  AgentActions acts = {WithSignal(AgentAction::kSendLeaving, sig)};
  // Under a launcher (ssh, --launcher slurm), which reports the job's end and
  // exits 128+signal itself, this agent's status only tells srun whether to
  // end the other agents' step (--kill-on-bad-exit): a failure's status would
  // cut their workers' grace short.
  SetExit(config_.launcher_reports_end ? 0 : ExitCodeForSignal(sig), "", std::nullopt);
  if (!has_group()) {
    acts.push_back(SayLine(absl::StrCat("got ", SignalName(sig), " while waiting in the rendezvous",
                                        " (no workers were running): leaving the job")));
    Enter(State::kDone);
    acts.push_back(ExitAction());
    return acts;
  }
  acts.push_back(SayLine(absl::StrCat("got ", SignalName(sig), ": stopping the workers (",
                                  SignalName(sig), " again kills them at once)")));
  // A group already stopping (a failure's SIGTERM, the server's Stop) gets
  // this signal too, once: the stop sends it.
  Append(&acts, StopGroup(from_stepd ? 0 : sig, State::kShuttingDown, now));
  return acts;
}

// The launcher's first stop signal stops the workers with that signal (as if
// this agent had got it), the next kills them; SIGUSR1/SIGUSR2 go to the workers.
AgentActions AgentMachine::OnLauncherSignal(int sig, TimePoint now) {
  if (IsUserSignal(sig)) {
    if (!Acts(Event::kUserSignal)) return {};
    return {WithSignal(AgentAction::kForwardSignal, sig)};
  }
  if (!Acts(Event::kLauncherSignal)) return {};
  if (launcher_stops_++ == 0) {
    // Under scancel Slurm may have signalled this agent (and its workers)
    // already: then this is the same stop, not a second one.
    if (state_ == State::kShuttingDown) return {};
    return OnSignal(sig, /*from_parent=*/false, now);
  }
  AgentActions acts = {
      SayLine(absl::StrCat("the launcher got ", SignalName(sig), " again: killing the workers now"))};
  if (has_group()) {
    kill_at_.reset();
    acts.push_back(Act(AgentAction::kKillGroup));
  }
  return acts;
}

AgentActions AgentMachine::OnLauncherGone(TimePoint now) {
  if (!Acts(Event::kLauncherGone)) return {};
  if (state_ == State::kShuttingDown) {
    // The launcher closes the channel after the signal it forwarded: that
    // stop goes on, with its grace.
    return {SayLine(absl::StrCat("the launcher's channel closed; already stopping on ",
                             SignalName(stop_signal_)))};
  }
  // No signal came first: the launcher died or its connection was lost.
  AgentActions acts = {SayLine("the launcher's channel closed: stopping")};
  Append(&acts, OnSignal(SIGHUP, /*from_parent=*/false, now));
  return acts;
}

AgentActions AgentMachine::OnTick(TimePoint now) {
  if (!kill_at_ || now < *kill_at_ || !Acts(Event::kTick)) return {};
  kill_at_.reset();
  const double secs = std::chrono::duration<double>(config_.shutdown_timeout).count();
  std::string who = alive_ranks_.empty() ? "the workers"
                    : absl::StrCat(alive_ranks_.size() == 1 ? "rank " : "ranks ",
                                   absl::StrJoin(alive_ranks_, ", "));
  return {SayLine(absl::StrCat(who, " still alive after --shutdown-timeout ", secs, " s: killing ",
                               alive_ranks_.size() == 1 ? "it" : "them", " (SIGKILL)")),
          Act(AgentAction::kKillGroup)};
}

}  // namespace drun
