#include "launcher/ssh/ssh_rsh.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "agent/agent_launch.h"
#include "rendezvous/base/clock.h"
#include "rendezvous/base/poll_set.h"
#include "rendezvous/base/signal_name.h"
#include "rendezvous/base/spawn.h"
#include "rendezvous/base/unique_fd.h"

namespace drun {

absl::StatusOr<std::vector<std::string>> SplitRshCommand(const std::string& cmd) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < cmd.size(); ++i) {
    const char c = cmd[i];
    if (quote == '\'') {
      if (c == '\'') quote = 0; else cur += c;
    } else if (quote == '"') {
      if (c == '"') {
        quote = 0;
      } else if (c == '\\' && i + 1 < cmd.size() &&
                 (cmd[i + 1] == '"' || cmd[i + 1] == '\\' || cmd[i + 1] == '$' || cmd[i + 1] == '`')) {
        cur += cmd[++i];
      } else {
        cur += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < cmd.size()) {
      cur += cmd[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) out.push_back(std::move(cur));
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (quote) return absl::InvalidArgumentError(absl::StrCat("--rsh '", cmd, "': unbalanced ", std::string(1, quote)));
  if (in_word) out.push_back(std::move(cur));
  if (out.empty()) return absl::InvalidArgumentError("--rsh: the command is empty; write e.g. --rsh 'ssh -p 2222'");
  return out;
}

namespace {

class RshProcess : public RemoteProcess {
 public:
  ~RshProcess() override {
    if (pid_ > 0) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    // The descriptors close themselves after this (UniqueFd members).
  }

  absl::Status Start(const std::vector<std::string>& argv, const std::string& stdin_data) {
    // The child's ends are closed here once it has them (or on any early return).
    UniqueFd child_in, child_out, child_err;
    if (!MakePipe(&child_in, &in_) || !MakePipe(&out_, &child_out) || !MakePipe(&err_, &child_err)) {
      return absl::InternalError(absl::StrCat("pipe failed: ", strerror(errno)));
    }
    // Its own process group: a Ctrl-C on the terminal reaches drun only,
    // which then closes the agents' lifelines in order.
    SpawnStdio stdio;
    stdio.in = child_in.get();
    stdio.out = child_out.get();
    stdio.err = child_err.get();
    pid_t pid;
    const int rc = SpawnInOwnGroup(argv, stdio, &pid);
    // Only the child keeps its ends: a write to a child that died fails
    // (EPIPE) instead of blocking, and its output pipes reach EOF.
    child_in.reset();
    child_out.reset();
    child_err.reset();
    if (rc != 0) {
      return absl::NotFoundError(absl::StrCat("--rsh: cannot run ", argv[0], ": ", strerror(rc)));
    }
    pid_ = pid;
    size_t off = 0;
    while (off < stdin_data.size()) {
      ssize_t n = write(in_.get(), stdin_data.data() + off, stdin_data.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;  // it exited already: Run reports how
      off += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  Outcome Run(const DataFn& on_data, int timeout_ms) override {
    Outcome outcome;
    std::optional<TimePoint> deadline;
    if (timeout_ms >= 0) deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    PollSet set;
    PollSet::Id out_id = 0, err_id = 0;
    out_id = set.Add(out_.get(), POLLIN, [&](short) { ReadOutput(&out_, 1, on_data, &set, out_id); });
    err_id = set.Add(err_.get(), POLLIN, [&](short) { ReadOutput(&err_, 2, on_data, &set, err_id); });
    set.Add(requests_.fd(), POLLIN, [&](short) { requests_.Woken(); });  // looked at below
    while (out_.valid() || err_.valid()) {
      WritePending();
      const Ending ending = requests_.ending();
      if (ending >= Ending::kStop) in_.reset();
      if (ending == Ending::kAbort && !killed_) {
        killed_ = true;
        kill(-pid_, SIGKILL);
        outcome.error = "aborted";
      }
      std::optional<TimePoint> wait_until = deadline;
      if (deadline && Clock::now() >= *deadline) {
        if (!killed_) kill(-pid_, SIGKILL);
        killed_ = true;
        outcome.error = absl::StrCat("no answer within ", timeout_ms / 1000.0, " s");
        wait_until = Clock::now() + std::chrono::seconds(1);  // the pipes close once it is dead
      }
      set.Poll(wait_until);
    }
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    if (WIFEXITED(status)) outcome.exit_status = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
      outcome.exit_signal = SignalAbbrev(WTERMSIG(status));
    }
    return outcome;
  }

  void Send(absl::string_view notices) override { requests_.Send(notices); }
  void Stop() override { requests_.Request(Ending::kStop); }
  void Abort() override { requests_.Request(Ending::kAbort); }

 private:
  // Writes what Send() asked for, on Run's thread (which owns in_). A child
  // that is gone fails the write (EPIPE); its end shows on the output pipes.
  // One read of a ready output pipe; at its end (or an error) the pipe closes
  // and leaves the poll set.
  void ReadOutput(UniqueFd* fd, int stream, const DataFn& on_data, PollSet* set, PollSet::Id id) {
    char buf[16384];
    ssize_t r = read(fd->get(), buf, sizeof buf);
    if (r > 0) {
      on_data(stream, buf, static_cast<size_t>(r));
    } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
      set->Remove(id);
      fd->reset();
    }
  }

  void WritePending() {
    const std::string data = requests_.TakeNotices();
    if (data.empty() || !in_.valid()) return;
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = write(in_.get(), data.data() + off, data.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }

  pid_t pid_ = -1;
  UniqueFd in_, out_, err_;
  RemoteRequests requests_;  // notices for its stdin, Stop and Abort
  bool killed_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteProcess>> StartRshProcess(const std::vector<std::string>& argv,
                                                               const std::string& stdin_data) {
  auto p = std::make_unique<RshProcess>();
  if (absl::Status st = p->Start(argv, stdin_data); !st.ok()) return st;
  return std::unique_ptr<RemoteProcess>(std::move(p));
}

}  // namespace drun
