// Every decision of the agent (agent/agent_machine.h) without processes,
// sockets or sleeps: time is a value the test advances, and the worker group
// is a fake of drun's own interface (WorkerProcesses) that records what it was
// asked, as ninja's FakeCommandRunner does.
#include "agent/agent_machine.h"

#include <signal.h>

#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rendezvous/base/signal_name.h"

#include <gtest/gtest.h>

namespace drun {
namespace {

using std::chrono::seconds;
using State = AgentMachine::State;
using Log = std::vector<std::string>;

// Every (state, event) -> state the tests take, printed at the end: the
// transitions covered.
std::set<std::string>& Seen() {
  static std::set<std::string> seen;
  return seen;
}

class PrintCoverage : public ::testing::Environment {
 public:
  void TearDown() override {
    std::cout << "transitions covered: " << Seen().size() << "\n";
    for (const std::string& t : Seen()) std::cout << "  " << t << "\n";
  }
};
const auto* const kPrintCoverage = ::testing::AddGlobalTestEnvironment(new PrintCoverage);

std::string Sig(int sig) { return sig == 0 ? std::string("no signal") : SignalName(sig); }

// The group: what the machine asked of it goes into the shared log; what it
// says (failure, gone) the test sets.
class FakeGroup : public WorkerProcesses {
 public:
  explicit FakeGroup(Log* log) : log_(log) {}
  void Stop(int sig, Duration grace) override {
    log_->push_back(absl::StrCat("stop ", Sig(sig), " grace ",
                                 std::chrono::duration_cast<seconds>(grace).count(), "s"));
  }
  void KillNow() override { log_->push_back("kill"); }
  void Forward(int sig) override { log_->push_back(absl::StrCat("forward ", Sig(sig))); }
  bool done() const override { return done_; }
  bool all_succeeded() const override { return ok_; }
  const std::optional<WorkerExit>& first_failure() const override { return failure_; }
  std::vector<int> alive_ranks() const override { return alive_; }

  std::vector<int> alive_;
  bool done_ = false;
  bool ok_ = false;
  std::optional<WorkerExit> failure_;

 private:
  Log* log_;
};

class AgentMachineTest : public ::testing::Test {
 protected:
  void Make(AgentMachine::Config c = {}) { machine_ = std::make_unique<AgentMachine>(c); }
  AgentMachine& m() {
    if (!machine_) Make();
    return *machine_;
  }

  // Carries out the actions as the agent does; returns what they did.
  Log Run(const AgentActions& actions) {
    log_.clear();
    for (const AgentAction& a : actions) Do(a);
    return log_;
  }
  void Do(const AgentAction& a) {
    if (group_ && ApplyToGroup(a, group_.get())) return;
    switch (a.kind) {
      case AgentAction::kSendJoin: return log_.push_back("join");
      case AgentAction::kStartSetup: return Started("start setup");
      case AgentAction::kStartWorkers: return Started("start workers");
      case AgentAction::kReportFailure:
        return log_.push_back(absl::StrCat(a.hung ? "report hang" : "report failure", " rank ",
                                           a.failure.rank, " code ", a.failure.exit_code));
      case AgentAction::kReportSuccess: return log_.push_back(absl::StrCat("report success ", a.round));
      case AgentAction::kSendLeaving: return log_.push_back(absl::StrCat("leaving ", Sig(a.signal)));
      case AgentAction::kRetireGroup:
        group_.reset();
        return log_.push_back("retire");
      case AgentAction::kSay: return log_.push_back(absl::StrCat("say: ", a.text));
      case AgentAction::kExit:
        exit_ = a;
        return log_.push_back(absl::StrCat("exit ", a.exit_code));
      default:
        return log_.push_back(absl::StrCat("group action without a group: ", a.kind));
    }
  }
  void Started(const std::string& what) {
    group_ = std::make_unique<FakeGroup>(&log_);
    log_.push_back(what);
  }

  // Carries out the actions of one event, recording the transition.
  template <typename F>
  Log On(const std::string& event, F f) {
    const State before = m().state();
    AgentActions acts = f();
    Seen().insert(absl::StrCat(AgentMachine::StateName(before), " --", event, "--> ",
                               AgentMachine::StateName(m().state()), acts.empty() ? " (nothing)" : ""));
    return Run(acts);
  }

  // Events, each returning what the agent did.
  Log Start() { return On("start", [&] { return m().Start(now); }); }
  Log Assign(int64_t round) { return On("assignment", [&] { return m().OnAssignment(round, now); }); }
  Log Stop() { return On("stop", [&] { return m().OnStop(now); }); }
  Log Finish(int code, bool with_failure = false, const std::string& message = "") {
    v1::Finish f;
    f.set_exit_code(code);
    f.set_message(message);
    if (with_failure) f.mutable_failure()->set_rank(3);
    return On(with_failure ? "finish(failure)" : code ? "finish(code)" : "finish(0)",
              [&] { return m().OnFinish(f, now); });
  }
  Log Reject(const std::string& message) {
    return On("reject", [&] { return m().OnReject(message, now); });
  }
  Log Signal(int sig, bool from_parent = false) {
    return On(absl::StrCat(Sig(sig), from_parent ? "(parent)" : ""),
              [&] { return m().OnSignal(sig, from_parent, now); });
  }
  Log Launcher(int sig) {
    return On(absl::StrCat("launcher ", Sig(sig)), [&] { return m().OnLauncherSignal(sig, now); });
  }
  Log LauncherGone() { return On("launcher gone", [&] { return m().OnLauncherGone(now); }); }
  Log Tick() { return On("tick", [&] { return m().OnTick(now); }); }
  Log Hang(int rank) {
    WorkerExit e;
    e.rank = rank;
    e.exit_code = 124;
    return On("hang", [&] { return m().OnHang(e, now); });
  }
  Log StartFailed() {
    WorkerExit e;
    e.exit_code = 1;
    e.error_message = "no such file";
    return On("start failed", [&] { return m().OnStartFailed(e, now); });
  }
  // The group's news: a worker (rank; -1 the setup command) failed, or every
  // worker is gone.
  Log Fails(int rank, int code) {
    WorkerExit e;
    e.rank = rank;
    e.exit_code = code;
    group_->failure_ = e;
    return Step();
  }
  Log Gone(bool ok) {
    group_->done_ = true;
    group_->ok_ = ok && !group_->failure_;
    return Step();
  }
  Log Step() {
    const std::string news = group_->failure_ ? (group_->done_ ? "group failed+gone" : "group failed")
                             : group_->done_ ? (group_->ok_ ? "group succeeded" : "group gone")
                                             : "group running";
    return On(news, [&] { return m().OnGroup(StatusOf(*group_), now); });
  }

  // Joined, assigned `round`, workers running.
  void Running(int64_t round = 0) {
    Start();
    Assign(round);
    ASSERT_EQ(m().state(), State::kRunning);
  }

  std::unique_ptr<AgentMachine> machine_;
  std::unique_ptr<FakeGroup> group_;
  Log log_;
  std::optional<AgentAction> exit_;
  TimePoint now = TimePoint() + seconds(1000);
};

AgentMachine::Config WithSetup() {
  AgentMachine::Config c;
  c.node_setup = true;
  return c;
}

AgentMachine::Config InSlurmStep() {
  AgentMachine::Config c;
  c.slurm_step = true;
  return c;
}

// --- Rounds ----------------------------------------------------------------

TEST_F(AgentMachineTest, StartJoins) {
  EXPECT_EQ(Start(), Log({"join"}));
  EXPECT_EQ(m().state(), State::kRendezvous);
  EXPECT_FALSE(m().has_group());
  EXPECT_EQ(m().NextDeadline(), std::nullopt);
}

TEST_F(AgentMachineTest, AssignmentStartsWorkers) {
  Start();
  EXPECT_EQ(Assign(0), Log({"start workers"}));
  EXPECT_EQ(m().state(), State::kRunning);
  EXPECT_TRUE(m().has_group());
}

TEST_F(AgentMachineTest, WorkersSucceedReportsTheRoundAndWaits) {
  Running(4);
  EXPECT_EQ(Step(), Log({}));  // nothing new
  EXPECT_EQ(Gone(true), Log({"retire", "report success 4"}));
  EXPECT_EQ(m().state(), State::kRendezvous);
  EXPECT_EQ(Finish(0), Log({"exit 0"}));
  EXPECT_EQ(m().state(), State::kDone);
  EXPECT_EQ(exit_->text, "");
}

TEST_F(AgentMachineTest, WorkersGoneNotAllSucceededWithoutFailureWaits) {
  Running();
  group_->done_ = true;  // exits while stopping are no failures: no verdict here
  EXPECT_EQ(Step(), Log({}));
  EXPECT_EQ(m().state(), State::kRunning);
}

// --- --node-setup ----------------------------------------------------------

TEST_F(AgentMachineTest, SetupRunsFirstThenWorkersAndOnlyOnce) {
  Make(WithSetup());
  Start();
  EXPECT_EQ(Assign(0), Log({"start setup"}));
  EXPECT_EQ(m().state(), State::kSetup);
  EXPECT_EQ(Gone(true), Log({"retire", "start workers"}));
  EXPECT_EQ(m().state(), State::kRunning);
  // A restart round: the setup succeeded once, the workers start at once.
  Fails(0, 1);
  Gone(false);
  EXPECT_EQ(Stop(), Log({"join"}));
  EXPECT_EQ(Assign(1), Log({"start workers"}));
}

TEST_F(AgentMachineTest, SetupFailureIsReportedOnceAndStartsNoWorkers) {
  Make(WithSetup());
  Start();
  Assign(0);
  EXPECT_EQ(Fails(-1, 2), Log({"report failure rank -1 code 2"}));
  EXPECT_EQ(m().state(), State::kSetupFailed);
  EXPECT_EQ(Step(), Log({}));
  EXPECT_EQ(Gone(false), Log({"retire"}));
  EXPECT_EQ(m().state(), State::kRendezvous);
  // The server stops the round: join again; the setup runs again.
  EXPECT_EQ(Stop(), Log({"join"}));
  EXPECT_EQ(Assign(1), Log({"start setup"}));
}

TEST_F(AgentMachineTest, SetupFailingAndGoneAtOnce) {
  Make(WithSetup());
  Start();
  Assign(0);
  group_->done_ = true;
  EXPECT_EQ(Fails(-1, 127), Log({"report failure rank -1 code 127", "retire"}));
  EXPECT_EQ(m().state(), State::kRendezvous);
}

TEST_F(AgentMachineTest, StopDuringSetupRejoinsAndRunsSetupAgain) {
  Make(WithSetup());
  Start();
  Assign(0);
  EXPECT_EQ(Stop(), Log({"stop SIGTERM grace 30s"}));
  EXPECT_EQ(m().state(), State::kStoppingToRejoin);
  EXPECT_EQ(Gone(false), Log({"retire", "join"}));
  EXPECT_EQ(Assign(1), Log({"start setup"}));
}

TEST_F(AgentMachineTest, SignalDuringSetupStopsItAndExits) {
  Make(WithSetup());
  Start();
  Assign(0);
  EXPECT_EQ(Signal(SIGTERM),
            Log({"leaving SIGTERM", "say: got SIGTERM: stopping the workers (SIGTERM again kills them at once)",
                 "stop SIGTERM grace 30s"}));
  EXPECT_EQ(Gone(false), Log({"retire", "exit 143"}));  // no workers after it
}

TEST_F(AgentMachineTest, FinishDuringFailedSetupExits) {
  Make(WithSetup());
  Start();
  Assign(0);
  Fails(-1, 1);
  EXPECT_EQ(Finish(1, /*with_failure=*/true), Log({"stop SIGTERM grace 30s"}));
  EXPECT_EQ(m().state(), State::kStoppingToExit);
  EXPECT_EQ(Gone(false), Log({"retire", "exit 1"}));
}

// --- Failures and the restart budget ----------------------------------------

TEST_F(AgentMachineTest, WorkerFailureIsReportedOnceAndStopsTheGroup) {
  Running();
  EXPECT_EQ(Fails(1, 3), Log({"report failure rank 1 code 3", "stop SIGTERM grace 30s"}));
  EXPECT_EQ(m().state(), State::kStopping);
  EXPECT_EQ(Step(), Log({}));  // the same failure again: no second report
  // Stopped: the server decides (no join of its own).
  EXPECT_EQ(Gone(false), Log({"retire"}));
  EXPECT_EQ(m().state(), State::kRendezvous);
}

TEST_F(AgentMachineTest, RestartAfterFailureRejoins) {
  Running();
  Fails(1, 3);
  Gone(false);
  EXPECT_EQ(Stop(), Log({"join"}));
  EXPECT_EQ(Assign(1), Log({"start workers"}));
  EXPECT_EQ(m().state(), State::kRunning);
}

TEST_F(AgentMachineTest, StopWhileStoppingAfterFailureRejoinsOnceStopped) {
  Running();
  Fails(1, 3);
  EXPECT_EQ(Stop(), Log({"stop SIGTERM grace 30s"}));
  EXPECT_EQ(m().state(), State::kStoppingToRejoin);
  EXPECT_EQ(Gone(false), Log({"retire", "join"}));
}

TEST_F(AgentMachineTest, BudgetSpentFinishExitsWithTheJobsFailure) {
  Running();
  Fails(1, 3);
  EXPECT_EQ(Finish(3, /*with_failure=*/true, "rank 1 failed"), Log({"stop SIGTERM grace 30s"}));
  EXPECT_EQ(m().state(), State::kStoppingToExit);
  EXPECT_EQ(Gone(false), Log({"retire", "exit 3"}));
  EXPECT_EQ(exit_->text, "job failed: rank 1 failed");
  ASSERT_TRUE(exit_->exit_failure);
  EXPECT_EQ(exit_->exit_failure->rank(), 3);
}

TEST_F(AgentMachineTest, StartFailureIsTheRoundsFailure) {
  Running();
  EXPECT_EQ(StartFailed(), Log({"say: cannot start workers: no such file",
                                "report failure rank -1 code 1", "stop SIGKILL grace 30s"}));
  EXPECT_EQ(m().state(), State::kStopping);
}

// --- The server's Stop (a lost peer, a restart) ----------------------------

TEST_F(AgentMachineTest, StopWhileRunningStopsAndRejoins) {
  Running();
  EXPECT_EQ(Stop(), Log({"stop SIGTERM grace 30s"}));
  EXPECT_EQ(m().state(), State::kStoppingToRejoin);
  EXPECT_EQ(Step(), Log({}));
  EXPECT_EQ(Gone(false), Log({"retire", "join"}));
  EXPECT_EQ(m().state(), State::kRendezvous);
  EXPECT_EQ(Assign(1), Log({"start workers"}));
}

TEST_F(AgentMachineTest, FailureWhileStoppingIsNotReported) {
  Running();
  Stop();
  EXPECT_EQ(Fails(0, 143), Log({}));
  EXPECT_EQ(Gone(false), Log({"retire", "join"}));
}

TEST_F(AgentMachineTest, StopWithoutGroupJoins) {
  Running();
  Gone(true);
  EXPECT_EQ(Stop(), Log({"join"}));
  EXPECT_EQ(m().state(), State::kRendezvous);
}

TEST_F(AgentMachineTest, StopAfterFinishKeepsTheExit) {
  Running();
  Finish(0);
  EXPECT_EQ(Stop(), Log({"stop SIGTERM grace 30s"}));
  EXPECT_EQ(m().state(), State::kStoppingToExit);
  EXPECT_EQ(Gone(false), Log({"retire", "exit 0"}));
}

// --- Finish and Reject ------------------------------------------------------

TEST_F(AgentMachineTest, FinishWhileRunningStopsThenExits) {
  Running();
  EXPECT_EQ(Finish(0), Log({"stop SIGTERM grace 30s"}));
  EXPECT_EQ(Gone(false), Log({"retire", "exit 0"}));
}

TEST_F(AgentMachineTest, OnlyTheFirstEndCounts) {
  Start();
  EXPECT_EQ(Finish(1, false, "host b was lost"), Log({"exit 1"}));
  EXPECT_EQ(exit_->text, "job failed: host b was lost");
  EXPECT_EQ(Finish(0), Log({}));
  EXPECT_EQ(Reject("no"), Log({}));
}

TEST_F(AgentMachineTest, SecondFinishWhileStoppingIsIgnored) {
  Running();
  Finish(2, false, "x");
  EXPECT_EQ(Finish(0), Log({}));
  EXPECT_EQ(Reject("no"), Log({}));
  EXPECT_EQ(Gone(false), Log({"retire", "exit 2"}));
}

TEST_F(AgentMachineTest, RejectWithoutGroupExitsAtOnce) {
  Start();
  EXPECT_EQ(Reject("the rendezvous (h:1) rejected this node: run id"), Log({"exit 1"}));
  EXPECT_EQ(exit_->text, "the rendezvous (h:1) rejected this node: run id");
  EXPECT_EQ(m().state(), State::kDone);
}

TEST_F(AgentMachineTest, RejectWhileRunningStopsThenExits) {
  Running();
  EXPECT_EQ(Reject("gone"), Log({"stop SIGTERM grace 30s"}));
  EXPECT_EQ(Gone(false), Log({"retire", "exit 1"}));
}

// --- Stop signals ----------------------------------------------------------

TEST_F(AgentMachineTest, FirstSignalStopsWithGraceSecondKills) {
  Running();
  EXPECT_EQ(Signal(SIGINT),
            Log({"leaving SIGINT", "say: got SIGINT: stopping the workers (SIGINT again kills them at once)",
                 "stop SIGINT grace 30s"}));
  EXPECT_EQ(m().state(), State::kShuttingDown);
  EXPECT_EQ(m().stop_signal(), SIGINT);
  now += seconds(2);
  EXPECT_EQ(Signal(SIGINT), Log({"say: got SIGINT again: killing the workers now", "kill"}));
  EXPECT_EQ(m().NextDeadline(), std::nullopt);
  EXPECT_EQ(Gone(false), Log({"retire", "exit 130"}));
  EXPECT_EQ(exit_->text, "");
  EXPECT_FALSE(exit_->exit_failure);
}

TEST_F(AgentMachineTest, SignalWithoutWorkersExitsAtOnce) {
  Start();
  EXPECT_EQ(Signal(SIGTERM),
            Log({"leaving SIGTERM",
                 "say: got SIGTERM while waiting in the rendezvous (no workers were running): leaving the job",
                 "exit 143"}));
  EXPECT_EQ(m().state(), State::kDone);
  // kDone: nothing more happens.
  EXPECT_EQ(Signal(SIGTERM), Log({}));
  EXPECT_EQ(Finish(1), Log({}));
  EXPECT_EQ(Assign(1), Log({}));
}

TEST_F(AgentMachineTest, UnderALauncherASignalExitsZero) {
  AgentMachine::Config c;
  c.launcher_reports_end = true;
  Make(c);
  Running();
  Signal(SIGTERM);
  EXPECT_EQ(Gone(false), Log({"retire", "exit 0"}));
}

TEST_F(AgentMachineTest, SignalWhileStoppingSendsItAgainAndExits) {
  Running();
  Stop();  // stopping to rejoin, SIGTERM sent
  EXPECT_EQ(Signal(SIGINT),
            Log({"leaving SIGINT", "say: got SIGINT: stopping the workers (SIGINT again kills them at once)",
                 "stop SIGINT grace 30s"}));  // once: the stop sends it
  EXPECT_EQ(m().state(), State::kShuttingDown);
  EXPECT_EQ(Gone(false), Log({"retire", "exit 130"}));  // no rejoin
}

TEST_F(AgentMachineTest, SignalOverridesAFinishedJobsExit) {
  Running();
  Finish(0);
  Signal(SIGTERM);
  EXPECT_EQ(m().state(), State::kShuttingDown);
  EXPECT_EQ(Finish(1), Log({}));  // the end was taken already
  EXPECT_EQ(Gone(false), Log({"retire", "exit 143"}));
}

TEST_F(AgentMachineTest, WhileShuttingDownNoRoundAndNoStop) {
  Running();
  Signal(SIGTERM);
  EXPECT_EQ(Assign(1), Log({}));
  EXPECT_EQ(Stop(), Log({}));
  EXPECT_EQ(Fails(0, 143), Log({}));
  EXPECT_EQ(Hang(0), Log({}));
  EXPECT_EQ(m().state(), State::kShuttingDown);
}

TEST_F(AgentMachineTest, FinishWhileShuttingDownKeepsTheSignalsExitAndSaysWhy) {
  Running();
  Signal(SIGTERM);
  EXPECT_EQ(Finish(1, false, "host b was lost"),
            Log({"say: the job ended meanwhile: host b was lost", "stop no signal grace 30s"}));
  EXPECT_EQ(Gone(false), Log({"retire", "exit 143"}));
}

TEST_F(AgentMachineTest, FinishWithFailureWhileShuttingDownSaysNothing) {
  Running();
  Signal(SIGTERM);
  EXPECT_EQ(Finish(1, /*with_failure=*/true, "rank 3 failed"), Log({"stop no signal grace 30s"}));
}

TEST_F(AgentMachineTest, UserSignalWhileStoppingIsForwarded) {
  Running();
  Fails(0, 1);
  EXPECT_EQ(Signal(SIGUSR1), Log({"forward SIGUSR1"}));
  EXPECT_EQ(m().state(), State::kStopping);
  EXPECT_EQ(Tick(), Log({}));
  now += seconds(30);
  EXPECT_EQ(Tick(), Log({"say: the workers still alive after --shutdown-timeout 30 s: killing them (SIGKILL)",
                         "kill"}));
}

TEST_F(AgentMachineTest, UserSignalsAreForwardedOnly) {
  Start();
  EXPECT_EQ(Signal(SIGUSR1), Log({}));  // no workers yet
  Assign(0);
  EXPECT_EQ(Signal(SIGUSR1), Log({"forward SIGUSR1"}));
  EXPECT_EQ(Signal(SIGUSR2), Log({"forward SIGUSR2"}));
  EXPECT_EQ(m().state(), State::kRunning);
}

// --- Inside a Slurm step ----------------------------------------------------

TEST_F(AgentMachineTest, SlurmStepdsSignalStartsTheGraceWithoutSending) {
  Make(InSlurmStep());
  Running();
  EXPECT_EQ(Signal(SIGTERM, /*from_parent=*/true),
            Log({"leaving SIGTERM", "say: got SIGTERM: stopping the workers (SIGTERM again kills them at once)",
                 "stop no signal grace 30s"}));
  // slurmstepd's next one (scancel again, --kill-on-bad-exit): the grace stands.
  now += seconds(5);
  EXPECT_EQ(Signal(SIGINT, /*from_parent=*/true), Log({}));
  now += seconds(5);
  EXPECT_EQ(Signal(SIGINT), Log({"say: got SIGINT again: killing the workers now", "kill"}));
}

TEST_F(AgentMachineTest, SlurmQuickRepeatOfTheSameSignalIsOneStop) {
  Make(InSlurmStep());
  Running();
  Signal(SIGTERM);
  now += std::chrono::milliseconds(300);
  EXPECT_EQ(Signal(SIGTERM), Log({}));
  now += seconds(1);
  EXPECT_EQ(Signal(SIGTERM), Log({"say: got SIGTERM again: killing the workers now", "kill"}));
}

TEST_F(AgentMachineTest, OutsideSlurmARepeatKills) {
  Running();
  Signal(SIGTERM);
  now += std::chrono::milliseconds(10);
  EXPECT_EQ(Signal(SIGTERM, /*from_parent=*/true),
            Log({"say: got SIGTERM again: killing the workers now", "kill"}));
}

TEST_F(AgentMachineTest, SlurmStepdsUserSignalIsNotForwarded) {
  Make(InSlurmStep());
  Running();
  EXPECT_EQ(Signal(SIGUSR1, /*from_parent=*/true), Log({}));
  now += seconds(2);
  EXPECT_EQ(Signal(SIGUSR1), Log({"forward SIGUSR1"}));
}

// --- The launcher's lifeline -----------------------------------------------

TEST_F(AgentMachineTest, LauncherSignalStopsThenKills) {
  Running();
  EXPECT_EQ(Launcher(SIGTERM),
            Log({"leaving SIGTERM", "say: got SIGTERM: stopping the workers (SIGTERM again kills them at once)",
                 "stop SIGTERM grace 30s"}));
  EXPECT_EQ(Launcher(SIGINT), Log({"say: the launcher got SIGINT again: killing the workers now", "kill"}));
  EXPECT_EQ(Gone(false), Log({"retire", "exit 143"}));
}

TEST_F(AgentMachineTest, LauncherSignalAfterOwnSignalIsTheSameStop) {
  Running();
  Signal(SIGTERM);  // scancel signalled this agent already
  EXPECT_EQ(Launcher(SIGTERM), Log({}));
  EXPECT_EQ(Launcher(SIGTERM), Log({"say: the launcher got SIGTERM again: killing the workers now", "kill"}));
}

TEST_F(AgentMachineTest, LauncherUserSignalIsForwarded) {
  Running();
  EXPECT_EQ(Launcher(SIGUSR2), Log({"forward SIGUSR2"}));
  EXPECT_EQ(Launcher(SIGTERM).size(), 3u);  // still the first stop signal
}

TEST_F(AgentMachineTest, LauncherGoneStopsWithSighup) {
  Running();
  EXPECT_EQ(LauncherGone(),
            Log({"say: the launcher's channel closed: stopping", "leaving SIGHUP",
                 "say: got SIGHUP: stopping the workers (SIGHUP again kills them at once)",
                 "stop SIGHUP grace 30s"}));
  EXPECT_EQ(Gone(false), Log({"retire", "exit 129"}));
}

TEST_F(AgentMachineTest, LauncherGoneWithoutWorkersExits) {
  Start();
  EXPECT_EQ(LauncherGone(),
            Log({"say: the launcher's channel closed: stopping", "leaving SIGHUP",
                 "say: got SIGHUP while waiting in the rendezvous (no workers were running): leaving the job",
                 "exit 129"}));
}

TEST_F(AgentMachineTest, LauncherGoneAfterItsSignalLetsTheStopGoOn) {
  Running();
  Launcher(SIGINT);
  EXPECT_EQ(LauncherGone(), Log({"say: the launcher's channel closed; already stopping on SIGINT"}));
  EXPECT_EQ(m().state(), State::kShuttingDown);
}

// --- --hang-timeout ---------------------------------------------------------

TEST_F(AgentMachineTest, HangIsTheRoundsFailure) {
  Running();
  EXPECT_EQ(Hang(2), Log({"report hang rank 2 code 124", "stop SIGTERM grace 30s"}));
  EXPECT_EQ(m().state(), State::kStopping);
  EXPECT_EQ(Fails(2, 143), Log({}));  // the hang was the report
  EXPECT_EQ(Hang(2), Log({}));
}

TEST_F(AgentMachineTest, HangAfterTheRoundEndedIsIgnored) {
  Running();
  Fails(0, 1);
  EXPECT_EQ(Hang(1), Log({}));
  Gone(false);
  EXPECT_EQ(Hang(1), Log({}));
}

// --- The stop's grace (--shutdown-timeout) ---------------------------------

TEST_F(AgentMachineTest, GraceExpiryKills) {
  AgentMachine::Config c;
  c.shutdown_timeout = seconds(5);
  Make(c);
  Running();
  EXPECT_EQ(Tick(), Log({}));
  Stop();
  const TimePoint stopped = now;
  EXPECT_EQ(m().NextDeadline(), stopped + seconds(5));
  now += seconds(4);
  EXPECT_EQ(Tick(), Log({}));
  now += seconds(1);
  EXPECT_EQ(Tick(), Log({"say: the workers still alive after --shutdown-timeout 5 s: killing them (SIGKILL)",
                         "kill"}));
  EXPECT_EQ(m().NextDeadline(), std::nullopt);
  EXPECT_EQ(Tick(), Log({}));
  EXPECT_EQ(Gone(false), Log({"retire", "join"}));
}

TEST_F(AgentMachineTest, LaterStopDoesNotPostponeTheKill) {
  AgentMachine::Config c;
  c.shutdown_timeout = seconds(5);
  Make(c);
  Running();
  Fails(0, 1);  // stop at 1000 s
  now += seconds(3);
  Stop();  // a later stop: the deadline stays
  EXPECT_EQ(m().NextDeadline(), TimePoint() + seconds(1005));
  now += seconds(2);
  EXPECT_EQ(Tick(), Log({"say: the workers still alive after --shutdown-timeout 5 s: killing them (SIGKILL)",
                         "kill"}));
}

// The kill is said, with the ranks the group last reported alive.
TEST_F(AgentMachineTest, GraceExpiryNamesTheRanksStillAlive) {
  AgentMachine::Config c;
  c.shutdown_timeout = std::chrono::milliseconds(2500);
  Make(c);
  Running();
  group_->alive_ = {0, 1, 3};
  Fails(2, 1);  // rank 2 failed: the others are stopped
  group_->alive_ = {1, 3};
  Step();  // rank 0 stopped in time
  now += seconds(3);
  EXPECT_EQ(Tick(), Log({"say: ranks 1, 3 still alive after --shutdown-timeout 2.5 s: killing them (SIGKILL)",
                         "kill"}));
  Make(c);
  Running();
  group_->alive_ = {7};
  Signal(SIGTERM);
  Step();
  now += seconds(3);
  EXPECT_EQ(Tick(), Log({"say: rank 7 still alive after --shutdown-timeout 2.5 s: killing it (SIGKILL)",
                         "kill"}));
}

TEST_F(AgentMachineTest, NoGraceKillsAtOnce) {
  AgentMachine::Config c;
  c.shutdown_timeout = Duration::zero();
  Make(c);
  Running();
  EXPECT_EQ(Signal(SIGTERM),
            Log({"leaving SIGTERM", "say: got SIGTERM: stopping the workers (SIGTERM again kills them at once)",
                 "stop SIGTERM grace 0s", "kill"}));
  EXPECT_EQ(m().NextDeadline(), std::nullopt);
}

TEST_F(AgentMachineTest, ANewRoundHasNoDeadline) {
  Running();
  Stop();
  Gone(false);
  EXPECT_EQ(m().NextDeadline(), std::nullopt);
  Assign(1);
  EXPECT_EQ(m().NextDeadline(), std::nullopt);
}

TEST_F(AgentMachineTest, StateNames) {
  EXPECT_STREQ(AgentMachine::StateName(State::kStoppingToRejoin), "stopping-to-rejoin");
  EXPECT_STREQ(AgentMachine::StateName(State::kDone), "done");
}

// --- The two cells issue 30 found undecided ----------------------------------

// A --node-setup whose spawn fails (EAGAIN, EMFILE, ENOMEM) leaves an empty
// group, which once read "done, all succeeded": the workers started without
// their setup.
TEST_F(AgentMachineTest, SetupThatCannotStartIsAFailedSetup) {
  Make(WithSetup());
  Start();
  Assign(0);
  EXPECT_EQ(StartFailed(), Log({"say: cannot start --node-setup: no such file",
                                "report failure rank -1 code 1"}));
  EXPECT_EQ(m().state(), State::kSetupFailed);
  group_->done_ = true;
  group_->ok_ = true;  // however the empty group reads, no workers start
  EXPECT_EQ(Step(), Log({"retire"}));
  EXPECT_EQ(m().state(), State::kRendezvous);
  // The server's Stop: the setup runs again in the next round.
  EXPECT_EQ(Stop(), Log({"join"}));
  EXPECT_EQ(Assign(1), Log({"start setup"}));
}

TEST_F(AgentMachineTest, SetupGoneWithoutSuccessOrFailureIsAFailedSetup) {
  Make(WithSetup());
  Start();
  Assign(0);
  EXPECT_EQ(Gone(false), Log({"retire", "report failure rank -1 code 1"}));
  EXPECT_EQ(m().state(), State::kRendezvous);
}

// Finish and Stop leave a signalled agent's workers alone; Reject did not.
TEST_F(AgentMachineTest, RejectWhileShuttingDownSendsNoSecondSignal) {
  Running();
  Signal(SIGINT);
  EXPECT_EQ(Reject("the rendezvous (h:1) rejected this node: silent"),
            Log({"stop no signal grace 30s"}));
  EXPECT_EQ(m().state(), State::kShuttingDown);
  EXPECT_EQ(Gone(false), Log({"retire", "exit 130"}));
}

TEST_F(AgentMachineTest, AssignmentOverALiveGroupIsNotTaken) {
  Running(0);
  EXPECT_EQ(Assign(1), Log({}));
  EXPECT_EQ(m().state(), State::kRunning);
  Make(WithSetup());
  Start();
  Assign(0);
  EXPECT_EQ(Assign(1), Log({}));
  EXPECT_EQ(m().state(), State::kSetup);
}

// --- Every (state x event) cell ------------------------------------------------

// Brings a fresh machine (and its fake group) into `s`.
class AgentMachineCellTest : public AgentMachineTest {
 protected:
  void Reach(State s) {
    group_.reset();
    Make(s == State::kSetup || s == State::kSetupFailed ? WithSetup() : AgentMachine::Config{});
    Start();
    if (s == State::kRendezvous) return;
    if (s == State::kDone) {
      Finish(0);
      return;
    }
    Assign(0);
    switch (s) {
      case State::kSetupFailed: Fails(-1, 2); break;
      case State::kStopping: Fails(1, 3); break;
      case State::kStoppingToRejoin: Stop(); break;
      case State::kStoppingToExit: Finish(0); break;
      case State::kShuttingDown: Signal(SIGINT); break;
      default: break;
    }
  }
  // Fires `e` as the agent would; returns what the agent did.
  Log Fire(AgentMachine::Event e) {
    using E = AgentMachine::Event;
    switch (e) {
      case E::kStart: return Start();
      case E::kAssignment: return Assign(1);
      case E::kStop: return Stop();
      case E::kFinish: return Finish(0);
      case E::kReject: return Reject("rejected");
      case E::kGroupFailed:
      case E::kGroupDone: {
        GroupStatus st;
        if (e == E::kGroupFailed) {
          WorkerExit f;
          f.rank = 2;
          f.exit_code = 9;
          st.first_failure = f;
        } else {
          st.done = true;
          st.all_succeeded = true;
        }
        return On(AgentMachine::EventName(e), [&] { return m().OnGroup(st, now); });
      }
      case E::kStartFailed: return StartFailed();
      case E::kHang: return Hang(0);
      case E::kStopSignal: return Signal(SIGTERM);
      case E::kUserSignal: return Signal(SIGUSR1);
      case E::kLauncherSignal: return Launcher(SIGTERM);
      case E::kLauncherGone: return LauncherGone();
      case E::kTick:
        now += seconds(31);  // past the grace of any stop under way
        return Tick();
    }
    return {};
  }
};

// What each acting cell does, from the state Reach() makes: the next state
// and the agent's actions. Cells that do not act must do nothing.
const std::map<std::string, std::string>& ActingCells() {
  static const auto* cells = new std::map<std::string, std::string>{
      // clang-format off
      {"rendezvous x start", "rendezvous: join"},
      {"rendezvous x assignment", "running: start workers"},
      {"rendezvous x stop", "rendezvous: join"},
      {"rendezvous x finish", "done: exit 0"},
      {"rendezvous x reject", "done: exit 1"},
      {"rendezvous x stop-signal", "done: leaving SIGTERM; say: got SIGTERM while waiting in the rendezvous (no workers were running): leaving the job; exit 143"},
      {"rendezvous x launcher-signal", "done: leaving SIGTERM; say: got SIGTERM while waiting in the rendezvous (no workers were running): leaving the job; exit 143"},
      {"rendezvous x launcher-gone", "done: say: the launcher's channel closed: stopping; leaving SIGHUP; say: got SIGHUP while waiting in the rendezvous (no workers were running): leaving the job; exit 129"},
      {"setup x stop", "stopping-to-rejoin: stop SIGTERM grace 30s"},
      {"setup x finish", "stopping-to-exit: stop SIGTERM grace 30s"},
      {"setup x reject", "stopping-to-exit: stop SIGTERM grace 30s"},
      {"setup x group-failed", "setup-failed: report failure rank 2 code 9"},
      {"setup x group-done", "running: retire; start workers"},
      {"setup x start-failed", "setup-failed: say: cannot start --node-setup: no such file; report failure rank -1 code 1"},
      {"setup x stop-signal", "shutting-down: leaving SIGTERM; say: got SIGTERM: stopping the workers (SIGTERM again kills them at once); stop SIGTERM grace 30s"},
      {"setup x user-signal", "setup: forward SIGUSR1"},
      {"setup x launcher-signal", "shutting-down: leaving SIGTERM; say: got SIGTERM: stopping the workers (SIGTERM again kills them at once); stop SIGTERM grace 30s"},
      {"setup x launcher-gone", "shutting-down: say: the launcher's channel closed: stopping; leaving SIGHUP; say: got SIGHUP: stopping the workers (SIGHUP again kills them at once); stop SIGHUP grace 30s"},
      {"setup-failed x stop", "stopping-to-rejoin: stop SIGTERM grace 30s"},
      {"setup-failed x finish", "stopping-to-exit: stop SIGTERM grace 30s"},
      {"setup-failed x reject", "stopping-to-exit: stop SIGTERM grace 30s"},
      {"setup-failed x group-done", "rendezvous: retire"},
      {"setup-failed x stop-signal", "shutting-down: leaving SIGTERM; say: got SIGTERM: stopping the workers (SIGTERM again kills them at once); stop SIGTERM grace 30s"},
      {"setup-failed x user-signal", "setup-failed: forward SIGUSR1"},
      {"setup-failed x launcher-signal", "shutting-down: leaving SIGTERM; say: got SIGTERM: stopping the workers (SIGTERM again kills them at once); stop SIGTERM grace 30s"},
      {"setup-failed x launcher-gone", "shutting-down: say: the launcher's channel closed: stopping; leaving SIGHUP; say: got SIGHUP: stopping the workers (SIGHUP again kills them at once); stop SIGHUP grace 30s"},
      {"running x stop", "stopping-to-rejoin: stop SIGTERM grace 30s"},
      {"running x finish", "stopping-to-exit: stop SIGTERM grace 30s"},
      {"running x reject", "stopping-to-exit: stop SIGTERM grace 30s"},
      {"running x group-failed", "stopping: report failure rank 2 code 9; stop SIGTERM grace 30s"},
      {"running x group-done", "rendezvous: retire; report success 0"},
      {"running x start-failed", "stopping: say: cannot start workers: no such file; report failure rank -1 code 1; stop SIGKILL grace 30s"},
      {"running x hang", "stopping: report hang rank 0 code 124; stop SIGTERM grace 30s"},
      {"running x stop-signal", "shutting-down: leaving SIGTERM; say: got SIGTERM: stopping the workers (SIGTERM again kills them at once); stop SIGTERM grace 30s"},
      {"running x user-signal", "running: forward SIGUSR1"},
      {"running x launcher-signal", "shutting-down: leaving SIGTERM; say: got SIGTERM: stopping the workers (SIGTERM again kills them at once); stop SIGTERM grace 30s"},
      {"running x launcher-gone", "shutting-down: say: the launcher's channel closed: stopping; leaving SIGHUP; say: got SIGHUP: stopping the workers (SIGHUP again kills them at once); stop SIGHUP grace 30s"},
      {"stopping x stop", "stopping-to-rejoin: stop SIGTERM grace 30s"},
      {"stopping x finish", "stopping-to-exit: stop SIGTERM grace 30s"},
      {"stopping x reject", "stopping-to-exit: stop SIGTERM grace 30s"},
      {"stopping x group-done", "rendezvous: retire"},
      {"stopping x stop-signal", "shutting-down: leaving SIGTERM; say: got SIGTERM: stopping the workers (SIGTERM again kills them at once); stop SIGTERM grace 30s"},
      {"stopping x user-signal", "stopping: forward SIGUSR1"},
      {"stopping x launcher-signal", "shutting-down: leaving SIGTERM; say: got SIGTERM: stopping the workers (SIGTERM again kills them at once); stop SIGTERM grace 30s"},
      {"stopping x launcher-gone", "shutting-down: say: the launcher's channel closed: stopping; leaving SIGHUP; say: got SIGHUP: stopping the workers (SIGHUP again kills them at once); stop SIGHUP grace 30s"},
      {"stopping x tick", "stopping: say: the workers still alive after --shutdown-timeout 30 s: killing them (SIGKILL); kill"},
      {"stopping-to-rejoin x finish", "stopping-to-exit: stop SIGTERM grace 30s"},
      {"stopping-to-rejoin x reject", "stopping-to-exit: stop SIGTERM grace 30s"},
      {"stopping-to-rejoin x group-done", "rendezvous: retire; join"},
      {"stopping-to-rejoin x stop-signal", "shutting-down: leaving SIGTERM; say: got SIGTERM: stopping the workers (SIGTERM again kills them at once); stop SIGTERM grace 30s"},
      {"stopping-to-rejoin x user-signal", "stopping-to-rejoin: forward SIGUSR1"},
      {"stopping-to-rejoin x launcher-signal", "shutting-down: leaving SIGTERM; say: got SIGTERM: stopping the workers (SIGTERM again kills them at once); stop SIGTERM grace 30s"},
      {"stopping-to-rejoin x launcher-gone", "shutting-down: say: the launcher's channel closed: stopping; leaving SIGHUP; say: got SIGHUP: stopping the workers (SIGHUP again kills them at once); stop SIGHUP grace 30s"},
      {"stopping-to-rejoin x tick", "stopping-to-rejoin: say: the workers still alive after --shutdown-timeout 30 s: killing them (SIGKILL); kill"},
      {"stopping-to-exit x stop", "stopping-to-exit: stop SIGTERM grace 30s"},
      {"stopping-to-exit x group-done", "done: retire; exit 0"},
      {"stopping-to-exit x stop-signal", "shutting-down: leaving SIGTERM; say: got SIGTERM: stopping the workers (SIGTERM again kills them at once); stop SIGTERM grace 30s"},
      {"stopping-to-exit x user-signal", "stopping-to-exit: forward SIGUSR1"},
      {"stopping-to-exit x launcher-signal", "shutting-down: leaving SIGTERM; say: got SIGTERM: stopping the workers (SIGTERM again kills them at once); stop SIGTERM grace 30s"},
      {"stopping-to-exit x launcher-gone", "shutting-down: say: the launcher's channel closed: stopping; leaving SIGHUP; say: got SIGHUP: stopping the workers (SIGHUP again kills them at once); stop SIGHUP grace 30s"},
      {"stopping-to-exit x tick", "stopping-to-exit: say: the workers still alive after --shutdown-timeout 30 s: killing them (SIGKILL); kill"},
      {"shutting-down x finish", "shutting-down: stop no signal grace 30s"},
      {"shutting-down x reject", "shutting-down: stop no signal grace 30s"},
      {"shutting-down x group-done", "done: retire; exit 130"},
      {"shutting-down x stop-signal", "shutting-down: say: got SIGTERM again: killing the workers now; kill"},
      {"shutting-down x user-signal", "shutting-down: forward SIGUSR1"},
      {"shutting-down x launcher-signal", "shutting-down: "},
      {"shutting-down x launcher-gone", "shutting-down: say: the launcher's channel closed; already stopping on SIGINT"},
      {"shutting-down x tick", "shutting-down: say: the workers still alive after --shutdown-timeout 30 s: killing them (SIGKILL); kill"},
      // clang-format on
  };
  return *cells;
}

TEST_F(AgentMachineCellTest, EveryCellIsDeclaredAndDoesWhatItSays) {
  int cells = 0, acting = 0;
  for (int si = 0; si < AgentMachine::kStates; ++si) {
    for (int ei = 0; ei < AgentMachine::kEvents; ++ei) {
      const auto s = static_cast<State>(si);
      const auto e = static_cast<AgentMachine::Event>(ei);
      const AgentMachine::Cell& cell = AgentMachine::CellOf(s, e);
      const std::string name = absl::StrCat(AgentMachine::StateName(s), " x ", AgentMachine::EventName(e));
      SCOPED_TRACE(name);
      ASSERT_NE(cell.why, nullptr);
      EXPECT_GT(std::string(cell.why).size(), 10u) << "a cell says why";
      Reach(s);
      ASSERT_EQ(m().state(), s);
      const Log did = Fire(e);
      const std::string outcome =
          absl::StrCat(AgentMachine::StateName(m().state()), ": ", absl::StrJoin(did, "; "));
      ++cells;
      const auto want = ActingCells().find(name);
      if (cell.kind != AgentMachine::CellKind::kAct) {
        EXPECT_EQ(did, Log({})) << cell.why;
        EXPECT_EQ(m().state(), s) << cell.why;
        EXPECT_EQ(want, ActingCells().end()) << "the table says this cell does not act";
        continue;
      }
      ++acting;
      if (want == ActingCells().end()) {
        ADD_FAILURE() << "no expectation for an acting cell: {\"" << name << "\", \"" << outcome << "\"},";
        continue;
      }
      EXPECT_EQ(outcome, want->second) << cell.why;
    }
  }
  EXPECT_EQ(cells, AgentMachine::kStates * AgentMachine::kEvents);
  EXPECT_EQ(acting, static_cast<int>(ActingCells().size()));
}

}  // namespace
}  // namespace drun
