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
// longer silence bound of PaceFor. The server chooses the pace from the
// job's size and tells every agent at its Hello (v1::Pace): all nodes'
// heartbeats together stay within kHeartbeatsPerSecond, a small share of
// one server core, whatever the size.
//
// Detection bounds (docs/architecture.md, "Lost nodes"): a killed agent at
// once (its connection closes); a cut link or frozen host after the link
// timeout; a stuck process after PaceFor(...).silence, which is 10 x the
// link timeout (at least 10 s) up to nodes / 500 s (20 s for up to 10 000
// nodes with the default 2-s link timeout, 60 s at 30 000, 200 s at 100 000).
#ifndef DRUN_RENDEZVOUS_LINK_LIVENESS_H_
#define DRUN_RENDEZVOUS_LINK_LIVENESS_H_

#include <chrono>

#include "drun/v1/job.pb.h"

namespace drun {

// Sets SO_KEEPALIVE, TCP_KEEPIDLE/KEEPINTVL/KEEPCNT, TCP_USER_TIMEOUT and
// TCP_NODELAY on a TCP socket so the kernel breaks the connection once the
// peer's kernel has not answered for about `timeout` (keep-alive probes have
// a resolution of 1 s: the bound is timeout rounded up to whole seconds, and
// at least 2 s). Returns false if any option was refused.
bool SetLinkTimeout(int fd, std::chrono::milliseconds timeout);

// The job's link timeout: keep_alive_interval x keep_alive_max_attempt
// (JobSpec.keepalive_timeout_s), decided once here for every side.
std::chrono::milliseconds LinkTimeout(const v1::JobSpec& spec);

// How many heartbeats a second one server may be sent by all its nodes
// together. One costs the server about 20-50 us of CPU (read, handled,
// answered; docs/benchmarks_rendezvous.md): 2000 a second is 4-10 % of a
// core, leaving the rest to Joins, Assignments and the store.
inline constexpr int kHeartbeatsPerSecond = 2000;

struct Pace {
  std::chrono::milliseconds heartbeat;  // each agent sends one this often
  // A peer whose link is alive but that sent nothing for this long is
  // stuck: 4 heartbeats, and at least 10 x the link timeout (>= 10 s).
  std::chrono::milliseconds silence;
};
// The pace of a job of `nodes` nodes whose links time out after `link_timeout`.
Pace PaceFor(std::chrono::milliseconds link_timeout, int nodes);

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_LINK_LIVENESS_H_
