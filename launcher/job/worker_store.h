// Who serves the workers' c10d store (the store env:// opens), decided once per
// job, on the machine where drun is typed, into JobSpec.agent_store and
// JobSpec.env (docs/semantics.md, "The workers' store").
//
// torch 2.x's TCPStore asks for libuv unless told not to, and a torch built
// without it (Debian's 2.6 and 2.14, Windows wheels) refuses: "use_libuv was
// requested but PyTorch was built without libuv support, run with USE_LIBUV=0
// to disable it". Rank 0's own store (env:// without an agent store) takes
// use_libuv from USE_LIBUV, but a client of an agent store takes no use_libuv
// argument at all, so it asks for libuv whatever USE_LIBUV says (torch 2.6 and
// 2.14, torch/distributed/rendezvous.py `_create_c10d_store`). torch's own
// advice, USE_LIBUV=0, therefore works under drun only when rank 0 hosts the
// store: a job whose workers say USE_LIBUV=0 (drun's environment, -x,
// --env-file, a job file's env:) or --rdzv-conf use_libuv=0 gets rank 0's
// store, as with --no-agent-store, and every worker gets USE_LIBUV=0.
#ifndef DRUN_LAUNCHER_JOB_WORKER_STORE_H_
#define DRUN_LAUNCHER_JOB_WORKER_STORE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace drun {

enum class StoreHost { kAgent, kRank0 };

// Why the store is where it is.
enum class StoreWhy {
  kDefault,        // drun's agent store
  kFlag,           // --no-agent-store
  kEnvUseLibuv,    // USE_LIBUV=0 in drun's environment
  kGivenUseLibuv,  // USE_LIBUV=0 given to the workers (-x, --env-file, env:)
  kRdzvConf,       // --rdzv-conf use_libuv=0
};

struct WorkerStoreInput {
  bool no_agent_store = false;                     // --no-agent-store
  std::optional<bool> rdzv_use_libuv;              // --rdzv-conf use_libuv
  std::optional<std::string> env_use_libuv;        // USE_LIBUV in drun's environment
  std::optional<std::string> given_use_libuv;      // USE_LIBUV given to the workers
};

struct WorkerStore {
  StoreHost host = StoreHost::kAgent;
  StoreWhy why = StoreWhy::kDefault;
  // The workers need USE_LIBUV=0 that they were not given: set it in JobSpec.env.
  bool give_use_libuv_0 = false;
};

// As torch's env:// reads it: libuv unless USE_LIBUV is "1" or unset (any
// other value, "0", "false" or "", turns it off).
bool UseLibuvOff(const std::optional<std::string>& value);

// InvalidArgument (one line) when --rdzv-conf use_libuv and the workers'
// USE_LIBUV say opposite things.
absl::StatusOr<WorkerStore> ChooseWorkerStore(const WorkerStoreInput& in);

// The line drun prints (without "drun: ") when libuv moved the store; "" for
// the default and --no-agent-store.
std::string WorkerStoreNotice(const WorkerStore& store);

}  // namespace drun

#endif  // DRUN_LAUNCHER_JOB_WORKER_STORE_H_
