// TLS under gRPC for the rendezvous channel (--rdzv-tls; docs/architecture.md,
// "TLS"). gRPC 1.51 (Debian 12) builds a channel or a server connection from a
// descriptor only in the clear, and drun must own its sockets (link liveness,
// one port, admission). So TLS runs in drun itself, with OpenSSL: a TlsRelay
// takes a connected TCP socket, makes a socketpair, gives one end (the "plain
// end") to the caller, who hands it to gRPC's *InsecureChannelFromFd, and
// moves bytes between the other end and SSL_read/SSL_write on the socket.
//
// Contract:
//  * TlsContext is one side's certificate, private key and CA (PEM files).
//    Both sides require the peer's certificate and verify its chain to the CA
//    (mutual TLS); host names are not checked: the CA is the job's trust
//    boundary, and lab hosts are often reached by address. TLS 1.2 at least
//    (1.3 when both have it); no session tickets (a connection lives as long
//    as its agent).
//  * TlsConnect is the client's handshake, on the caller's thread, within a
//    deadline. It returns only once the server has also accepted this side's
//    certificate (the server's relay sends one byte, kTlsAccepted, first: in
//    TLS 1.3 the client's handshake ends before the server has judged it), so
//    a refused certificate is one error here, never a broken stream later.
//    Errors are decided by OpenSSL's error codes (TlsFailure), worded for a
//    person.
//  * A TlsRelay is one thread driving every connection it holds with epoll
//    and non-blocking OpenSSL (a 1024-agent round needs no 2048 threads).
//    Accept() runs the server's handshake in that thread, so it never blocks
//    the caller; a handshake not done within Options::handshake_timeout is
//    closed. Adopt() takes a connection TlsConnect established.
//  * The plain end reads exactly the bytes the peer's plain end wrote, then
//    end-of-file when the peer closes, the handshake fails or the link breaks
//    (the socket's own options, e.g. TCP_USER_TIMEOUT, still apply).
//    Closing the plain end sends TLS close_notify and then closes the socket.
//  * Destroying the relay closes every connection it holds and joins its
//    thread. Descriptors are owned (UniqueFd) throughout.
#ifndef DRUN_RENDEZVOUS_BASE_TLS_RELAY_H_
#define DRUN_RENDEZVOUS_BASE_TLS_RELAY_H_

#include <openssl/ssl.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "rendezvous/base/clock.h"
#include "rendezvous/base/deadline_queue.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/unique_fd.h"
#include "rendezvous/base/wake_fd.h"

namespace drun {

class TlsContext {
 public:
  enum class Side { kServer, kClient };
  // Loads the PEM files. Errors (InvalidArgument, one line): a key file that
  // others may read (as token files: chmod 600), a file that does not load, a
  // key that does not match the certificate, an encrypted key (drun cannot
  // ask for its pass phrase).
  static absl::StatusOr<std::shared_ptr<const TlsContext>> Load(Side side, const std::string& cert,
                                                                const std::string& key,
                                                                const std::string& ca);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  SSL_CTX* get() const { return ctx_; }
  Side side() const { return side_; }

 private:
  TlsContext(SSL_CTX* ctx, Side side) : ctx_(ctx), side_(side) {}
  SSL_CTX* ctx_;
  Side side_;
};

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

// What the server's relay writes first once it has accepted a client.
inline constexpr char kTlsAccepted = '\x01';

// Why a handshake failed, from OpenSSL's codes.
enum class TlsFailure {
  kPeerClosed,        // end-of-file before the handshake ended (a peer without TLS)
  kNotTls,            // the peer answered with something that is not TLS
  kPeerCertRejected,  // the peer's certificate does not verify against our CA
  kRefusedByPeer,     // the peer sent an alert (it refused our certificate, ...)
  kTimeout,
  kOther,
};

// The client's handshake on `fd` (connected, non-blocking; not owned), up to
// `deadline`. `stop` (may be empty) is asked every 100 ms; true abandons the
// handshake (Cancelled). On failure, *failure (if given) says why, and the
// message is one phrase such as "the server's certificate did not verify
// against the CA (self-signed certificate in certificate chain)".
absl::StatusOr<SslPtr> TlsConnect(const TlsContext& ctx, int fd, TimePoint deadline,
                                  const std::function<bool()>& stop, TlsFailure* failure = nullptr);

class TlsRelay {
 public:
  struct Options {
    Duration handshake_timeout = std::chrono::seconds(10);
    // Called on the relay's thread for each server handshake that fails:
    // the peer given to Accept and why.
    std::function<void(const std::string& peer, TlsFailure failure, const std::string& why)> on_refused;
  };
  static absl::StatusOr<std::unique_ptr<TlsRelay>> Start(Options options);
  ~TlsRelay();

  // Server side: `tcp` (connected, non-blocking) starts its handshake in the
  // relay. Returns the plain end; gRPC may take it at once (it reads nothing
  // until the handshake is done, and end-of-file if it fails).
  absl::StatusOr<UniqueFd> Accept(UniqueFd tcp, const TlsContext& ctx, std::string peer);
  // Client side: a connection TlsConnect established on `tcp`. `on_broken`
  // (may be empty) is called on the relay's thread, before the plain end is
  // closed, when the connection ends on an error (the link timed out, the
  // peer reset it), with the socket's or OpenSSL's reason: the plain end
  // itself can only say end-of-file.
  absl::StatusOr<UniqueFd> Adopt(UniqueFd tcp, SslPtr ssl,
                                 std::function<void(const std::string&)> on_broken = nullptr);

  // Connections the relay still holds (tests: nothing is left behind).
  size_t connections() const;

  struct Conn;  // tls_relay.cc

 private:
  TlsRelay() = default;
  absl::StatusOr<UniqueFd> Add(UniqueFd tcp, SslPtr ssl, bool handshake, std::string peer,
                               std::function<void(const std::string&)> on_broken = nullptr);
  void Loop();
  void TakeIncoming();
  void Service(uint64_t id);
  void ExpireHandshakes(TimePoint now);
  void Drop(std::map<uint64_t, std::unique_ptr<Conn>>::iterator it);

  Options options_;
  UniqueFd epoll_fd_;
  WakeFd wake_;  // new connections, or stop
  std::thread thread_;
  mutable Mutex mu_;
  std::vector<std::unique_ptr<Conn>> incoming_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;  // incoming_ + conns_
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // The relay's thread only.
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
  DeadlineQueue<uint64_t> handshakes_;  // conns_ still in their handshake: when each fails
};

}  // namespace drun

#endif  // DRUN_RENDEZVOUS_BASE_TLS_RELAY_H_
