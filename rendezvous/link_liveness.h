// Link liveness: how drun notices a lost peer without trusting either
// process to be scheduled on time.
//
// Every rendezvous connection (agent <-> server) has TCP keep-alive probes and
// TCP_USER_TIMEOUT set to the job's keep-alive timeout (keep_alive_interval x
// keep_alive_max_attempt, 2 s by default). The kernels answer probes and
// acknowledge data by themselves, so a link that is cut or a host that is
// frozen breaks the connection within that timeout, while processes that are
// merely starved of CPU (a thousand agents on two cores, a busy rendezvous
// host) never look lost. A process that dies closes its connection at once.
//
// What the kernel cannot see is a process that is alive but stuck (SIGSTOP,
// a deadlock) on a healthy host: application heartbeats catch that, with the
// longer ProcessSilenceTimeout.
#ifndef DRUN_RENDEZVOUS_LINK_LIVENESS_H_
#define DRUN_RENDEZVOUS_LINK_LIVENESS_H_

#include <chrono>

namespace drun {

// Sets SO_KEEPALIVE, TCP_KEEPIDLE/KEEPINTVL/KEEPCNT, TCP_USER_TIMEOUT and
// TCP_NODELAY on a TCP socket so the kernel breaks the connection once the
// peer's kernel has not answered for about `timeout` (keep-alive probes have
// a resolution of 1 s: the bound is timeout rounded up to whole seconds, and
// at least 2 s). Returns false if any option was refused.
bool SetLinkTimeout(int fd, std::chrono::milliseconds timeout);

// How long a peer whose link is alive may stay silent before it is
// considered stuck: 10 x the keep-alive timeout, at least 10 s.
std::chrono::milliseconds ProcessSilenceTimeout(std::chrono::milliseconds keepalive_timeout);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_LINK_LIVENESS_H_
