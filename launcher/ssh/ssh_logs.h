// The hosts' log files, collected onto the launcher's machine at the job's end
// (docs/ssh.md, "Logs"): the user finds every host's logs in one place, under
// the launcher's own --log-dir, byte for byte as the agents wrote them.
//
// Every agent of a job writes under one run directory that the launcher made
// here and named for all (JobSpec.log_run_dir): <log_dir>/<run>/<host>[.N]
// (agent/log_layout.h). At its end each agent reports that directory and its
// inode (NodeReport). For each one LogLayout::PlanCollection decides:
//  - nothing is copied when the same directory is seen here (same path, same
//    inode): a shared file system;
//  - else the host runs `tar -C DIR -cf - .` (over the host's ssh
//    connection, or a second --rsh command) and a local `tar -xf -` writes it
//    into <log_dir>/<run>/<name>, a directory claimed here with an exclusive
//    mkdir (name.1, ... when taken), so nothing here is ever overwritten.
// Hosts are copied all at once, one thread each; a copy that delivers no byte
// for kStallBound is dropped (its host's logs stay where they are, and the
// line says where), and so is every copy when a stop signal comes.
#ifndef DRUN_LAUNCHER_SSH_SSH_LOGS_H_
#define DRUN_LAUNCHER_SSH_SSH_LOGS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "drun/v1/rendezvous.pb.h"
#include "launcher/ssh/ssh_session.h"
#include "rendezvous/base/clock.h"
#include "rendezvous/base/mutex.h"

namespace drun {

// A copy that has delivered nothing for this long is given up.
inline constexpr Duration kStallBound = std::chrono::seconds(30);

// The remote command that writes DIR's tree as a tar stream on its stdout:
// for a remote shell (ssh), and as argv (--rsh).
std::string TarCommand(const std::string& dir);
std::vector<std::string> TarArgv(const std::string& dir);

// One host's copies, in order, on one thread (a libssh connection serves one
// thread at a time). Abort() and bytes() may be called from any thread.
class HostLogCopy {
 public:
  // Starts the remote tar for a directory of that host.
  using Starter = std::function<absl::StatusOr<std::unique_ptr<RemoteProcess>>(const std::string& dir)>;
  struct Item {
    std::string remote_dir;  // on the host
    std::string local_dir;   // the claimed copy here
    absl::Status result;     // after Run
    uint64_t bytes = 0;      // of the tar stream received
  };
  HostLogCopy(std::string host, std::vector<Item> items, Starter start)
      : host_(std::move(host)), items_(std::move(items)), start_(std::move(start)) {}

  void Run();
  // Drops the copy under way and those still to come; `why` becomes their error.
  void Abort(const std::string& why);
  uint64_t bytes() const { return bytes_.load(); }
  const std::string& host() const { return host_; }
  const std::vector<Item>& items() const { return items_; }  // complete once Run returned

 private:
  absl::Status CopyOne(Item& item);
  const std::string host_;
  std::vector<Item> items_;
  Starter start_;
  std::atomic<uint64_t> bytes_{0};
  Mutex mu_;
  std::shared_ptr<RemoteProcess> proc_ ABSL_GUARDED_BY(mu_);
  std::string aborted_ ABSL_GUARDED_BY(mu_);  // why, once aborted
};

// Runs every copy on a thread of its own and waits for them all: a copy that
// stalls for kStallBound is aborted, and every copy once `sig_fd` (a
// signalfd) becomes readable. Returns the signal that interrupted, or 0.
int RunLogCopies(const std::vector<std::unique_ptr<HostLogCopy>>& copies, int sig_fd);

// One host of the job, as the collection sees it.
struct LogHost {
  std::string name;             // as the host list names it (NodeReport.host)
  int joins = 0;                // its agents that reached the rendezvous: each has a directory
  HostLogCopy::Starter start;   // how its directories are read
};

struct LogCollection {
  std::string run_dir;   // <log_dir>/<run> on this machine
  bool dropped = false;  // the job's connections were dropped: the user wants out, copy nothing
  bool quiet = false;    // no line when every host's logs are here
  int sig_fd = -1;       // a stop signal here gives up every copy
  std::function<void(const std::string&)> say;  // one drun line
};

// Collects every node's logs into c.run_dir; `nodes` are the agents' reports,
// each given logs_collected_to or logs_not_collected. Says in one line where
// the logs are, and in one line each where a node's logs stay when they were
// not collected (an agent that never reported: killed or lost); `stay` gets
// those places (HOST:DIR), for the report. Returns the stop signal that
// interrupted the collection, or 0.
int CollectLogs(const LogCollection& c, const std::vector<LogHost>& hosts, std::vector<v1::NodeReport>* nodes,
                std::vector<std::string>* stay);

}  // namespace drun

#endif  // DRUN_LAUNCHER_SSH_SSH_LOGS_H_
