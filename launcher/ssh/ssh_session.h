// One authenticated libssh connection to a host, as users' ssh would make it:
// ~/.ssh/config (Host, HostName, User, Port, IdentityFile, ProxyJump as
// libssh supports it), the ssh agent and the default keys, and known_hosts
// enforced (accept-new only when asked).
//
// A connection is used by one thread at a time (libssh sessions are not
// thread-safe); it may be handed from thread to thread.
#ifndef DRUN_LAUNCHER_SSH_SSH_SESSION_H_
#define DRUN_LAUNCHER_SSH_SSH_SESSION_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/agent_launch.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/wake_fd.h"

struct ssh_session_struct;
struct ssh_channel_struct;

namespace drun {

struct SshTarget {
  std::string host;  // as the user wrote it (a ~/.ssh/config Host alias works)
  std::string user;  // "" : ~/.ssh/config's User, else the local user name
  bool accept_new = false;  // StrictHostKeyChecking=accept-new
  // A host that is off is reported within this (unless ~/.ssh/config's
  // ConnectTimeout says otherwise).
  int connect_timeout_s = 5;
};

struct CommandResult {
  int exit_status = -1;  // -1: none reported (e.g. killed by a signal)
  std::string out;       // standard output, at most 64 KiB
  std::string err;       // standard error, at most 64 KiB
};

class SshConnection {
 public:
  // Connects, checks the host key, authenticates. Errors are one line that
  // does not repeat the host name (the caller prefixes it) and says what to do.
  static absl::StatusOr<std::unique_ptr<SshConnection>> Connect(const SshTarget& target);
  ~SshConnection();
  SshConnection(const SshConnection&) = delete;
  SshConnection& operator=(const SshConnection&) = delete;

  // Runs `command` through the remote user's shell and collects its output.
  absl::StatusOr<CommandResult> Run(const std::string& command, int timeout_ms);

  // A one-line description of the session's last error.
  std::string LastError() const;

  // This machine's address of the connection (what the host reaches us at)
  // and the host's, or "" when the connection is not a plain TCP socket
  // (ProxyCommand/ProxyJump).
  const std::string& local_address() const { return local_address_; }
  const std::string& peer_address() const { return peer_address_; }
  bool connected() const;
  ssh_session_struct* session() { return session_; }
  const SshTarget& target() const { return target_; }

 private:
  SshConnection() = default;
  SshTarget target_;
  ssh_session_struct* session_ = nullptr;
  std::string local_address_;
  std::string peer_address_;
};

// How far a remote process is asked to end; a later request never lowers it.
enum class Ending {
  kNone,
  kStop,   // close its standard input (the agent stops its workers and leaves)
  kAbort,  // drop it at once (kill the --rsh child, or leave the ssh channel)
};

// What other threads ask of a RemoteProcess while its Run() loop (one
// thread) owns the process: notices for its standard input, in order, and
// an Ending. fd() is readable after either; the loop then calls Woken()
// (fd() quiet again), takes the notices and looks at ending(): what it
// was woken for, by name.
class RemoteRequests {
 public:
  bool valid() const { return wake_.valid(); }
  int fd() const { return wake_.fd(); }
  // Any thread.
  void Send(absl::string_view notices);
  void Request(Ending e);
  // Run()'s thread.
  void Woken() const { wake_.Clear(); }
  std::string TakeNotices();  // the notices sent since the last call
  Ending ending() const;

 private:
  WakeFd wake_;
  mutable Mutex mu_;
  std::string notices_ ABSL_GUARDED_BY(mu_);
  Ending ending_ ABSL_GUARDED_BY(mu_) = Ending::kNone;
};

// A remote command whose standard input stays open: the remote `drun agent`
// (over an ssh channel, or a local `--rsh` child). Run() pumps its output
// until it ends; Signal() writes a signal notice to its standard input (the
// agent's lifeline: it stops its workers with that signal, agent_launch.h),
// Send() any notices (the launcher's own stdin, relayed),
// Stop() closes its standard input (the agent takes that for its launcher's
// loss: it stops its workers and exits), Abort() drops it at once, after any
// notice already asked for. Send(), Signal(), Stop() and Abort() may be called from
// any thread, Run() from one.
class RemoteProcess {
 public:
  struct Outcome {
    int exit_status = -1;     // -1: none reported
    std::string exit_signal;  // "KILL", "TERM", ... when killed by a signal
    std::string error;        // transport failure or timeout; "" otherwise
  };
  using DataFn = std::function<void(int stream, const char* data, size_t n)>;
  virtual ~RemoteProcess() = default;
  // on_data(1 for stdout, 2 for stderr, bytes) as they come. timeout_ms < 0:
  // no bound; on timeout the process is aborted and error says so.
  virtual Outcome Run(const DataFn& on_data, int timeout_ms = -1) = 0;
  // Lifeline notices (agent_launch.h) for its standard input, in order.
  virtual void Send(absl::string_view notices) = 0;
  void Signal(int sig) { Send(EncodeLifelineSignal(sig)); }
  virtual void Stop() = 0;
  virtual void Abort() = 0;
};

// A command on an ssh channel of `conn` (which must outlive it and not be
// used by another thread meanwhile).
absl::StatusOr<std::unique_ptr<RemoteProcess>> StartSshExec(SshConnection* conn,
                                                            const std::string& command,
                                                            const std::string& stdin_data);

// Runs a remote command to its end with its output collected.
absl::StatusOr<CommandResult> RunRemote(RemoteProcess* p, int timeout_ms);

}  // namespace drun

#endif  // DRUN_LAUNCHER_SSH_SSH_SESSION_H_
