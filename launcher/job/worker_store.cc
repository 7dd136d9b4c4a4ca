#include "launcher/job/worker_store.h"

#include "absl/strings/str_cat.h"

namespace drun {

bool UseLibuvOff(const std::optional<std::string>& value) { return value.has_value() && *value != "1"; }

absl::StatusOr<WorkerStore> ChooseWorkerStore(const WorkerStoreInput& in) {
  // What the workers will see: what they are given wins over drun's environment.
  const std::optional<std::string>& seen = in.given_use_libuv ? in.given_use_libuv : in.env_use_libuv;
  const char* where = in.given_use_libuv ? "given to the workers" : "in drun's environment";
  if (in.rdzv_use_libuv.has_value() && seen.has_value() && *in.rdzv_use_libuv == UseLibuvOff(seen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv-conf use_libuv=", *in.rdzv_use_libuv ? 1 : 0, " and USE_LIBUV=", *seen, " (", where,
        ") say opposite things about libuv: give one of them"));
  }
  WorkerStore s;
  if (UseLibuvOff(seen)) {
    s.host = StoreHost::kRank0;
    s.why = in.given_use_libuv ? StoreWhy::kGivenUseLibuv : StoreWhy::kEnvUseLibuv;
    // drun's environment reaches the workers of this host only; every node's workers need it.
    s.give_use_libuv_0 = !in.given_use_libuv.has_value();
  } else if (in.rdzv_use_libuv.has_value() && !*in.rdzv_use_libuv) {
    s.host = StoreHost::kRank0;
    s.why = StoreWhy::kRdzvConf;
    s.give_use_libuv_0 = true;
  }
  if (in.no_agent_store) {
    s.host = StoreHost::kRank0;
    if (s.why == StoreWhy::kDefault) s.why = StoreWhy::kFlag;
  }
  return s;
}

std::string WorkerStoreNotice(const WorkerStore& store) {
  const char* from = nullptr;
  switch (store.why) {
    case StoreWhy::kDefault:
    case StoreWhy::kFlag:
      return "";
    case StoreWhy::kEnvUseLibuv:
      from = "USE_LIBUV=0 (drun's environment)";
      break;
    case StoreWhy::kGivenUseLibuv:
      from = "USE_LIBUV=0 (given to the workers)";
      break;
    case StoreWhy::kRdzvConf:
      from = "--rdzv-conf use_libuv=0";
      break;
  }
  return absl::StrCat(from, ": rank 0's torch hosts the workers' store without libuv, as with "
                      "--no-agent-store (torch's client of drun's store would ask for libuv)");
}

}  // namespace drun
