#include "launcher/job/user_env.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace drun {

namespace {

absl::Status Bad(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

struct Owned {
  const char* name;
  const char* instead;
};

// Every variable of the worker environment drun builds (agent/worker_env.cc).
constexpr Owned kOwned[] = {
    {"MASTER_ADDR", "--master-addr"},
    {"MASTER_PORT", "--master-port"},
    {"RANK", "--node-rank for the node's place; ranks follow from it"},
    {"LOCAL_RANK", "nothing: each worker gets its own"},
    {"GROUP_RANK", "--node-rank"},
    {"ROLE_RANK", "--node-rank"},
    {"WORLD_SIZE", "--nnodes and --nproc-per-node"},
    {"LOCAL_WORLD_SIZE", "--nproc-per-node"},
    {"GROUP_WORLD_SIZE", "--nnodes"},
    {"ROLE_WORLD_SIZE", "--nnodes and --nproc-per-node"},
    {"ROLE_NAME", "--role"},
    {"TORCHELASTIC_RUN_ID", "--rdzv-id"},
    {"TORCHELASTIC_MAX_RESTARTS", "--max-restarts"},
    {"TORCHELASTIC_RESTART_COUNT", "nothing: drun counts restarts"},
    {"TORCHELASTIC_USE_AGENT_STORE", "--no-agent-store"},
    {"TORCHELASTIC_ERROR_FILE", "--log-dir"},
};

}  // namespace

bool ValidVarName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(name[0])) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseEnvFile(
    absl::string_view text, absl::string_view filename, const EnvVars& env) {
  std::vector<std::pair<std::string, std::string>> out;
  int lineno = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++lineno;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#') continue;
    if (absl::StartsWith(line, "export ") || absl::StartsWith(line, "export\t")) {
      line = absl::StripLeadingAsciiWhitespace(line.substr(7));
    }
    const size_t eq = line.find('=');
    const std::string name(absl::StripTrailingAsciiWhitespace(line.substr(0, eq)));
    if (!ValidVarName(name)) {
      return Bad(absl::StrCat(filename, ":", lineno, ": expected VAR=VALUE or VAR, got '",
                              absl::CEscape(line.substr(0, 80)), "'"));
    }
    if (eq == absl::string_view::npos) {
      auto it = env.find(name);
      if (it == env.end()) {
        return Bad(absl::StrCat(filename, ":", lineno, ": ", name,
                                " is not set in this environment; write ", name, "=VALUE"));
      }
      out.emplace_back(name, it->second);
      continue;
    }
    absl::string_view value = absl::StripLeadingAsciiWhitespace(line.substr(eq + 1));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    out.emplace_back(name, std::string(value));
  }
  return out;
}

absl::StatusOr<std::pair<std::string, std::string>> ParseForwardArg(const std::string& arg,
                                                                    const EnvVars& env) {
  const size_t eq = arg.find('=');
  const std::string name = arg.substr(0, eq);
  if (!ValidVarName(name)) {
    return Bad(absl::StrCat("-x '", absl::CEscape(arg.substr(0, 80)),
                            "': expected VAR or VAR=VALUE (a variable name of letters, "
                            "digits and '_')"));
  }
  if (eq != std::string::npos) return std::make_pair(name, arg.substr(eq + 1));
  auto it = env.find(name);
  if (it == env.end()) {
    return Bad(absl::StrCat("-x ", name, ": ", name,
                            " is not set in this environment; write -x ", name,
                            "=VALUE to set it for the workers"));
  }
  return std::make_pair(name, it->second);
}

std::optional<std::string> DrunOwnedVariable(absl::string_view name) {
  for (const Owned& o : kOwned) {
    if (name == o.name) return std::string(o.instead);
  }
  return std::nullopt;
}

absl::StatusOr<UserEnv> ResolveUserEnv(const EnvVars& file_env,
                                       const std::optional<std::pair<std::string, std::string>>& env_file,
                                       const std::vector<std::string>& forward_args, const EnvVars& env) {
  UserEnv out;
  auto put = [&out](const std::string& source, const std::string& name, const std::string& value) {
    if (auto instead = DrunOwnedVariable(name)) {
      out.notices.push_back(absl::StrCat(source, ": drun sets ", name,
                                         " for every worker; ignored (use ", *instead, ")"));
      return;
    }
    out.vars[name] = value;
  };
  for (const auto& [k, v] : file_env) put(absl::StrCat("env: ", k), k, v);
  if (env_file) {
    auto parsed = ParseEnvFile(env_file->second, env_file->first, env);
    if (!parsed.ok()) return parsed.status();
    for (const auto& [k, v] : *parsed) put(absl::StrCat("--env-file ", env_file->first), k, v);
  }
  for (const std::string& arg : forward_args) {
    auto kv = ParseForwardArg(arg, env);
    if (!kv.ok()) return kv.status();
    put(absl::StrCat("-x ", kv->first), kv->first, kv->second);
  }
  return out;
}

}  // namespace drun
