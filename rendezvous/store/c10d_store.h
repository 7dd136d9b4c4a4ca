// C10dStoreServer: a TCPStore-compatible server that unmodified PyTorch / LibTorch clients
// (torch 1.13 and the validated 2.x protocol) use as their c10d store, i.e. what workers reach
// at MASTER_ADDR:MASTER_PORT with TORCHELASTIC_USE_AGENT_STORE=True.
//
// Promises:
//  * One background thread runs a single epoll loop; connections are non-blocking with
//    TCP_NODELAY, and idle ones cost a few hundred bytes each (10 000 are fine; the process's
//    RLIMIT_NOFILE must allow them).
//  * Each connection's protocol dialect is detected from its first bytes
//    (rendezvous/store/c10d_store_parser.h); both kinds of client can share one store.
//  * Replies go out in request order per connection; WAIT is answered when its keys appear,
//    never timed out by the server.
//  * A connection that sends something malformed, unknown or over the limits, or a request
//    torch's servers would fail on (GET of a missing key from a 1.13 client), is closed;
//    nobody else notices. Values are taken up to a quarter of the machine's (or container's)
//    memory per request (Options::limits), like torch's servers, which take what memory
//    holds.
//  * Stop() (or destruction) closes every connection and joins the thread.
//  * Adopt(fd) takes a connection someone else accepted (the rendezvous server's shared port,
//    docs/architecture.md "One port") into the loop, from any thread; bytes the client sent
//    before are read as if the store had accepted it (the caller only peeked at them).
//
// The wire protocol is specified in docs/c10d_store_protocol.md; the design and the limits
// are described in docs/c10d_store.md.
#ifndef DRUN_RENDEZVOUS_STORE_C10D_STORE_H_
#define DRUN_RENDEZVOUS_STORE_C10D_STORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/unique_fd.h"
#include "rendezvous/base/wake_fd.h"
#include "absl/strings/string_view.h"
#include "rendezvous/store/c10d_store_parser.h"

namespace drun {

// The parser limits for this machine: c10d_store::LimitsForMemory() of its physical memory,
// or of its cgroup's memory limit when that is lower (in a container).
c10d_store::ParserLimits StoreLimitsForThisMachine();

class C10dStoreServer {
 public:
  struct Options {
    c10d_store::ParserLimits limits = StoreLimitsForThisMachine();
    // A connection whose unsent replies exceed this is not read from until they drain
    // (a client that pipelines requests but never reads cannot grow the server unbounded).
    size_t max_pending_output = 16 * 1024 * 1024;
    // Receives one line per closed-on-error connection; null = silent.
    std::function<void(absl::string_view)> log;
    // Asked for every connection the store's own listener accepts (not for
    // Adopt()ed ones, which their acceptor asked): false closes it at once.
    // Null: every connection is served.
    std::function<bool(int fd)> admit;
  };

  // Binds bind_addr:port (port 0 = an ephemeral port; bind_addr "" = all interfaces,
  // dual-stack [::] when IPv6 is available, else 0.0.0.0) and serves on one background
  // thread until Stop() or destruction. Cheap: a fresh store is started for every
  // rendezvous round.
  static absl::StatusOr<std::unique_ptr<C10dStoreServer>> Start(const std::string& bind_addr,
                                                                int port);
  static absl::StatusOr<std::unique_ptr<C10dStoreServer>> Start(const std::string& bind_addr,
                                                                int port, Options options);

  // Serves only connections handed in by Adopt(): no listening socket; port() is 0.
  static absl::StatusOr<std::unique_ptr<C10dStoreServer>> StartWithoutListener();
  static absl::StatusOr<std::unique_ptr<C10dStoreServer>> StartWithoutListener(
      Options options);

  // Takes ownership of `fd`, a connected TCP stream socket whose unread bytes are the start
  // of a TCPStore client's stream, and serves it like an accepted connection. Thread-safe.
  // After Stop() (or if the loop cannot take it) the descriptor is closed and an error
  // returned.
  absl::Status Adopt(UniqueFd fd);

  C10dStoreServer(const C10dStoreServer&) = delete;
  C10dStoreServer& operator=(const C10dStoreServer&) = delete;

  int port() const { return port_; }
  // Open client connections right now (for stats and tests).
  size_t connection_count() const { return connections_.load(std::memory_order_relaxed); }
  // Connections closed by the server because of a protocol error, since Start.
  uint64_t protocol_errors() const { return protocol_errors_.load(std::memory_order_relaxed); }

  void Stop();  // closes every connection and joins the thread; idempotent
  ~C10dStoreServer();

 private:
  class Loop;
  C10dStoreServer() = default;
  // Starts the loop thread on `listen_fd` (-1: none), owning it.
  static absl::StatusOr<std::unique_ptr<C10dStoreServer>> Launch(UniqueFd listener, int port,
                                                                 Options options);

  int port_ = 0;
  WakeFd wake_;  // Adopt() and Stop() wake the loop
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
  Mutex stop_mu_;  // serializes Stop()
  // Descriptors handed in by Adopt(), not yet taken by the loop; `stopped_` once Stop() has
  // begun (Adopt then refuses, so no descriptor is left behind in the queue).
  Mutex adopt_mu_;
  std::vector<UniqueFd> adopted_ ABSL_GUARDED_BY(adopt_mu_);
  bool stopped_ ABSL_GUARDED_BY(adopt_mu_) = false;
  std::atomic<size_t> connections_{0};
  std::atomic<uint64_t> protocol_errors_{0};
};

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_STORE_C10D_STORE_H_
