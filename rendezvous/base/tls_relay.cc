#include "rendezvous/base/mutex.h"
#include "rendezvous/base/tls_relay.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <string.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace drun {

namespace {

// The most plaintext one TLS record carries: one read or write each way.
constexpr size_t kChunk = 16384;

// An encrypted key would make OpenSSL ask on the terminal: drun refuses it.
int NoPassPhrase(char*, int, int, void*) { return 0; }

std::string OpenSslReason() {
  const unsigned long e = ERR_peek_last_error();
  const char* r = e != 0 ? ERR_reason_error_string(e) : nullptr;
  return r != nullptr ? r : "no reason given";
}

absl::Status LoadFailed(const std::string& what, const std::string& path) {
  return absl::InvalidArgumentError(
      absl::StrCat("--rdzv-tls: cannot load the ", what, " '", path, "' (", OpenSslReason(), ")"));
}

// The settings both sides share (see the header's contract).
void Configure(SSL_CTX* ctx) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_default_passwd_cb(ctx, NoPassPhrase);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
}

TlsFailure Classify(int ssl_error) {
  const unsigned long e = ERR_peek_last_error();
  const int reason = ERR_GET_LIB(e) == ERR_LIB_SSL ? ERR_GET_REASON(e) : 0;
  if (ssl_error == SSL_ERROR_ZERO_RETURN || (ssl_error == SSL_ERROR_SYSCALL && e == 0) ||
      reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
    return TlsFailure::kPeerClosed;
  }
  if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED || reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
    return TlsFailure::kPeerCertRejected;
  }
  if (reason >= SSL_AD_REASON_OFFSET) return TlsFailure::kRefusedByPeer;
  if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_HTTP_REQUEST ||
      reason == SSL_R_PACKET_LENGTH_TOO_LONG || reason == SSL_R_UNKNOWN_PROTOCOL) {
    return TlsFailure::kNotTls;
  }
  return TlsFailure::kOther;
}

// Whether the alert the peer sent is about our certificate.
bool CertificateAlert() {
  const unsigned long e = ERR_peek_last_error();
  if (ERR_GET_LIB(e) != ERR_LIB_SSL || ERR_GET_REASON(e) < SSL_AD_REASON_OFFSET) return false;
  switch (ERR_GET_REASON(e) - SSL_AD_REASON_OFFSET) {
    case SSL_AD_BAD_CERTIFICATE:
    case SSL_AD_UNSUPPORTED_CERTIFICATE:
    case SSL_AD_CERTIFICATE_REVOKED:
    case SSL_AD_CERTIFICATE_EXPIRED:
    case SSL_AD_CERTIFICATE_UNKNOWN:
    case SSL_AD_UNKNOWN_CA:
    case SSL_AD_CERTIFICATE_REQUIRED:
      return true;
    default:
      return false;
  }
}

// One phrase; `peer` is "the server" or "the agent".
std::string Describe(TlsFailure f, SSL* ssl, const std::string& peer) {
  switch (f) {
    case TlsFailure::kPeerClosed:
      return absl::StrCat(peer, " closed the connection during the handshake");
    case TlsFailure::kNotTls:
      return absl::StrCat(peer, " does not speak TLS (", OpenSslReason(), ")");
    case TlsFailure::kPeerCertRejected: {
      const long v = SSL_get_verify_result(ssl);
      return absl::StrCat(peer, "'s certificate is not signed by the CA (",
                          v != X509_V_OK ? X509_verify_cert_error_string(v) : OpenSslReason().c_str(), ")");
    }
    case TlsFailure::kRefusedByPeer:
      return absl::StrCat(peer, CertificateAlert() ? " refused this node's certificate (" : " refused the handshake (",
                          OpenSslReason(), ")");
    case TlsFailure::kTimeout:
      return absl::StrCat("no handshake from ", peer, " in time");
    case TlsFailure::kOther:
      break;
  }
  return OpenSslReason();
}

// Waits for `fd` to be ready for `events` within 100 ms or the deadline.
void WaitSlice(int fd, short events, TimePoint deadline) {
  pollfd p{fd, events, 0};
  poll(&p, 1, PollTimeoutMs(deadline, Clock::now(), 100));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const TlsContext>> TlsContext::Load(Side side, const std::string& cert,
                                                                   const std::string& key,
                                                                   const std::string& ca) {
  SSL_CTX* raw = SSL_CTX_new(side == Side::kServer ? TLS_server_method() : TLS_client_method());
  if (raw == nullptr) return absl::InternalError("cannot make a TLS context (OpenSSL)");
  std::shared_ptr<const TlsContext> ctx(new TlsContext(raw, side));  // frees raw on every return
  Configure(raw);
  // Every host checks its own key file, not only the one drun was typed on.
  struct stat st;
  if (stat(key.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--rdzv-tls key '%s' may be read by others (mode %04o); run chmod 600 '%s'", key,
        st.st_mode & 07777, key));
  }
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(raw, cert.c_str()) != 1) return LoadFailed("certificate", cert);
  // OpenSSL checks the key against the certificate as it loads it.
  const bool loaded = SSL_CTX_use_PrivateKey_file(raw, key.c_str(), SSL_FILETYPE_PEM) == 1;
  const unsigned long e = ERR_peek_last_error();
  const bool mismatch = ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH;
  if (!loaded && !mismatch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv-tls: cannot load the private key '", key, "' (", OpenSslReason(),
        "); drun needs a PEM key without a pass phrase"));
  }
  if (mismatch || SSL_CTX_check_private_key(raw) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--rdzv-tls: the private key '", key,
                                                   "' does not belong to the certificate '", cert, "'"));
  }
  if (SSL_CTX_load_verify_locations(raw, ca.c_str(), nullptr) != 1) return LoadFailed("CA certificate", ca);
  if (side == Side::kServer) {
    // Tell clients which CA to present a certificate of.
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca.c_str());
    if (names != nullptr) SSL_CTX_set_client_CA_list(raw, names);
  }
  return ctx;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

absl::StatusOr<SslPtr> TlsConnect(const TlsContext& ctx, int fd, TimePoint deadline,
                                  const std::function<bool()>& stop, TlsFailure* failure) {
  SslPtr ssl(SSL_new(ctx.get()));
  if (!ssl || SSL_set_fd(ssl.get(), fd) != 1) return absl::InternalError("cannot start TLS (OpenSSL)");
  SSL_set_connect_state(ssl.get());
  auto fail = [&](TlsFailure f) {
    if (failure != nullptr) *failure = f;
    const std::string why = Describe(f, ssl.get(), "the server");
    return f == TlsFailure::kTimeout ? absl::DeadlineExceededError(why) : absl::UnavailableError(why);
  };
  bool handshaken = false;
  for (;;) {
    ERR_clear_error();
    char byte = 0;
    const int r = handshaken ? SSL_read(ssl.get(), &byte, 1) : SSL_do_handshake(ssl.get());
    if (r == 1 && !handshaken) {
      handshaken = true;  // now wait for the server's verdict on our certificate
      continue;
    }
    if (r == 1) return byte == kTlsAccepted ? absl::StatusOr<SslPtr>(std::move(ssl)) : fail(TlsFailure::kNotTls);
    const int e = SSL_get_error(ssl.get(), r);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return fail(Classify(e));
    if (stop && stop()) return absl::CancelledError("stopped during the TLS handshake");
    if (Clock::now() >= deadline) return fail(TlsFailure::kTimeout);
    WaitSlice(fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
  }
}

// One connection: its socket, its SSL, the plain end's other half, and what
// is on its way in each direction.
struct TlsRelay::Conn {
  uint64_t id = 0;
  UniqueFd tcp;
  UniqueFd plain;  // ours; the caller holds the other end
  SslPtr ssl;
  bool handshaking = false;
  std::string peer;
  std::string to_tls;    // read from the plain end, not yet taken by SSL_write
  std::string from_tls;  // from SSL_read, not yet written to the plain end
  bool plain_eof = false;   // the caller closed (or shut down) its end
  bool plain_dead = false;  // writing to the plain end failed: drop what comes
  bool tls_eof = false;     // the peer closed
  bool shut_sent = false;   // close_notify and FIN sent
  bool broken = false;      // a fatal error: close at once
  std::string why;          // with broken: the socket's error, or OpenSSL's reason
  std::function<void(const std::string&)> on_broken;
};

namespace {

using Conn = TlsRelay::Conn;
thread_local char scratch[kChunk];

// A fatal error on the socket or in TLS (the link timed out, the peer reset).
void Break(Conn& c, int ssl_error) {
  const int err = errno;
  c.broken = true;
  c.why = ssl_error == SSL_ERROR_SYSCALL && err != 0 ? strerror(err) : OpenSslReason();
}

// The caller's bytes into TLS; true when something moved.
bool PlainToTls(Conn& c) {
  bool moved = false;
  if (c.to_tls.empty() && !c.plain_eof) {
    const ssize_t n = read(c.plain.get(), scratch, sizeof scratch);
    if (n > 0) c.to_tls.assign(scratch, static_cast<size_t>(n));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) c.plain_eof = true;
    moved = n >= 0 || c.plain_eof;
  }
  if (!c.to_tls.empty()) {
    ERR_clear_error();
    const int n = SSL_write(c.ssl.get(), c.to_tls.data(), static_cast<int>(c.to_tls.size()));
    if (n > 0) {
      c.to_tls.erase(0, static_cast<size_t>(n));
      moved = true;
    } else {
      const int e = SSL_get_error(c.ssl.get(), n);
      if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) Break(c, e);
    }
  }
  if (c.plain_eof && c.to_tls.empty() && !c.shut_sent && !c.broken) {
    // Best effort: the peer's relay ends at its end-of-file either way.
    SSL_shutdown(c.ssl.get());
    shutdown(c.tcp.get(), SHUT_WR);
    c.shut_sent = true;
    moved = true;
  }
  return moved;
}

// The peer's bytes out of TLS to the caller; true when something moved.
bool TlsToPlain(Conn& c) {
  bool moved = false;
  if (c.from_tls.empty() && !c.tls_eof) {
    ERR_clear_error();
    const int n = SSL_read(c.ssl.get(), scratch, sizeof scratch);
    if (n > 0) {
      c.from_tls.assign(scratch, static_cast<size_t>(n));
      moved = true;
    } else {
      const int e = SSL_get_error(c.ssl.get(), n);
      if (e == SSL_ERROR_ZERO_RETURN) c.tls_eof = moved = true;
      else if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) Break(c, e);
    }
  }
  if (!c.from_tls.empty() && c.plain_dead) c.from_tls.clear();
  if (!c.from_tls.empty()) {
    const ssize_t n = send(c.plain.get(), c.from_tls.data(), c.from_tls.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.from_tls.erase(0, static_cast<size_t>(n));
      moved = true;
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
      c.plain_dead = moved = true;
    }
  }
  return moved;
}

// Moves bytes both ways until neither moves; false: the connection is over
// (a fatal error, or the peer closed and everything it sent is delivered).
bool Pump(Conn& c) {
  for (bool moved = true; moved && !c.broken;) {
    moved = PlainToTls(c);
    moved = TlsToPlain(c) || moved;
  }
  if (c.broken) return false;
  if (c.tls_eof && c.from_tls.empty()) return false;
  return !(c.plain_dead && c.shut_sent);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsRelay>> TlsRelay::Start(Options options) {
  std::unique_ptr<TlsRelay> relay(new TlsRelay);
  relay->options_ = std::move(options);
  relay->epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (!relay->epoll_fd_.valid() || !relay->wake_.valid() ||
      epoll_ctl(relay->epoll_fd_.get(), EPOLL_CTL_ADD, relay->wake_.fd(), &ev) != 0) {
    return absl::InternalError(absl::StrCat("cannot start the TLS relay: ", strerror(errno)));
  }
  TlsRelay* r = relay.get();
  relay->thread_ = std::thread([r] { r->Loop(); });
  return relay;
}

TlsRelay::~TlsRelay() {
  if (!thread_.joinable()) return;
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  wake_.Signal();
  thread_.join();
}

absl::StatusOr<UniqueFd> TlsRelay::Accept(UniqueFd tcp, const TlsContext& ctx, std::string peer) {
  SslPtr ssl(SSL_new(ctx.get()));
  if (!ssl || SSL_set_fd(ssl.get(), tcp.get()) != 1) return absl::InternalError("cannot start TLS (OpenSSL)");
  SSL_set_accept_state(ssl.get());
  return Add(std::move(tcp), std::move(ssl), /*handshake=*/true, std::move(peer));
}

absl::StatusOr<UniqueFd> TlsRelay::Adopt(UniqueFd tcp, SslPtr ssl,
                                         std::function<void(const std::string&)> on_broken) {
  return Add(std::move(tcp), std::move(ssl), /*handshake=*/false, "", std::move(on_broken));
}

absl::StatusOr<UniqueFd> TlsRelay::Add(UniqueFd tcp, SslPtr ssl, bool handshake, std::string peer,
                                       std::function<void(const std::string&)> on_broken) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot relay TLS: socketpair: ", strerror(errno)));
  }
  UniqueFd theirs(sv[1]);
  auto c = std::make_unique<Conn>();
  c->tcp = std::move(tcp);
  c->plain.reset(sv[0]);
  c->ssl = std::move(ssl);
  c->handshaking = handshake;
  c->peer = std::move(peer);
  c->on_broken = std::move(on_broken);
  {
    MutexLock l(&mu_);
    c->id = next_id_++;
    incoming_.push_back(std::move(c));
    ++count_;
  }
  wake_.Signal();
  return theirs;
}

size_t TlsRelay::connections() const {
  MutexLock l(&mu_);
  return count_;
}

void TlsRelay::Loop() {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  for (;;) {
    const int n = epoll_wait(epoll_fd_.get(), events, kMaxEvents, handshakes_.PollTimeoutMs(Clock::now()));
    if (n < 0 && errno != EINTR) return;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 != 0) {
        Service(events[i].data.u64);
        continue;
      }
      wake_.Clear();
      {
        MutexLock l(&mu_);
        if (stop_) return;
      }
      TakeIncoming();
    }
    ExpireHandshakes(Clock::now());
  }
}

// New connections join the epoll set; each is pumped once at once (a client's
// SSL may already hold bytes that no readiness edge will announce).
void TlsRelay::TakeIncoming() {
  std::vector<std::unique_ptr<Conn>> fresh;
  {
    MutexLock l(&mu_);
    fresh.swap(incoming_);
  }
  const TimePoint deadline = Clock::now() + options_.handshake_timeout;
  for (std::unique_ptr<Conn>& c : fresh) {
    const uint64_t id = c->id;
    // Edge-triggered: Pump always runs until every direction would block.
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.u64 = id;
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, c->tcp.get(), &ev);
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, c->plain.get(), &ev);
    if (c->handshaking) handshakes_.Add(id, deadline);
    conns_.emplace(id, std::move(c));
    Service(id);
  }
}

void TlsRelay::Service(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if (c.handshaking) {
    ERR_clear_error();
    const int r = SSL_do_handshake(c.ssl.get());
    if (r != 1) {
      const int e = SSL_get_error(c.ssl.get(), r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return;
      const TlsFailure f = Classify(e);
      if (options_.on_refused) options_.on_refused(c.peer, f, Describe(f, c.ssl.get(), "the agent"));
      Drop(it);
      return;
    }
    c.handshaking = false;
    handshakes_.Cancel(id);
    c.to_tls.assign(1, kTlsAccepted);  // before anything of the caller's
  }
  if (!Pump(c)) {
    if (c.broken && c.on_broken) c.on_broken(c.why);
    Drop(it);
  }
}

void TlsRelay::ExpireHandshakes(TimePoint now) {
  for (uint64_t id : handshakes_.TakeDue(now)) {
    auto it = conns_.find(id);
    if (it == conns_.end() || !it->second->handshaking) continue;
    if (options_.on_refused) {
      options_.on_refused(it->second->peer, TlsFailure::kTimeout,
                          Describe(TlsFailure::kTimeout, it->second->ssl.get(), "the agent"));
    }
    Drop(it);
  }
}

void TlsRelay::Drop(std::map<uint64_t, std::unique_ptr<Conn>>::iterator it) {
  handshakes_.Cancel(it->first);
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, it->second->tcp.get(), nullptr);
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, it->second->plain.get(), nullptr);
  conns_.erase(it);  // closes both descriptors, frees the SSL
  MutexLock l(&mu_);
  --count_;
}

}  // namespace drun
