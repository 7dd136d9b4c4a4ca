// The worker environment: a pure function from the job, the node's round
// assignment and a local rank to the environment torchrun would give that
// worker, on top of the agent's own environment.
#ifndef DRUN_AGENT_WORKER_ENV_H_
#define DRUN_AGENT_WORKER_ENV_H_

#include <map>
#include <string>
#include <vector>

#include "drun/v1/rendezvous.pb.h"

namespace drun {

using EnvMap = std::map<std::string, std::string>;

// The interface of the workers' gloo and NCCL sockets (GLOO_SOCKET_IFNAME,
// NCCL_SOCKET_IFNAME; docs/semantics.md).
struct SocketIface {
  std::string name;    // "": leave both variables alone
  std::string why;     // for the agent's line: "10.0.0.11, this node's address toward the rendezvous"
  bool given = false;  // chosen with --iface: overrides values inherited from drun's environment
};

// Which name of NCCL's async error handling the workers' torch reads
// (agent/torch_probe.h); drun sets that one to 1, as torchrun of that version
// does, unless the user gave the workers either name.
enum class NcclErrorVar {
  kLegacy,         // torch before 2.2: NCCL_ASYNC_ERROR_HANDLING
  kTorchPrefixed,  // torch 2.2 and later: TORCH_NCCL_ASYNC_ERROR_HANDLING (the old name warns)
  kBoth,           // unknown (a program, no torch found): both names
};

struct WorkerEnvInput {
  int local_rank = 0;
  int local_world_size = 1;
  std::string error_file;          // TORCHELASTIC_ERROR_FILE
  std::string cuda_visible_device;  // non-empty: narrow CUDA_VISIBLE_DEVICES to it
  // --numa-binding's thread count for this worker (agent/cpu_placement.h):
  // its OMP_NUM_THREADS unless the user gave one. 0: torchrun's rule (1 with
  // several local workers).
  int omp_threads = 0;
  // Drun's choice stands unless the user gave the workers the variables
  // themselves; a --iface choice also overrides drun's own environment.
  SocketIface socket_iface;
  NcclErrorVar nccl_error_var = NcclErrorVar::kBoth;
};

// `base` is the agent's environment; spec.env (forwarded with -x/--env-file)
// overrides it, and torchrun's variables override both. Under
// --virtual-local-rank every worker's LOCAL_RANK is 0 (its GPU is then
// in.cuda_visible_device); TORCHELASTIC_SIGNALS_TO_HANDLE names the signals
// drun passes on (--signals-to-handle), as torchrun 2.x's workers inherit it.
EnvMap BuildWorkerEnv(const EnvMap& base, const v1::JobSpec& spec, const v1::Assignment& assignment,
                      const WorkerEnvInput& in);

// `base` with spec.env (-x, --env-file) laid over it: what the workers start
// from before torchrun's variables.
EnvMap WithForwardedEnv(const EnvMap& base, const v1::JobSpec& spec);

// As torch's env:// reads USE_LIBUV: libuv unless it is "1" or unset (any
// other value, "0", "false" or "", turns it off).
bool UseLibuvOff(const EnvMap& env);

EnvMap EnvironToMap(char** environ);
std::vector<std::string> EnvToList(const EnvMap& env);

}  // namespace drun

#endif  // DRUN_AGENT_WORKER_ENV_H_
