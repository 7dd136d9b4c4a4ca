// The ssh launcher's plan: which hosts run the job, which wait as spares, the
// JobSpec each host's agent receives (its own nproc from the host's slots),
// and the environment forwarded to every worker. Pure functions of the
// command line, the host list and this process's environment: no I/O except
// reading --env-file, so every rule here is unit-testable.
#ifndef DRUN_LAUNCHER_SSH_SSH_PLAN_H_
#define DRUN_LAUNCHER_SSH_SSH_PLAN_H_

#include <map>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "drun/v1/job.pb.h"
#include "launcher/job/cli.h"
#include "launcher/hosts/hostfile.h"
// ShellQuote (rendezvous/base/quote.h) quotes the remote drun path and the
// pre-flight checks; the job itself never goes through a remote shell.
#include "rendezvous/base/quote.h"

namespace drun {

// Variables forwarded to the workers whenever they are set here, so a venv on
// a shared home works on every host as it does on this one.
inline constexpr const char* kAlwaysForwarded[] = {"PATH", "PYTHONPATH", "VIRTUAL_ENV"};

struct HostPlan {
  HostEntry entry;
  v1::JobSpec spec;  // the job as this host's agent receives it
  bool spare = false;
};

struct SshPlan {
  std::vector<HostPlan> hosts;  // in host-file order: job hosts first, then spares
  int min_nodes = 1;
  int max_nodes = 1;
  int spares = 0;
};

// PATH, PYTHONPATH and VIRTUAL_ENV from `env`, when set. The user's own
// variables (-x, --env-file, env:) are in the JobSpec already (job/user_env.h)
// and win over these.
std::map<std::string, std::string> AlwaysForwardedEnv(const std::map<std::string, std::string>& env);

// The hosts of --hostfile or -H (the file read here), at least one.
absl::StatusOr<std::vector<HostEntry>> LoadHosts(const CommandLine& cl);

// Decides the job's shape over `hosts`:
//  - --nnodes not given: every host runs the job (min = max = number of hosts).
//  - --nnodes N or MIN:MAX: the first MAX hosts run it, the rest are spares
//    (fewer than MIN hosts is an error).
//  - mpirun's -np N (cl.total_procs): the job's total, spread as mpirun
//    spreads it over the hosts that run the job: each host's slots (else
//    max_slots) filled in order, then round-robin one at a time, never past
//    max_slots. Hosts left without a process idle (spares under --nnodes).
//  - nproc per host otherwise: --nproc-per-node when given (an error above a host's
//    max_slots), else the host's slots, else its max_slots, else the default.
//  - --stdin RANK past the job's world size is refused where the plan fixes it
//    (a fixed node count and a number of workers on every host).
//  - each host's spec gets the forwarded env, PYTHON_EXEC as python_exec
//    (when set here and not already chosen), and no --local-addr (that was
//    this machine's address).
absl::StatusOr<SshPlan> PlanSshJob(const CommandLine& cl, const v1::JobSpec& spec,
                                   const std::vector<HostEntry>& hosts,
                                   const std::map<std::string, std::string>& forwarded_env,
                                   const std::map<std::string, std::string>& env);

// "user@host" or "host".
std::string HostLabel(const HostEntry& e);

}  // namespace drun

#endif  // DRUN_LAUNCHER_SSH_SSH_PLAN_H_
