#include "launcher/ssh/ssh_session.h"

#include <arpa/inet.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "agent/agent_launch.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "rendezvous/base/clock.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/unique_fd.h"

namespace drun {

namespace {

std::string SockAddrText(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    return buf;
  }
  if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], buf, sizeof buf);
    } else {
      inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    }
    return buf;
  }
  return "";
}

std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string GetOption(ssh_session s, ssh_options_e opt) {
  char* value = nullptr;
  if (ssh_options_get(s, opt, &value) != SSH_OK || value == nullptr) return "";
  std::string out = value;
  ssh_string_free_char(value);
  return out;
}


// The user's known-hosts file libssh reads (UserKnownHostsFile, else
// ~/.ssh/known_hosts), with the home directory written as ~.
std::string KnownHostsFile(ssh_session s) {
  std::string path = GetOption(s, SSH_OPTIONS_KNOWNHOSTS);
  if (path.empty()) return "~/.ssh/known_hosts";
  const char* home = getenv("HOME");
  const passwd* pw = getpwuid(getuid());
  const char* dirs[] = {pw ? pw->pw_dir : nullptr, home};
  for (const char* h : dirs) {
    if (h != nullptr && *h != '\0' && absl::StartsWith(path, absl::StrCat(h, "/"))) {
      return absl::StrCat("~", path.substr(strlen(h)));
    }
  }
  return path;
}

// The key's type and SHA256 fingerprint, as ssh prints them.
std::string Fingerprint(ssh_session s) {
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(s, &key) != SSH_OK) return "unknown key";
  unsigned char* hash = nullptr;
  size_t len = 0;
  std::string out = ssh_key_type_to_char(ssh_key_type(key));
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &len) == 0) {
    char* fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, len);
    if (fp) {
      absl::StrAppend(&out, " ", fp);
      ssh_string_free_char(fp);
    }
    ssh_clean_pubkey_hash(&hash);
  }
  ssh_key_free(key);
  return out;
}

std::string LastErrorOf(ssh_session s) { return OneLine(ssh_get_error(s)); }

// The server's key against the known-hosts file libssh reads (~/.ssh/config's
// UserKnownHostsFile, else ~/.ssh/known_hosts), as OpenSSH checks it; a
// message names that file and the command that helps.
absl::Status CheckHostKey(ssh_session s, const SshTarget& target) {
  const std::string real_host = GetOption(s, SSH_OPTIONS_HOST);
  unsigned int port = 22;
  ssh_options_get_port(s, &port);
  const std::string keyscan =
      port == 22 ? absl::StrCat("ssh-keyscan ", real_host)
                 : absl::StrCat("ssh-keyscan -p ", port, " ", real_host);
  // The file libssh reads, as ~/.ssh/config's UserKnownHostsFile names it.
  const std::string known_hosts = KnownHostsFile(s);
  switch (ssh_session_is_known_server(s)) {
    case SSH_KNOWN_HOSTS_OK:
      return absl::OkStatus();
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
      return absl::PermissionDeniedError(absl::StrCat(
          "the host key changed (it now sends ", Fingerprint(s),
          ", which does not match ", known_hosts, "): this may be an attack; if the host was "
          "reinstalled, remove the old key with `ssh-keygen -R ",
          port == 22 ? real_host : absl::StrCat("'[", real_host, "]:", port, "'"),
          known_hosts == "~/.ssh/known_hosts" ? "" : absl::StrCat(" -f ", known_hosts),
          "` and connect again"));
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      if (target.accept_new) {
        // Connections made in parallel (one thread per host) update it one at a time.
        static Mutex known_hosts_mu;
        MutexLock lock(&known_hosts_mu);
        if (ssh_session_update_known_hosts(s) != SSH_OK) {
          return absl::PermissionDeniedError(absl::StrCat(
              "cannot add the host key to ", known_hosts, ": ", LastErrorOf(s)));
        }
        return absl::OkStatus();
      }
      return absl::PermissionDeniedError(absl::StrCat(
          "the host key is not known (", Fingerprint(s),
          "); check it and add it with `", keyscan, " >> ", known_hosts,
          "` (or connect once with ssh), or pass --ssh-accept-new"));
    case SSH_KNOWN_HOSTS_ERROR:
    default:
      return absl::PermissionDeniedError(
          absl::StrCat("cannot check the host key against ", known_hosts, ": ", LastErrorOf(s)));
  }
}

}  // namespace

SshConnection::~SshConnection() {
  if (session_) {
    if (ssh_is_connected(session_)) ssh_disconnect(session_);
    ssh_free(session_);
  }
}

std::string SshConnection::LastError() const { return LastErrorOf(session_); }

bool SshConnection::connected() const {
  if (!session_ || !ssh_is_connected(session_)) return false;
  return (ssh_get_status(session_) & (SSH_CLOSED | SSH_CLOSED_ERROR)) == 0;
}

absl::StatusOr<std::unique_ptr<SshConnection>> SshConnection::Connect(const SshTarget& target) {
  auto conn = std::unique_ptr<SshConnection>(new SshConnection);
  conn->target_ = target;
  ssh_session s = ssh_new();
  if (s == nullptr) return absl::ResourceExhaustedError("cannot create an ssh session");
  conn->session_ = s;
  ssh_options_set(s, SSH_OPTIONS_HOST, target.host.c_str());
  long timeout = target.connect_timeout_s;
  ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &timeout);
  // ~/.ssh/config (and /etc/ssh/ssh_config), as ssh reads them: the first
  // value obtained wins, so an explicit user@host below still overrides User.
  if (ssh_options_parse_config(s, nullptr) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the ssh configuration (~/.ssh/config): ", conn->LastError()));
  }
  if (!target.user.empty()) ssh_options_set(s, SSH_OPTIONS_USER, target.user.c_str());

  if (ssh_connect(s) != SSH_OK) {
    return absl::UnavailableError(absl::StrCat("cannot connect: ", conn->LastError(),
                                               "; check that the host is up and runs sshd "
                                               "(try: ssh ",
                                               target.host, " true)"));
  }
  if (absl::Status st = CheckHostKey(s, target); !st.ok()) return st;

  int rc = ssh_userauth_none(s, nullptr);
  if (rc != SSH_AUTH_SUCCESS) rc = ssh_userauth_publickey_auto(s, nullptr, nullptr);
  if (rc != SSH_AUTH_SUCCESS) {
    const std::string user = GetOption(s, SSH_OPTIONS_USER);
    if (rc == SSH_AUTH_ERROR) {
      return absl::UnauthenticatedError(
          absl::StrCat("login failed for user ", user, ": ", conn->LastError()));
    }
    return absl::UnauthenticatedError(absl::StrCat(
        "login refused for user ", user,
        ": neither the ssh agent nor the keys in ~/.ssh (or IdentityFile) were accepted; add "
        "your public key to ~/.ssh/authorized_keys there (ssh-copy-id ",
        user.empty() ? "" : absl::StrCat(user, "@"), target.host,
        ") or load the key into ssh-agent (password logins are not supported)"));
  }

  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  const int fd = ssh_get_fd(s);
  if (fd >= 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    conn->local_address_ = SockAddrText(ss);
  }
  len = sizeof ss;
  if (fd >= 0 && getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    conn->peer_address_ = SockAddrText(ss);
  }
  return conn;
}

absl::StatusOr<CommandResult> SshConnection::Run(const std::string& command, int timeout_ms) {
  auto p = StartSshExec(this, command, "");
  if (!p.ok()) return p.status();
  return RunRemote(p->get(), timeout_ms);
}

absl::StatusOr<CommandResult> RunRemote(RemoteProcess* p, int timeout_ms) {
  CommandResult r;
  p->Stop();  // no input: the command sees EOF on its stdin
  auto outcome = p->Run(
      [&](int stream, const char* data, size_t n) {
        std::string& dst = stream == 1 ? r.out : r.err;
        if (dst.size() < (64u << 10)) dst.append(data, std::min(n, (64u << 10) - dst.size()));
      },
      timeout_ms);
  if (!outcome.error.empty()) return absl::UnavailableError(outcome.error);
  r.exit_status = outcome.exit_status;
  return r;
}

void RemoteRequests::Send(absl::string_view notices) {
  MutexLock lock(&mu_);
  notices_.append(notices.data(), notices.size());
  wake_.Signal();
}

void RemoteRequests::Request(Ending e) {
  MutexLock lock(&mu_);
  if (e <= ending_) return;
  ending_ = e;
  wake_.Signal();
}

std::string RemoteRequests::TakeNotices() {
  MutexLock lock(&mu_);
  return std::exchange(notices_, {});
}

Ending RemoteRequests::ending() const {
  MutexLock lock(&mu_);
  return ending_;
}

namespace {

class SshExec : public RemoteProcess {
 public:
  ~SshExec() override {
    if (channel_) {
      ssh_remove_channel_callbacks(channel_, &callbacks_);
      if (conn_->connected() && !ssh_channel_is_closed(channel_)) ssh_channel_close(channel_);
      ssh_channel_free(channel_);
    }
  }

  absl::Status Start(SshConnection* conn, const std::string& command, const std::string& stdin_data) {
    conn_ = conn;
    if (!requests_.valid()) return absl::InternalError("eventfd failed");
    ssh_session s = conn->session();
    channel_ = ssh_channel_new(s);
    if (channel_ == nullptr) return absl::UnavailableError(conn->LastError());
    callbacks_ = {};
    callbacks_.userdata = this;
    callbacks_.channel_exit_status_function = &SshExec::OnExitStatus;
    callbacks_.channel_exit_signal_function = &SshExec::OnExitSignal;
    ssh_callbacks_init(&callbacks_);
    ssh_set_channel_callbacks(channel_, &callbacks_);
    if (ssh_channel_open_session(channel_) != SSH_OK) {
      return absl::UnavailableError(absl::StrCat("cannot open an ssh channel: ", conn->LastError()));
    }
    if (ssh_channel_request_exec(channel_, command.c_str()) != SSH_OK) {
      return absl::UnavailableError(
          absl::StrCat("cannot run a command over ssh: ", conn->LastError()));
    }
    size_t off = 0;
    while (off < stdin_data.size()) {
      int n = ssh_channel_write(channel_, stdin_data.data() + off,
                                static_cast<uint32_t>(stdin_data.size() - off));
      if (n < 0) {
        return absl::UnavailableError(
            absl::StrCat("cannot write to the ssh channel: ", conn->LastError()));
      }
      off += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  Outcome Run(const DataFn& on_data, int timeout_ms) override {
    ssh_session s = conn_->session();
    ssh_event ev = ssh_event_new();
    ssh_event_add_session(ev, s);
    ssh_event_add_fd(ev, requests_.fd(), POLLIN, &SshExec::OnWake, this);
    const TimePoint deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    char buf[16384];
    bool eof[2] = {false, false};
    bool eof_sent = false;
    for (;;) {
      // Drain both streams until neither has anything: reading one may
      // process packets that fill the other.
      for (bool got = true; got;) {
        got = false;
        for (int i = 0; i < 2; ++i) {
          if (eof[i]) continue;
          int n = ssh_channel_read_nonblocking(channel_, buf, sizeof buf, i);
          if (n > 0) {
            on_data(i + 1, buf, static_cast<size_t>(n));
            got = true;
          } else if (n == SSH_EOF) {
            eof[i] = true;
          } else if (n == SSH_ERROR) {
            outcome_.error = Lost();
            break;
          }
        }
        if (!outcome_.error.empty()) break;
      }
      if (!outcome_.error.empty()) break;
      if (ssh_channel_is_closed(channel_)) break;
      if (!eof_sent) WritePending();
      if (!conn_->connected()) {
        outcome_.error = Lost();
        break;
      }
      const Ending ending = requests_.ending();
      if (ending == Ending::kAbort) {
        outcome_.error = "aborted";
        break;
      }
      if (ending == Ending::kStop && !eof_sent) {
        eof_sent = true;
        ssh_channel_send_eof(channel_);
      }
      int wait = -1;
      if (timeout_ms >= 0) {
        const TimePoint now = Clock::now();
        if (now >= deadline) {
          outcome_.error = absl::StrCat("no answer within ", timeout_ms / 1000.0, " s");
          break;
        }
        wait = PollTimeoutMs(deadline, now);
      }
      if (ssh_event_dopoll(ev, wait) == SSH_ERROR && !conn_->connected()) {
        outcome_.error = Lost();
        break;
      }
    }
    ssh_event_remove_fd(ev, requests_.fd());
    ssh_event_remove_session(ev, s);
    ssh_event_free(ev);
    return outcome_;
  }

  void Send(absl::string_view notices) override { requests_.Send(notices); }
  void Stop() override { requests_.Request(Ending::kStop); }
  void Abort() override { requests_.Request(Ending::kAbort); }

 private:
  // Writes what Send() asked for; on Run's thread, the only one using the
  // session. A failed write is the connection's loss, which Run sees next.
  void WritePending() {
    const std::string data = requests_.TakeNotices();
    size_t off = 0;
    while (off < data.size()) {
      const int n = ssh_channel_write(channel_, data.data() + off,
                                      static_cast<uint32_t>(data.size() - off));
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }
  std::string Lost() {
    std::string e = conn_->LastError();
    return absl::StrCat("the ssh connection was lost", e.empty() ? "" : ": ", e);
  }
  // libssh's poll found requests_.fd() readable: the loop looks at them next.
  static int OnWake(socket_t, int, void* self) {
    static_cast<SshExec*>(self)->requests_.Woken();
    return 0;
  }
  static void OnExitStatus(ssh_session, ssh_channel, int status, void* self) {
    static_cast<SshExec*>(self)->outcome_.exit_status = status;
  }
  static void OnExitSignal(ssh_session, ssh_channel, const char* signal, int, const char*,
                           const char*, void* self) {
    static_cast<SshExec*>(self)->outcome_.exit_signal = signal ? signal : "?";
  }

  SshConnection* conn_ = nullptr;
  ssh_channel channel_ = nullptr;
  ssh_channel_callbacks_struct callbacks_{};
  RemoteRequests requests_;  // notices for the channel, Stop and Abort
  Outcome outcome_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteProcess>> StartSshExec(SshConnection* conn,
                                                            const std::string& command,
                                                            const std::string& stdin_data) {
  auto p = std::make_unique<SshExec>();
  if (absl::Status st = p->Start(conn, command, stdin_data); !st.ok()) return st;
  return std::unique_ptr<RemoteProcess>(std::move(p));
}

}  // namespace drun
