// drun's exit codes: one rule for every mode (the man page's EXIT STATUS and
// docs/semantics.md say the same).
//   0        every worker exited 0
//   N        the first failing worker's exit code; 128+S when signal S killed it
//   1        the launcher failed (unreachable host, rendezvous error, port in use)
//   2        bad input: command line, environment variable, job/host/token file,
//            a program that cannot be run, an unwritable log or report path
//   124      --hang-timeout: no rank made progress for that long (timeout(1)'s code)
//   127      drun-net, drun's networked half, is missing
//   128+S    drun itself was stopped by signal S (Ctrl-C: 130)
#ifndef DRUN_RENDEZVOUS_BASE_EXIT_CODE_H_
#define DRUN_RENDEZVOUS_BASE_EXIT_CODE_H_

#include <sys/wait.h>

namespace drun {

inline constexpr int kExitLauncherFailed = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitHung = 124;
inline constexpr int kExitNoNetworkBinary = 127;

// A process killed by signal `sig`, or drun stopped by it.
inline constexpr int ExitCodeForSignal(int sig) { return 128 + sig; }

// A child's wait status as an exit code: its code, or 128+S for signal S.
inline int ExitCodeOfStatus(int status) {
  return WIFSIGNALED(status) ? ExitCodeForSignal(WTERMSIG(status)) : WEXITSTATUS(status);
}

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_EXIT_CODE_H_
