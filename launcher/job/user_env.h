// The environment a user gives the workers on top of their agent's own, in
// every mode alike: a job file's `env:` map, then --env-file's lines, then
// each -x VAR / -x VAR=VALUE in order (a later setting wins). Resolved once, on
// the machine where the command is typed, into JobSpec.env; remote agents
// receive it with the job.
//
// Variables that drun itself sets for every worker (RANK, MASTER_ADDR, ...)
// cannot be given this way: each is dropped with a one-line notice that names
// the flag to use instead, since a silently overridden value is the worst kind
// of surprise.
#ifndef DRUN_LAUNCHER_JOB_USER_ENV_H_
#define DRUN_LAUNCHER_JOB_USER_ENV_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace drun {

using EnvVars = std::map<std::string, std::string>;

// Letters, digits and '_', not starting with a digit.
bool ValidVarName(absl::string_view name);

// Parses --env-file text: VAR=VALUE lines, '#' comments, blank lines, an
// optional leading "export ", one pair of matching quotes around VALUE
// removed, and a bare VAR forwarding this environment's value. Errors name
// file and line.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseEnvFile(
    absl::string_view text, absl::string_view filename, const EnvVars& env);

// One -x argument: "VAR=VALUE", or "VAR" for this environment's value (an
// error when VAR is not set here).
absl::StatusOr<std::pair<std::string, std::string>> ParseForwardArg(const std::string& arg,
                                                                    const EnvVars& env);

// For a variable drun sets for every worker: what the user should write
// instead ("--master-addr", "--nproc-per-node and --nnodes", ...). nullopt for
// every other variable.
std::optional<std::string> DrunOwnedVariable(absl::string_view name);

struct UserEnv {
  EnvVars vars;                       // what the workers get
  std::vector<std::string> notices;  // one line each, without "drun: "
};

// Merges the sources in precedence order. `env_file` is {path, text} when
// --env-file was given. `where` names each source for the notices.
absl::StatusOr<UserEnv> ResolveUserEnv(const EnvVars& file_env,
                                       const std::optional<std::pair<std::string, std::string>>& env_file,
                                       const std::vector<std::string>& forward_args, const EnvVars& env);

}  // namespace drun

#endif  // DRUN_LAUNCHER_JOB_USER_ENV_H_
