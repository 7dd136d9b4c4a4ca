#include "rendezvous/store/c10d_store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "rendezvous/store/c10d_store_state.h"
#include "rendezvous/base/mutex.h"

namespace drun {
namespace {

using c10d_store::ConnId;

// epoll user data for the two non-client descriptors; client connections use their ConnId,
// which starts above these.
constexpr uint64_t kListenTag = 1;
constexpr uint64_t kWakeTag = 2;
constexpr ConnId kFirstConnId = 16;

constexpr size_t kReadChunk = 64 * 1024;
// Reads per readiness event before yielding to other connections (level-triggered epoll
// brings the connection back on the next round).
constexpr int kReadsPerEvent = 4;

std::string ErrnoText(int err) { return std::strerror(err); }

// Creates a listening socket on one address. Returns the fd or an error.
absl::StatusOr<UniqueFd> ListenOn(const sockaddr* addr, socklen_t len, bool dual_stack) {
  UniqueFd owned(socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!owned) return absl::UnavailableError(absl::StrCat("socket: ", ErrnoText(errno)));
  const int fd = owned.get();
  int one = 1;
  // A fresh store per rendezvous round may reuse the port of the previous round.
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (addr->sa_family == AF_INET6) {
    int v6only = dual_stack ? 0 : 1;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
  }
  if (bind(fd, addr, len) != 0) {
    const int err = errno;
    return absl::Status(err == EADDRINUSE ? absl::StatusCode::kAlreadyExists
                                          : absl::StatusCode::kUnavailable,
                        ErrnoText(err));
  }
  // The kernel caps the backlog at net.core.somaxconn; ask for plenty so a burst of
  // thousands of workers connecting at once is not refused.
  if (listen(fd, 16384) != 0) {
    return absl::UnavailableError(absl::StrCat("listen: ", ErrnoText(errno)));
  }
  return owned;
}

std::string AddrText(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host.empty() ? "*" : host, ":", port);
}

absl::StatusOr<UniqueFd> BindListener(const std::string& bind_addr, int port) {
  if (port < 0 || port > 65535)
    return absl::InvalidArgumentError(absl::StrCat("c10d store: invalid port ", port));
  if (bind_addr.empty()) {
    // Dual-stack like torch 1.13's server, so clients may reach us over IPv4 or IPv6.
    sockaddr_in6 a6{};
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_any;
    a6.sin6_port = htons(static_cast<uint16_t>(port));
    auto fd = ListenOn(reinterpret_cast<sockaddr*>(&a6), sizeof(a6), /*dual_stack=*/true);
    if (fd.ok()) return fd;
    sockaddr_in a4{};
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_ANY);
    a4.sin_port = htons(static_cast<uint16_t>(port));
    auto fd4 = ListenOn(reinterpret_cast<sockaddr*>(&a4), sizeof(a4), false);
    if (fd4.ok()) return fd4;
    return absl::Status(fd4.status().code(),
                        absl::StrCat("c10d store: cannot listen on ", AddrText("", port), ": ",
                                     fd4.status().message()));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(bind_addr.c_str(), service.c_str(), &hints, &res);
  if (rc != 0)
    return absl::InvalidArgumentError(absl::StrCat("c10d store: cannot resolve bind address '",
                                                   bind_addr, "': ", gai_strerror(rc)));
  absl::Status last = absl::UnavailableError("no address");
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    auto fd = ListenOn(ai->ai_addr, ai->ai_addrlen, /*dual_stack=*/false);
    if (fd.ok()) {
      freeaddrinfo(res);
      return fd;
    }
    last = fd.status();
  }
  freeaddrinfo(res);
  return absl::Status(last.code(), absl::StrCat("c10d store: cannot listen on ",
                                                AddrText(bind_addr, port), ": ",
                                                last.message()));
}

// The memory this process can have: the machine's physical memory, or less when its cgroup
// (a container's, seen at the cgroup namespace's root) sets a limit. 0 when unknown.
uint64_t UsableMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  uint64_t bytes = pages > 0 && page_size > 0
                       ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
                       : 0;
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream file(path);
    uint64_t limit = 0;  // cgroup v2 writes "max" when there is none: no number, ignored
    if (file >> limit && limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;
  }
  return bytes;
}

}  // namespace

c10d_store::ParserLimits StoreLimitsForThisMachine() {
  return c10d_store::LimitsForMemory(UsableMemoryBytes());  // 0: LimitsForMemory's floor
}

// Everything the loop thread owns. Only the loop thread touches it after Start returns.
class C10dStoreServer::Loop : public c10d_store::ReplySink {
 public:
  // `listen_fd` may be invalid (a store fed only by Adopt). The listener, epoll and every
  // connection close themselves (UniqueFd); `wake` is the server's.
  Loop(C10dStoreServer* owner, Options options, UniqueFd listen_fd, UniqueFd epoll_fd, const WakeFd* wake)
      : owner_(owner),
        options_(std::move(options)),
        listen_fd_(std::move(listen_fd)),
        epoll_fd_(std::move(epoll_fd)),
        wake_(wake),
        read_buf_(new char[kReadChunk]) {
    // Held in reserve so that, out of descriptors, we can still accept and drop a client
    // instead of spinning on a listening socket that stays readable.
    spare_fd_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
  }

  void Run() {
    constexpr int kMaxEvents = 256;
    epoll_event events[kMaxEvents];
    while (!stopping_) {
      int n = epoll_wait(epoll_fd_.get(), events, kMaxEvents, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        Log(absl::StrCat("epoll_wait: ", ErrnoText(errno)));
        break;
      }
      for (int i = 0; i < n; ++i) {
        const uint64_t tag = events[i].data.u64;
        if (tag == kListenTag) {
          AcceptAll();
        } else if (tag == kWakeTag) {
          OnWake();
        } else {
          HandleConn(tag, events[i].events);
        }
      }
      FlushDirty();
    }
  }

  // ReplySink: queue bytes for a connection; they are written at the end of the round.
  void Send(ConnId id, absl::string_view bytes) override {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = *it->second;
    if (c.out_off == c.out.size()) {
      c.out.clear();
      c.out_off = 0;
    }
    c.out.append(bytes.data(), bytes.size());
    if (!c.dirty) {
      c.dirty = true;
      dirty_.push_back(id);
    }
  }

 private:
  struct Conn {
    UniqueFd fd;
    ConnId id = 0;
    c10d_store::C10dStoreParser parser;
    std::string out;
    size_t out_off = 0;
    bool dirty = false;           // in dirty_, to be flushed this round
    bool writable_armed = false;  // EPOLLOUT requested
    bool read_paused = false;     // EPOLLIN dropped because output backed up
    explicit Conn(const c10d_store::ParserLimits& limits) : parser(limits) {}
    size_t pending() const { return out.size() - out_off; }
  };

  void Log(absl::string_view line) {
    if (options_.log) options_.log(line);
  }

  // The wake eventfd: descriptors handed in by Adopt(), or Stop().
  void OnWake() {
    wake_->Clear();
    std::vector<UniqueFd> fds;
    bool stop;
    {
      MutexLock lock(&owner_->adopt_mu_);
      fds.swap(owner_->adopted_);
      stop = owner_->stopped_;
    }
    for (UniqueFd& fd : fds) {
      // The acceptor may have made it blocking or not; the loop needs non-blocking.
      const int flags = fcntl(fd.get(), F_GETFL);
      if (flags < 0 || fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) != 0) continue;  // closes it
      AddConn(std::move(fd));
    }
    if (stop) stopping_ = true;
  }

  void AcceptAll() {
    for (;;) {
      UniqueFd fd(accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if ((errno == EMFILE || errno == ENFILE) && spare_fd_.valid()) {
          Log("c10d store: out of file descriptors; dropping a new connection (raise "
              "ulimit -n)");
          spare_fd_.reset();
          UniqueFd victim(accept(listen_fd_.get(), nullptr, nullptr));  // closed at once
          spare_fd_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
          continue;
        }
        return;  // EAGAIN, or an error we can only wait out
      }
      if (options_.admit && !options_.admit(fd.get())) continue;  // closes itself
      AddConn(std::move(fd));
    }
  }

  // Serves a connected, non-blocking socket (owned from here on). Level-triggered EPOLLIN
  // reports bytes that arrived before it was added, so an adopted connection loses nothing.
  void AddConn(UniqueFd owned) {
    const int fd = owned.get();
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto conn = std::make_unique<Conn>(options_.limits);
    conn->fd = std::move(owned);
    conn->id = next_id_++;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = conn->id;
    if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return;  // conn closes it
    conns_.emplace(conn->id, std::move(conn));
    owner_->connections_.fetch_add(1, std::memory_order_relaxed);
  }

  void HandleConn(ConnId id, uint32_t events) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;  // closed earlier in this round
    Conn& c = *it->second;
    if (events & EPOLLOUT) {
      if (!Flush(c)) return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) Read(c);
  }

  // Reads what is available, parses and applies it. May close the connection.
  void Read(Conn& c) {
    const ConnId id = c.id;
    for (int round = 0; round < kReadsPerEvent; ++round) {
      ssize_t n = recv(c.fd.get(), read_buf_.get(), kReadChunk, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        CloseConn(id, /*flush_first=*/false);
        return;
      }
      if (n == 0) {
        // The client finished sending; whatever we owe it can still be delivered.
        CloseConn(id, /*flush_first=*/true);
        return;
      }
      requests_.clear();
      absl::Status parsed =
          c.parser.Feed(absl::string_view(read_buf_.get(), static_cast<size_t>(n)),
                        &requests_);
      // Serve what was complete before any bad bytes, in order, then drop the client.
      for (c10d_store::Request& req : requests_) {
        absl::Status applied = state_.Apply(id, c.parser.dialect(), std::move(req), *this);
        if (!applied.ok()) {
          ProtocolError(id, applied);
          return;
        }
      }
      if (!parsed.ok()) {
        ProtocolError(id, parsed);
        return;
      }
      if (c.pending() > options_.max_pending_output) {
        c.read_paused = true;
        UpdateInterest(c);
        return;
      }
      if (static_cast<size_t>(n) < kReadChunk) return;  // drained the socket
    }
  }

  void ProtocolError(ConnId id, const absl::Status& status) {
    owner_->protocol_errors_.fetch_add(1, std::memory_order_relaxed);
    Log(absl::StrCat("c10d store: closing connection ", id, ": ", status.message()));
    CloseConn(id, /*flush_first=*/true);
  }

  // Writes as much pending output as the socket takes. Returns false if the connection
  // was closed.
  bool Flush(Conn& c) {
    while (c.pending() > 0) {
      ssize_t n = send(c.fd.get(), c.out.data() + c.out_off, c.pending(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        CloseConn(c.id, /*flush_first=*/false);
        return false;
      }
      c.out_off += static_cast<size_t>(n);
    }
    if (c.pending() == 0) {
      c.out.clear();
      c.out_off = 0;
      // Big replies leave big buffers behind; idle connections should stay small.
      if (c.out.capacity() > kReadChunk) c.out.shrink_to_fit();
    }
    const bool paused = c.read_paused && c.pending() > options_.max_pending_output / 2;
    if (paused != c.read_paused || (c.pending() > 0) != c.writable_armed) {
      c.read_paused = paused;
      UpdateInterest(c);
    }
    return true;
  }

  void UpdateInterest(Conn& c) {
    epoll_event ev{};
    ev.events = (c.read_paused ? 0u : static_cast<uint32_t>(EPOLLIN | EPOLLRDHUP)) |
                (c.pending() > 0 ? static_cast<uint32_t>(EPOLLOUT) : 0u);
    ev.data.u64 = c.id;
    c.writable_armed = c.pending() > 0;
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
  }

  void FlushDirty() {
    // Flush may close connections, which never adds to dirty_, so iterate by index.
    for (size_t i = 0; i < dirty_.size(); ++i) {
      auto it = conns_.find(dirty_[i]);
      if (it == conns_.end()) continue;
      it->second->dirty = false;
      Flush(*it->second);
    }
    dirty_.clear();
  }

  void CloseConn(ConnId id, bool flush_first) {
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = *it->second;
    if (flush_first && c.pending() > 0) {
      // Best effort, non-blocking: the replies to requests served before the error.
      (void)send(c.fd.get(), c.out.data() + c.out_off, c.pending(), MSG_NOSIGNAL);
    }
    conns_.erase(it);  // closes the connection
    state_.Disconnect(id);
    owner_->connections_.fetch_sub(1, std::memory_order_relaxed);
  }

  C10dStoreServer* owner_;
  Options options_;
  UniqueFd listen_fd_;
  UniqueFd epoll_fd_;
  const WakeFd* wake_;  // C10dStoreServer's
  UniqueFd spare_fd_;
  bool stopping_ = false;
  ConnId next_id_ = kFirstConnId;
  std::unique_ptr<char[]> read_buf_;
  std::vector<c10d_store::Request> requests_;
  std::vector<ConnId> dirty_;
  absl::flat_hash_map<ConnId, std::unique_ptr<Conn>> conns_;
  c10d_store::C10dStoreState state_;
};

absl::StatusOr<std::unique_ptr<C10dStoreServer>> C10dStoreServer::Start(
    const std::string& bind_addr, int port) {
  return Start(bind_addr, port, Options());
}

absl::StatusOr<std::unique_ptr<C10dStoreServer>> C10dStoreServer::Start(
    const std::string& bind_addr, int port, Options options) {
  absl::StatusOr<UniqueFd> listen_fd = BindListener(bind_addr, port);
  if (!listen_fd.ok()) return listen_fd.status();

  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  int bound_port = port;
  if (getsockname(listen_fd->get(), reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    if (ss.ss_family == AF_INET)
      bound_port = ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    else if (ss.ss_family == AF_INET6)
      bound_port = ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  }
  return Launch(*std::move(listen_fd), bound_port, std::move(options));
}

absl::StatusOr<std::unique_ptr<C10dStoreServer>> C10dStoreServer::StartWithoutListener() {
  return StartWithoutListener(Options());
}

absl::StatusOr<std::unique_ptr<C10dStoreServer>> C10dStoreServer::StartWithoutListener(
    Options options) {
  return Launch(UniqueFd(), 0, std::move(options));
}

absl::StatusOr<std::unique_ptr<C10dStoreServer>> C10dStoreServer::Launch(UniqueFd listener,
                                                                          int port,
                                                                          Options options) {
  std::unique_ptr<C10dStoreServer> server(new C10dStoreServer());
  UniqueFd epoll_fd(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_fd.valid() || !server->wake_.valid()) {
    int err = errno;
    return absl::InternalError(absl::StrCat("c10d store: epoll/eventfd: ", ErrnoText(err)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (listener.valid()) {
    ev.data.u64 = kListenTag;
    epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, listener.get(), &ev);
  }
  ev.data.u64 = kWakeTag;
  epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, server->wake_.fd(), &ev);

  server->port_ = port;
  server->loop_ = std::make_unique<Loop>(server.get(), std::move(options), std::move(listener),
                                         std::move(epoll_fd), &server->wake_);
  Loop* loop = server->loop_.get();
  server->thread_ = std::thread([loop] {
    pthread_setname_np(pthread_self(), "drun-c10dstore");  // visible in top -H / gdb
    loop->Run();
  });
  return server;
}

absl::Status C10dStoreServer::Adopt(UniqueFd fd) {
  {
    MutexLock lock(&adopt_mu_);
    if (!stopped_) {
      adopted_.push_back(std::move(fd));
      wake_.Signal();
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError("c10d store: stopped");  // fd closes itself
}

void C10dStoreServer::Stop() {
  MutexLock lock(&stop_mu_);
  {
    // From here Adopt() refuses; the loop takes what is queued with the stop.
    MutexLock adopt_lock(&adopt_mu_);
    stopped_ = true;
  }
  if (!thread_.joinable()) return;
  wake_.Signal();
  thread_.join();
  loop_.reset();  // closes the listener and every connection
  {
    // Only if the loop ended on an error before taking them.
    MutexLock adopt_lock(&adopt_mu_);
    adopted_.clear();  // each closes itself
  }
  connections_.store(0, std::memory_order_relaxed);
}

C10dStoreServer::~C10dStoreServer() { Stop(); }

}  // namespace drun
