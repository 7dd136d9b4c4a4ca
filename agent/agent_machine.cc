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
  Enter(State::kRendezvous);
  return {Act(AgentAction::kSendJoin)};
}

AgentActions AgentMachine::OnAssignment(int64_t round, TimePoint now) {
  (void)now;
  if (state_ == State::kShuttingDown || state_ == State::kDone) return {};
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
  // Stopping on a signal already: the workers have it and their grace,
  // and no second signal (a SIGTERM to workers that got SIGINT).
  if (state_ == State::kShuttingDown || state_ == State::kDone) return {};
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
  if (state_ == State::kDone || std::exchange(end_taken_, true)) return {};
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
  if (state_ == State::kDone || std::exchange(end_taken_, true)) return {};
  if (state_ != State::kShuttingDown) SetExit(1, message, std::nullopt);
  return TakeEnd(SIGTERM, now);
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
  AgentActions acts;
  alive_ranks_ = status.alive_ranks;
  switch (state_) {
    case State::kSetup:
      if (status.first_failure) {
        acts.push_back(Report(*status.first_failure, /*hung=*/false));
        Enter(State::kSetupFailed);
      }
      [[fallthrough]];
    case State::kSetupFailed:
      if (!status.done) return acts;
      acts.push_back(Act(AgentAction::kRetireGroup));
      Enter(State::kRendezvous);
      if (status.all_succeeded) {
        setup_done_ = true;
        kill_at_.reset();
        Enter(State::kRunning);
        acts.push_back(Act(AgentAction::kStartWorkers));
      }
      return acts;
    case State::kRunning:
      if (status.first_failure) {
        acts.push_back(Report(*status.first_failure, /*hung=*/false));
        Append(&acts, StopGroup(SIGTERM, State::kStopping, now));
      } else if (status.done && status.all_succeeded) {
        acts.push_back(Act(AgentAction::kRetireGroup));
        Enter(State::kRendezvous);
        AgentAction ok = Act(AgentAction::kReportSuccess);
        ok.round = round_;
        acts.push_back(ok);
      }
      return acts;
    default:
      if (Stopping() && status.done) return StoppedGroup(now);
      return acts;
  }
}

AgentActions AgentMachine::OnStartFailed(const WorkerExit& failure, TimePoint now) {
  if (state_ != State::kRunning) return {};
  AgentActions acts = {SayLine(absl::StrCat("cannot start workers: ", failure.error_message)),
                       Report(failure, /*hung=*/false)};
  Append(&acts, StopGroup(SIGKILL, State::kStopping, now));
  return acts;
}

AgentActions AgentMachine::OnHang(const WorkerExit& culprit, TimePoint now) {
  if (state_ != State::kRunning) return {};  // it ended meanwhile
  AgentActions acts = {Report(culprit, /*hung=*/true)};
  Append(&acts, StopGroup(SIGTERM, State::kStopping, now));
  return acts;
}

// Inside a Slurm step, slurmstepd (our parent) signals every process of the
// step, the workers included, and scancel may deliver the same signal twice
// within milliseconds: do not forward what the workers got already, and take
// a quick repeat for the same signal rather than "again: kill at once".
AgentActions AgentMachine::OnSignal(int sig, bool from_parent, TimePoint now) {
  if (state_ == State::kDone) return {};
  const bool from_stepd = config_.slurm_step && from_parent;
  const bool repeat = config_.slurm_step && sig == last_signal_ &&
                      now - last_signal_at_ < std::chrono::seconds(1);
  last_signal_ = sig;
  last_signal_at_ = now;
  if (repeat) return {};
  if (IsUserSignal(sig)) {
    if (has_group() && !from_stepd) return {WithSignal(AgentAction::kForwardSignal, sig)};
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
  const bool already = Stopping();
  Append(&acts, StopGroup(from_stepd ? 0 : sig, State::kShuttingDown, now));
  if (already && !from_stepd) acts.push_back(WithSignal(AgentAction::kForwardSignal, sig));
  return acts;
}

// The launcher's first stop signal stops the workers with that signal (as if
// this agent had got it), the next kills them; SIGUSR1/SIGUSR2 go to the workers.
AgentActions AgentMachine::OnLauncherSignal(int sig, TimePoint now) {
  if (state_ == State::kDone) return {};
  if (IsUserSignal(sig)) {
    if (has_group()) return {WithSignal(AgentAction::kForwardSignal, sig)};
    return {};
  }
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
  if (state_ == State::kDone) return {};
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
  if (!kill_at_ || now < *kill_at_ || !has_group()) return {};
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
