#include "agent/worker_env.h"

#include <string>

#include "agent/handled_signals.h"

namespace drun {

namespace {

// torchrun sets its torch's name to 1; a user's choice under either name stands alone.
void SetNcclErrorHandling(NcclErrorVar which, EnvMap* env) {
  constexpr const char* kLegacy = "NCCL_ASYNC_ERROR_HANDLING";
  constexpr const char* kPrefixed = "TORCH_NCCL_ASYNC_ERROR_HANDLING";
  if (env->count(kLegacy) || env->count(kPrefixed)) return;
  if (which != NcclErrorVar::kTorchPrefixed) (*env)[kLegacy] = "1";
  if (which != NcclErrorVar::kLegacy) (*env)[kPrefixed] = "1";
}

}  // namespace

EnvMap BuildWorkerEnv(const EnvMap& base, const v1::JobSpec& spec, const v1::Assignment& a,
                      const WorkerEnvInput& in) {
  EnvMap env = WithForwardedEnv(base, spec);
  const int rank = a.rank_offset() + in.local_rank;
  const std::string role = spec.role().empty() ? "default" : spec.role();
  env["LOCAL_RANK"] = spec.virtual_local_rank() ? "0" : std::to_string(in.local_rank);
  env["RANK"] = std::to_string(rank);
  env["GROUP_RANK"] = std::to_string(a.group_rank());
  // drun runs one role per job, so role ranks equal global ranks.
  env["ROLE_RANK"] = std::to_string(rank);
  env["ROLE_NAME"] = role;
  env["LOCAL_WORLD_SIZE"] = std::to_string(in.local_world_size);
  env["WORLD_SIZE"] = std::to_string(a.world_size());
  env["GROUP_WORLD_SIZE"] = std::to_string(a.group_world_size());
  env["ROLE_WORLD_SIZE"] = std::to_string(a.world_size());
  env["MASTER_ADDR"] = a.master_addr();
  env["MASTER_PORT"] = std::to_string(a.master_port());
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(a.restart_count());
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(spec.max_restarts());
  env["TORCHELASTIC_RUN_ID"] = spec.run_id();
  env["TORCHELASTIC_USE_AGENT_STORE"] = a.use_agent_store() ? "True" : "False";
  env["TORCHELASTIC_ERROR_FILE"] = in.error_file;
  env["TORCHELASTIC_SIGNALS_TO_HANDLE"] = SignalListText(HandledSignals(spec));
  SetNcclErrorHandling(in.nccl_error_var, &env);
  if (!env.count("OMP_NUM_THREADS")) {
    if (in.omp_threads > 0) {
      env["OMP_NUM_THREADS"] = std::to_string(in.omp_threads);
    } else if (in.local_world_size > 1) {
      env["OMP_NUM_THREADS"] = "1";
    }
  }
  if (!in.cuda_visible_device.empty()) env["CUDA_VISIBLE_DEVICES"] = in.cuda_visible_device;
  if (!in.socket_iface.name.empty()) {
    for (const char* k : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}) {
      if (in.socket_iface.given || !env.count(k)) env[k] = in.socket_iface.name;
    }
  }
  return env;
}

EnvMap WithForwardedEnv(const EnvMap& base, const v1::JobSpec& spec) {
  EnvMap env = base;
  for (const auto& [k, v] : spec.env()) env[k] = v;
  return env;
}

bool UseLibuvOff(const EnvMap& env) {
  auto it = env.find("USE_LIBUV");
  return it != env.end() && it->second != "1";
}

EnvMap EnvironToMap(char** environ) {
  EnvMap m;
  for (char** e = environ; e && *e; ++e) {
    std::string s(*e);
    size_t eq = s.find('=');
    if (eq == std::string::npos) continue;
    m.emplace(s.substr(0, eq), s.substr(eq + 1));
  }
  return m;
}

std::vector<std::string> EnvToList(const EnvMap& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace drun
