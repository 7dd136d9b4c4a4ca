// drun_store_bench_load: load generator for bench/store_bench.py.
//
// Speaks the torch 1.13 store protocol (so it can load both drun's server and torch 1.13's
// own TCPStore server) from one epoll thread, issuing exactly the bytes a 1.13 client
// sends. Loopback only. Prints `key=value` lines for the driver script.
//
//   drun_store_bench_load ops     --port P [--clients 64] [--seconds 3] [--value-bytes 32]
//   drun_store_bench_load barrier --port P [--clients 1024] [--rounds 5]
//   drun_store_bench_load idle    --port P [--clients 10000]
//
// With --pid SERVER_PID every mode also reports the server's CPU time over the measured
// part (from /proc/PID/stat), and idle its RSS growth.
//
// ops:     closed loop per client: set (SET, no reply), get (WAIT + GET, as the client's
//          get() does), add (ADD); reports API ops/s.
// barrier: every client ADDs 1 to a counter; the one that reads N sets a key; every client
//          WAITs on that key. Reports ms from the first ADD to the last STOP_WAITING, and
//          with --pid the server's RSS before connecting and after the rounds.
// idle:    opens N connections, proves each is served (GETNUMKEYS), holds them all, proves
//          them again; reports errors and the server's RSS growth (from /proc/PID/status).
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace {

using Clock = std::chrono::steady_clock;

// torch 1.13 opcodes (spec column A).
constexpr uint8_t kSet = 0, kGet = 2, kAdd = 3, kWait = 5, kGetNumKeys = 6;

void PutU64(std::string* s, uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  s->append(b, 8);
}
void PutStr(std::string* s, const std::string& v) {
  PutU64(s, v.size());
  s->append(v);
}
std::string Set(const std::string& k, const std::string& v) {
  std::string s(1, static_cast<char>(kSet));
  PutStr(&s, k);
  PutStr(&s, v);
  return s;
}
std::string Wait1(const std::string& k) {
  std::string s(1, static_cast<char>(kWait));
  PutU64(&s, 1);
  PutStr(&s, k);
  return s;
}
std::string Get(const std::string& k) {
  std::string s(1, static_cast<char>(kGet));
  PutStr(&s, k);
  return s;
}
std::string Add(const std::string& k, int64_t d) {
  std::string s(1, static_cast<char>(kAdd));
  PutStr(&s, k);
  PutU64(&s, static_cast<uint64_t>(d));
  return s;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "drun_store_bench_load: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

int ConnectBlocking(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Die("socket");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;  // tiny requests: rare
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

bool RecvAllBlocking(int fd, size_t n, std::string* out) {
  out->assign(n, '\0');
  size_t off = 0;
  while (off < n) {
    ssize_t r = recv(fd, &(*out)[off], n - off, 0);
    if (r <= 0) return false;
    off += static_cast<size_t>(r);
  }
  return true;
}

long RssKiB(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

// User + system CPU time of a process (all threads), in seconds; -1 if unknown.
double CpuSeconds(int pid) {
  if (pid <= 0) return -1;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  std::vector<std::string> fields;
  size_t pos = paren + 2;
  while (pos < stat.size()) {
    size_t end = stat.find(' ', pos);
    if (end == std::string::npos) end = stat.size();
    fields.push_back(stat.substr(pos, end - pos));
    pos = end + 1;
  }
  if (fields.size() < 13) return -1;
  // Fields 14 and 15 of proc(5) (utime, stime) are at 11 and 12 after the command.
  return (std::atof(fields[11].c_str()) + std::atof(fields[12].c_str())) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct Args {
  std::string mode;
  int port = 0;
  int clients = 0;
  double seconds = 3;
  int rounds = 5;
  int value_bytes = 32;
  int pid = 0;
};

// A connection in the epoll-driven modes: waits for `need` reply bytes.
struct Conn {
  int fd = -1;
  int step = 0;
  size_t need = 0;
  size_t have = 0;
  char buf[64];
  uint64_t cycles = 0;
  int64_t last_i64 = 0;
};

// Reads into c.buf until `need` bytes are there (replies here are <= 64 bytes, except GET,
// whose value bytes are read and discarded). Returns true once complete, false if more
// data is needed; dies on EOF.
bool Fill(Conn& c) {
  while (c.have < c.need) {
    char tmp[4096];
    const size_t want = std::min(sizeof(tmp), c.need - c.have);
    ssize_t r = recv(c.fd, tmp, want, 0);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) Die("connection closed by the server");
    const size_t copy = std::min<size_t>(static_cast<size_t>(r),
                                         c.have < sizeof(c.buf) ? sizeof(c.buf) - c.have : 0);
    std::memcpy(c.buf + c.have, tmp, copy);
    c.have += static_cast<size_t>(r);
  }
  return true;
}

int RunOps(const Args& a) {
  const int n = a.clients > 0 ? a.clients : 64;
  const std::string value(static_cast<size_t>(a.value_bytes), 'v');
  std::vector<Conn> conns(static_cast<size_t>(n));
  std::vector<std::string> keys, counters;
  int ep = epoll_create1(0);
  for (int i = 0; i < n; ++i) {
    Conn& c = conns[static_cast<size_t>(i)];
    c.fd = ConnectBlocking(a.port);
    if (c.fd < 0) Die("connect");
    SetNonBlocking(c.fd);
    keys.push_back(absl::StrCat("/bench/key", i));
    counters.push_back(absl::StrCat("/bench/counter", i % 8));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
  }
  // Step 0: SET + WAIT (the 1.13 client's set() sends and returns; get() starts with WAIT).
  auto start_cycle = [&](int i) {
    Conn& c = conns[static_cast<size_t>(i)];
    c.step = 1;
    c.need = 1;
    c.have = 0;
    if (!SendAll(c.fd, Set(keys[static_cast<size_t>(i)], value) + Wait1(keys[static_cast<size_t>(i)])))
      Die("send");
  };
  const double cpu0 = CpuSeconds(a.pid);
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(a.seconds));
  for (int i = 0; i < n; ++i) start_cycle(i);
  int active = n;
  std::vector<epoll_event> events(static_cast<size_t>(n));
  while (active > 0) {
    int k = epoll_wait(ep, events.data(), n, 10000);
    if (k <= 0) Die("epoll_wait (server stalled?)");
    const bool over = Clock::now() >= deadline;
    for (int e = 0; e < k; ++e) {
      const int i = static_cast<int>(events[static_cast<size_t>(e)].data.u32);
      Conn& c = conns[static_cast<size_t>(i)];
      if (c.step == 0 || !Fill(c)) continue;
      if (c.step == 1) {  // WAIT answered: GET
        c.step = 2;
        c.need = 8 + value.size();
        c.have = 0;
        if (!SendAll(c.fd, Get(keys[static_cast<size_t>(i)]))) Die("send");
      } else if (c.step == 2) {  // GET answered: ADD
        c.step = 3;
        c.need = 8;
        c.have = 0;
        if (!SendAll(c.fd, Add(counters[static_cast<size_t>(i)], 1))) Die("send");
      } else {  // ADD answered: cycle done
        ++c.cycles;
        if (over) {
          c.step = 0;
          --active;
        } else {
          start_cycle(i);
        }
      }
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu1 = CpuSeconds(a.pid);
  uint64_t cycles = 0;
  for (Conn& c : conns) {
    cycles += c.cycles;
    close(c.fd);
  }
  close(ep);
  // Per cycle: 3 API calls (set, get, add) = 4 requests, 3 round trips.
  std::printf("mode=ops\nclients=%d\nseconds=%.3f\ncycles=%llu\nops_per_sec=%.0f\n"
              "requests_per_sec=%.0f\n",
              n, secs, static_cast<unsigned long long>(cycles), 3.0 * cycles / secs,
              4.0 * cycles / secs);
  if (cpu0 >= 0 && cpu1 > cpu0)
    std::printf("server_cpu_seconds=%.3f\nops_per_server_cpu_second=%.0f\n", cpu1 - cpu0,
                3.0 * cycles / (cpu1 - cpu0));
  return 0;
}

int RunBarrier(const Args& a) {
  const int n = a.clients > 0 ? a.clients : 1024;
  const long rss_before = a.pid > 0 ? RssKiB(a.pid) : -1;
  std::vector<Conn> conns(static_cast<size_t>(n));
  int ep = epoll_create1(0);
  for (int i = 0; i < n; ++i) {
    Conn& c = conns[static_cast<size_t>(i)];
    c.fd = ConnectBlocking(a.port);
    if (c.fd < 0) Die("connect");
    // Prove the server accepted it before timing anything.
    std::string reply;
    if (!SendAll(c.fd, std::string(1, static_cast<char>(kGetNumKeys))) ||
        !RecvAllBlocking(c.fd, 8, &reply))
      Die("warm-up request");
    SetNonBlocking(c.fd);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
  }
  std::vector<epoll_event> events(static_cast<size_t>(n));
  std::vector<double> ms;
  const double cpu0 = CpuSeconds(a.pid);
  const std::string salt = absl::StrCat(getpid(), "/", Clock::now().time_since_epoch().count());
  for (int r = 0; r < a.rounds; ++r) {
    const std::string counter = absl::StrCat("/barrier/", salt, "/", r);
    const std::string done = counter + ":last_worker";
    const auto t0 = Clock::now();
    for (Conn& c : conns) {
      c.step = 1;
      c.need = 8;
      c.have = 0;
      if (!SendAll(c.fd, Add(counter, 1))) Die("send");
    }
    int released = 0;
    while (released < n) {
      int k = epoll_wait(ep, events.data(), n, 10000);
      if (k <= 0) Die("epoll_wait (server stalled?)");
      for (int e = 0; e < k; ++e) {
        Conn& c = conns[events[static_cast<size_t>(e)].data.u32];
        if (c.step == 0 || !Fill(c)) continue;
        if (c.step == 1) {
          int64_t v;
          std::memcpy(&v, c.buf, 8);
          std::string req = v == n ? Set(done, "1") : std::string();
          req += Wait1(done);
          c.step = 2;
          c.need = 1;
          c.have = 0;
          if (!SendAll(c.fd, req)) Die("send");
        } else {
          c.step = 0;
          ++released;
        }
      }
    }
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  const double cpu1 = CpuSeconds(a.pid);
  const long rss_after = a.pid > 0 ? RssKiB(a.pid) : -1;
  for (Conn& c : conns) close(c.fd);
  close(ep);
  std::printf("mode=barrier\nclients=%d\n", n);
  if (cpu0 >= 0 && cpu1 >= cpu0)
    std::printf("server_cpu_ms_per_round=%.2f\n", (cpu1 - cpu0) * 1000 / a.rounds);
  if (rss_before > 0 && rss_after > 0)
    std::printf("server_rss_kib_before=%ld\nserver_rss_kib_after=%ld\n", rss_before, rss_after);
  std::string all;
  for (double m : ms) all += absl::StrCat(all.empty() ? "" : ",", m);
  std::printf("round_ms=%s\n", all.c_str());
  std::sort(ms.begin(), ms.end());
  std::printf("median_ms=%.3f\n", ms[ms.size() / 2]);
  return 0;
}

int RunIdle(const Args& a) {
  const int n = a.clients > 0 ? a.clients : 10000;
  const long rss_before = a.pid > 0 ? RssKiB(a.pid) : -1;
  std::vector<int> fds;
  fds.reserve(static_cast<size_t>(n));
  int errors = 0;
  std::string reply;
  const std::string probe(1, static_cast<char>(kGetNumKeys));
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    int fd = ConnectBlocking(a.port);
    if (fd < 0) {
      ++errors;
      continue;
    }
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (!SendAll(fd, probe) || !RecvAllBlocking(fd, 8, &reply)) ++errors;
    fds.push_back(fd);
  }
  const double connect_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const long rss_after = a.pid > 0 ? RssKiB(a.pid) : -1;
  // All of them are still served while all are open.
  int second_errors = 0;
  for (int fd : fds)
    if (!SendAll(fd, probe) || !RecvAllBlocking(fd, 8, &reply)) ++second_errors;
  for (int fd : fds) close(fd);
  std::printf("mode=idle\nclients=%d\nopen=%zu\nerrors=%d\nrecheck_errors=%d\n"
              "connect_seconds=%.3f\n",
              n, fds.size(), errors, second_errors, connect_s);
  if (rss_before >= 0 && rss_after >= 0) {
    std::printf("rss_before_kib=%ld\nrss_after_kib=%ld\nbytes_per_conn=%.0f\n", rss_before,
                rss_after, (rss_after - rss_before) * 1024.0 / std::max<size_t>(1, fds.size()));
  }
  return errors + second_errors == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ops|barrier|idle --port P [--clients N] [--seconds S] "
                         "[--rounds R] [--value-bytes B] [--pid PID]\n", argv[0]);
    return 2;
  }
  a.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--port") a.port = std::atoi(v);
    else if (k == "--clients") a.clients = std::atoi(v);
    else if (k == "--seconds") a.seconds = std::atof(v);
    else if (k == "--rounds") a.rounds = std::atoi(v);
    else if (k == "--value-bytes") a.value_bytes = std::atoi(v);
    else if (k == "--pid") a.pid = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  if (a.port <= 0) {
    std::fprintf(stderr, "--port is required\n");
    return 2;
  }
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (a.mode == "ops") return RunOps(a);
  if (a.mode == "barrier") return RunBarrier(a);
  if (a.mode == "idle") return RunIdle(a);
  std::fprintf(stderr, "unknown mode %s\n", a.mode.c_str());
  return 2;
}
