// Slurm auto-configuration: `srun drun train.py` inside an allocation needs no
// rendezvous flags, because every task can work the job out from SLURM_*.
//
// When it applies: the process runs in an srun step (SLURM_STEP_ID is a real
// step, not the batch script, the extern step or salloc's interactive step),
// drun's launcher is the default ("local"), --standalone is not given, and
// none of --rdzv-endpoint, --rdzv-backend, --node-rank, --master-addr,
// --master-port is given (those mean "I configured the rendezvous myself",
// torchrun style; drun then leaves everything alone).
//
// Two modes, chosen from the step's shape:
//  * node mode, one task on every node of the step (sbatch --ntasks-per-node=1,
//    srun -N3 -n3): each task is that node's agent and runs --nproc-per-node
//    workers. nnodes = SLURM_STEP_NUM_NODES, node rank = SLURM_NODEID,
//    --nproc-per-node defaults to SLURM_GPUS_ON_NODE when it is set.
//  * task mode, more tasks than nodes (srun -n 8): each task is one worker, the
//    way `srun python3 train.py` is: RANK=SLURM_PROCID, LOCAL_RANK=SLURM_LOCALID,
//    WORLD_SIZE=SLURM_NTASKS, LOCAL_WORLD_SIZE = tasks on this node,
//    GROUP_RANK=SLURM_NODEID; --nproc-per-node other than 1 is an error.
// In both, the rendezvous (and the per-round c10d store the workers use as
// MASTER_ADDR:MASTER_PORT) is hosted by the first node of SLURM_STEP_NODELIST
// (node 0 in node mode, its local task 0 in task mode), which every task
// resolves itself; the run id is slurm-<job>.<step>; the port and the job
// token are derived as below. docs/slurm.md has the whole story.
//
// Port: SLURM_STEP_RESV_PORTS' first port when the step has reserved ports
// (srun --resv-ports, with MpiParams=ports=... in slurm.conf: Slurm then
// guarantees no other step on the node has it); otherwise
// kSlurmPortBase + 4 * (job id mod kSlurmPortJobSlots) + step id mod 4, so two
// jobs sharing a node collide only if their ids are a multiple of
// kSlurmPortJobSlots apart and their step numbers agree mod 4. The range
// 20000-29399 lies below Linux's ephemeral ports and below torchrun's 29400
// and 29500 defaults. The hosting task checks the port first and fails with a
// remedy when something else holds it.
//
// Token: SHA-256 over (cluster, job id, step id, secret), where secret is the
// content of --rdzv-token-file or $DRUN_RDZV_TOKEN when given, else empty.
// Without a secret this keeps other jobs' and other steps' agents out (a
// stale or mistaken agent is rejected with a clear message) but is no secret
// from another user who reads the job id from squeue; with one (export
// DRUN_RDZV_TOKEN=$(openssl rand -hex 16) in the batch script; srun carries it
// to every task) it is. The c10d store, like torchrun's, has no
// authentication at all.
#ifndef DRUN_LAUNCHER_SLURM_SLURM_ENV_H_
#define DRUN_LAUNCHER_SLURM_SLURM_ENV_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "launcher/job/cli.h"

namespace drun {

inline constexpr int kSlurmPortBase = 20000;
inline constexpr int kSlurmPortJobSlots = 2350;  // x 4 steps: ports 20000-29399

enum class SlurmMode {
  kOff,      // not in an srun step, or the command line configures the rendezvous
  kPerNode,  // one task per node: each task is a node's agent
  kPerTask,  // several tasks on some node: each task is one worker
};

// What drun worked out from SLURM_*; the result of a pure function of the
// command line, the environment and the user's secret.
struct SlurmStepPlan {
  SlurmMode mode = SlurmMode::kOff;
  std::string why_off;       // kOff: the reason, for messages and tests
  std::string step;          // "<job>.<step>"
  int num_nodes = 0;
  int num_tasks = 0;
  int node_id = 0;
  int proc_id = 0;
  int local_id = 0;
  int tasks_on_node = 0;     // tasks of this step on this task's node
  std::string host;          // the rendezvous host: first node of the step
  int port = 0;
  std::string port_source;   // "SLURM_STEP_RESV_PORTS" or "derived from the job id"
  bool is_host = false;      // this task hosts the rendezvous
  std::string token;         // the derived job token (hex)
  v1::JobSpec spec;          // the job with the above applied
};

// The rendezvous port of job `job_id`, step `step_id` when no ports are reserved.
int DerivedSlurmPort(uint64_t job_id, uint64_t step_id);

// The derived job token (64 hex digits).
std::string DerivedSlurmToken(const std::string& cluster, const std::string& job_id,
                              const std::string& step_id, const std::string& secret);

// Decides the mode and computes the plan; `secret` as described above. Errors
// (InvalidArgument, one line with the remedy) are inconsistent or unusable
// SLURM_* values and flags that contradict the step (--nnodes 4 in a 3-node
// step, --nproc-per-node 2 with several tasks per node, --launcher slurm under
// srun).
absl::StatusOr<SlurmStepPlan> PlanSlurmStep(const CommandLine& cl,
                                            const std::map<std::string, std::string>& env,
                                            const std::string& secret);

// Called by main before anything runs: plans, and when the mode is not kOff
// rewrites cl->spec, puts the derived token in (*env)["DRUN_RDZV_TOKEN"] (where
// main reads it; --rdzv-token-file is consumed as the secret), checks that the
// port is free on the hosting task, and has the hosting task print one line
// saying what was chosen. Also rejects --launcher slurm outside an allocation
// and fills its defaults (SlurmLauncherDefaults). `mode`, when given, gets the
// step's mode (kOff when nothing was applied).
absl::Status ApplySlurmEnvironment(CommandLine* cl, std::map<std::string, std::string>* env,
                                   SlurmMode* mode = nullptr);

// The source address this node uses toward the first node of the Slurm hostlist
// `nodelist` other than `self` that resolves and routes (what that node sees this
// one as); "" when the list names no other node or none resolves or routes. It is
// this node's address for the job even where its own name resolves to loopback, as
// Debian's stock /etc/hosts has it (127.0.1.1).
std::string AddressTowardOtherNodes(const std::string& nodelist, const std::string& self, int port);

// The NodeName -> NodeAddr pairs in `scontrol -o show node` output (one node a
// line, `KEY=VALUE` words), in its order; lines without both are skipped.
std::vector<std::pair<std::string, std::string>> ParseNodeAddrs(absl::string_view scontrol_output);

// NodeAddr of every node of the Slurm hostlist `nodelist` as slurmctld knows it
// (what slurmd is reached at, which need not be a name this machine resolves:
// an salloc shell on a login host), by `scontrol -o show node LIST` with
// scontrol found on `path`, bounded by 10 s. NodeName -> NodeAddr; empty when
// scontrol is missing, fails or prints nothing.
std::vector<std::pair<std::string, std::string>> SlurmNodeAddrs(const std::string& nodelist,
                                                                const std::string& path);

// The source address of this machine's route toward the first of `addrs`
// (numeric, or names to resolve) that resolves and routes; "" if none does.
std::string AddressTowardAny(const std::vector<std::string>& addrs, int port);

// This node's Slurm name: SLURMD_NODENAME, else the hostname ("" if none).
std::string SlurmNodeName(const std::map<std::string, std::string>& env);

// AddressTowardOtherNodes for a task of an srun step: the step's nodes
// (SLURM_STEP_NODELIST, else SLURM_NODELIST), this node being SlurmNodeName.
std::string StepAddressTowardOtherNodes(const std::map<std::string, std::string>& env, int port);

// --launcher slurm: nnodes defaults to the allocation's node count (and may not
// exceed it), the run id to slurm-<job>, --nproc-per-node to
// SLURM_GPUS_ON_NODE. Errors when not inside an allocation or inside an srun
// step.
absl::Status SlurmLauncherDefaults(CommandLine* cl, const std::map<std::string, std::string>& env);

}  // namespace drun

#endif  // DRUN_LAUNCHER_SLURM_SLURM_ENV_H_
