// AgentMachine: the agent's decisions (agent/agent.h) as a pure state machine,
// in the manner of rendezvous/rendezvous_state.h.
//
// No I/O, no threads, no clock: every event carries `now`, and every answer is
// a list of actions for the agent's loop to carry out (send a Join, start the
// round's workers, stop them with signal S, kill them, exit with code C...).
// The loop turns descriptors and timers into events and actions into calls;
// the worker group's news comes in as its status (StatusOf), and the group
// actions go to it through the WorkerProcesses interface (ApplyToGroup), so
// tests drive the machine with a fake group and no process.
//
// States (one at a time; the group exists in every state but kRendezvous and
// kDone):
//   kRendezvous        no group: a Join was sent, or this node's round ended
//                      and was reported; the server's word is awaited.
//   kSetup             the --node-setup command runs (once per agent).
//   kSetupFailed       it failed (reported); waiting for it to be gone.
//   kRunning           the round's workers run; their outcome is not reported.
//   kStopping          stopping after this node's reported failure or hang: the
//                      server says what next (Stop, Finish).
//   kStoppingToRejoin  the server stopped the round: join again once stopped.
//   kStoppingToExit    the server ended the job (Finish, Reject).
//   kShuttingDown      a stop signal (here, or the launcher's): exit once the
//                      workers are gone; another signal kills them.
//   kDone              exit (the Exit action said with what); every later
//                      event is ignored.
// A stopping state only moves up that list (a Stop does not undo a Finish).
//
// Every (state x event) cell is declared, as s6-supervise declares its
// supervisor's: the table in agent_machine.cc (CellOf) says for each cell
// either that the handler acts, or that the event is ignored there, or that it
// cannot happen there, each with its reason; a handler looks its cell up first
// and does nothing in a cell that does not act. tests/unit/agent_machine_test.cc
// walks all of them.
//
// Promises:
//  - A stop gives the workers --shutdown-timeout: SIGKILL once it has passed
//    (OnTick, NextDeadline), said in one line naming the ranks still alive
//    and the timeout, or at once on a second stop signal.
//  - A stop signal while no group runs (waiting in the rendezvous) is said in
//    one line before the exit.
//  - While shutting down no Assignment is taken and the server's Stop,
//    Finish or Reject sends nothing more: the workers got the signal and
//    their grace.
//  - A --node-setup command that cannot be started is a failed setup: no
//    workers start after it.
//  - Exactly one outcome per round is reported (failure, hang or success),
//    and none for what happens while stopping.
//  - The first Finish or Reject decides the exit, unless a signal came first
//    (then the exit is the signal's, and a Finish without a failure is said).
#ifndef DRUN_AGENT_AGENT_MACHINE_H_
#define DRUN_AGENT_AGENT_MACHINE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/worker_group.h"
#include "drun/v1/rendezvous.pb.h"
#include "rendezvous/base/clock.h"

namespace drun {

struct AgentAction {
  enum Kind {
    kSendJoin,        // ask for the next round
    kStartSetup,      // start the --node-setup command as the group
    kStartWorkers,    // start the round's workers as the group
    kReportFailure,   // send Failed (failure, hung) for this round
    kReportSuccess,   // send Succeeded for `round`
    kSendLeaving,     // tell the server this node stops on `signal`
    kStopGroup,       // send `signal` (0: none) to the group; grace `grace`
    kKillGroup,       // SIGKILL the group now
    kForwardSignal,   // send `signal` to the group, nothing else
    kRetireGroup,     // the group is gone: record its outcome and drop it
    kSay,             // a line of drun's on the console: `text`
    kExit,            // leave the loop with `exit_code`, `text`, `failure`
  };
  Kind kind;
  int signal = 0;
  Duration grace = Duration::zero();
  int64_t round = 0;
  bool hung = false;
  WorkerExit failure;
  int exit_code = 0;
  std::string text;
  std::optional<v1::Failure> exit_failure;
};
using AgentActions = std::vector<AgentAction>;

// What the machine needs to know of the group after each wake-up.
struct GroupStatus {
  std::optional<WorkerExit> first_failure;
  bool done = false;
  bool all_succeeded = false;
  // The global ranks (local ranks where none) of the workers still alive,
  // for the line said when the stop's grace runs out.
  std::vector<int> alive_ranks;
};
GroupStatus StatusOf(const WorkerProcesses& group);
// Carries out a group action (stop, kill, forward) on `group`; false for
// any other action.
bool ApplyToGroup(const AgentAction& action, WorkerProcesses* group);

class AgentMachine {
 public:
  enum class State {
    kRendezvous,
    kSetup,
    kSetupFailed,
    kRunning,
    kStopping,
    kStoppingToRejoin,
    kStoppingToExit,
    kShuttingDown,
    kDone,
  };
  struct Config {
    bool node_setup = false;  // a --node-setup command runs before the first workers
    Duration shutdown_timeout = std::chrono::seconds(30);
    // A launcher (ssh, --launcher slurm) reports the job's end and exits
    // 128+signal itself: this agent then exits 0 on a signal.
    bool launcher_reports_end = false;
    // Inside a Slurm step: slurmstepd signals the workers too, and scancel may
    // send the same signal twice within a second.
    bool slurm_step = false;
  };

  explicit AgentMachine(Config config);

  // The agent said hello: join the first round.
  AgentActions Start(TimePoint now);
  // Server messages. An Assignment returns no actions when it is not taken.
  AgentActions OnAssignment(int64_t round, TimePoint now);
  AgentActions OnStop(TimePoint now);
  AgentActions OnFinish(const v1::Finish& finish, TimePoint now);
  // `message`: the whole exit message ("the rendezvous (...) rejected ...").
  AgentActions OnReject(const std::string& message, TimePoint now);
  // The group's status, after every wake-up (idempotent): its first failure
  // is the event kGroupFailed, its end kGroupDone (in that order).
  AgentActions OnGroup(const GroupStatus& status, TimePoint now);
  // The group could not be started (kStartSetup, kStartWorkers): a setup that
  // did not start is a failed setup, workers that did not start the round's
  // failure.
  AgentActions OnStartFailed(const WorkerExit& failure, TimePoint now);
  // --hang-timeout: the round hangs, `culprit` standing for it. No actions
  // when the round is no longer running.
  AgentActions OnHang(const WorkerExit& culprit, TimePoint now);
  // A signal through the signalfd; `from_parent`: this agent's parent sent it
  // (inside a Slurm step, that is slurmstepd, which signalled the workers too).
  AgentActions OnSignal(int sig, bool from_parent, TimePoint now);
  // The launcher forwarded `sig` on the lifeline.
  AgentActions OnLauncherSignal(int sig, TimePoint now);
  // The lifeline ended.
  AgentActions OnLauncherGone(TimePoint now);
  // The stop's grace.
  AgentActions OnTick(TimePoint now);
  std::optional<TimePoint> NextDeadline() const { return kill_at_; }

  State state() const { return state_; }
  bool has_group() const { return state_ != State::kRendezvous && state_ != State::kDone; }
  int stop_signal() const { return stop_signal_; }
  static const char* StateName(State s);

  // The events, one per handler (OnGroup's two, and OnSignal's and
  // OnLauncherSignal's stop and user signals, apart).
  enum class Event {
    kStart,
    kAssignment,
    kStop,
    kFinish,
    kReject,
    kGroupFailed,     // OnGroup: the group's first failure is known
    kGroupDone,       // OnGroup: every process of the group is finished
    kStartFailed,
    kHang,
    kStopSignal,      // OnSignal with a stop signal (INT, TERM, HUP, QUIT)
    kUserSignal,      // OnSignal or OnLauncherSignal with SIGUSR1, SIGUSR2
    kLauncherSignal,  // OnLauncherSignal with a stop signal
    kLauncherGone,
    kTick,            // OnTick once the stop's SIGKILL deadline has passed
  };
  static constexpr int kStates = static_cast<int>(State::kDone) + 1;
  static constexpr int kEvents = static_cast<int>(Event::kTick) + 1;
  static const char* EventName(Event e);
  // What a cell does: the handler acts, or the event is ignored in that
  // state, or it cannot reach that state (the reason says why); the last two
  // return no actions and leave the state as it is.
  enum class CellKind { kAct, kIgnore, kCannotHappen };
  struct Cell {
    CellKind kind;
    const char* why;  // what the handler does, or why it does nothing
  };
  static const Cell& CellOf(State s, Event e);

 private:
  AgentActions StopGroup(int sig, State target, TimePoint now);
  AgentActions ShutDown(int sig, bool from_stepd, TimePoint now);
  AgentActions TakeEnd(int sig, TimePoint now);
  AgentActions StoppedGroup(TimePoint now);
  AgentActions GroupFailed(const WorkerExit& failure, TimePoint now);
  AgentActions GroupDone(const GroupStatus& status, TimePoint now);
  // Whether `e`'s cell in the current state acts.
  bool Acts(Event e) const { return CellOf(state_, e).kind == CellKind::kAct; }
  void Enter(State s) { state_ = s; }
  // Records the exit's code, message and failure; said by the Exit action.
  void SetExit(int code, std::string message, std::optional<v1::Failure> failure);
  AgentAction ExitAction() const;
  bool Stopping() const;

  Config config_;
  State state_ = State::kRendezvous;
  int64_t round_ = -1;
  bool setup_done_ = false;  // --node-setup succeeded: later rounds start workers at once
  bool end_taken_ = false;   // a Finish or Reject was handled; later ones are ignored
  int stop_signal_ = 0;      // the signal this agent stops on
  int last_signal_ = 0;      // Slurm's repeats: the last signal and when
  TimePoint last_signal_at_;
  int launcher_stops_ = 0;   // stop signals forwarded on the lifeline
  std::optional<TimePoint> kill_at_;  // SIGKILL once the stop's grace has passed
  std::vector<int> alive_ranks_;      // the group's, as of the last OnGroup
  int exit_code_ = 0;
  std::string exit_message_;
  std::optional<v1::Failure> exit_failure_;
};

}  // namespace drun

#endif  // DRUN_AGENT_AGENT_MACHINE_H_
