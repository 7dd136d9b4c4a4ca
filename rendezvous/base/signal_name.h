// Names of signals as drun prints them ("SIGTERM") and as the ssh protocol
// carries them ("TERM", RFC 4254 6.10). One table: glibc's sigabbrev_np.
#ifndef DRUN_RENDEZVOUS_BASE_SIGNAL_NAME_H_
#define DRUN_RENDEZVOUS_BASE_SIGNAL_NAME_H_

#include <string>

namespace drun {

// "SIGTERM"; "signal 40" for a number without a name (real-time signals).
std::string SignalName(int sig);

// "TERM" (no SIG prefix); the number as text when it has no name.
std::string SignalAbbrev(int sig);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_SIGNAL_NAME_H_
