#include "rendezvous/base/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>

extern char** environ;

namespace drun {
namespace {

void PlaceStdio(posix_spawn_file_actions_t* fa, int fd, int target, int devnull_flags) {
  if (fd == SpawnStdio::kDevNull) {
    posix_spawn_file_actions_addopen(fa, target, "/dev/null", devnull_flags, 0);
  } else if (fd != SpawnStdio::kInherit) {
    posix_spawn_file_actions_adddup2(fa, fd, target);
  }
}

}  // namespace

int SpawnInOwnGroup(const std::vector<std::string>& argv, const SpawnStdio& stdio, pid_t* pid) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  PlaceStdio(&fa, stdio.in, 0, O_RDONLY);
  PlaceStdio(&fa, stdio.out, 1, O_WRONLY);
  PlaceStdio(&fa, stdio.err, 2, O_WRONLY);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigfillset(&defaults);
  sigdelset(&defaults, SIGKILL);
  sigdelset(&defaults, SIGSTOP);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = posix_spawnp(pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return rc;
}

}  // namespace drun
