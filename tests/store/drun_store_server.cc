// drun_store_server: runs a C10dStoreServer for tests and benchmarks.
//
//   drun_store_server [--host ADDR] [--port N] [--log] [--ignore-stdin]
//
// Prints the bound port on its own line on stdout, then serves until stdin reaches EOF
// (the parent closed the pipe or died) or SIGTERM/SIGINT arrives. Raises its soft
// RLIMIT_NOFILE to the hard limit so it can hold thousands of connections.
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rendezvous/store/c10d_store.h"

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 0;
  bool log = false;
  bool watch_stdin = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--host" && i + 1 < argc) {
      host = argv[++i];
    } else if (a == "--port" && i + 1 < argc) {
      port = std::atoi(argv[++i]);
    } else if (a == "--log") {
      log = true;
    } else if (a == "--ignore-stdin") {
      watch_stdin = false;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--host ADDR] [--port N] [--log] [--ignore-stdin]\n", argv[0]);
      return 2;
    }
  }

  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }

  // Block the stop signals before the server thread exists, so only signalfd sees them.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC);

  drun::C10dStoreServer::Options options;
  if (log) {
    options.log = [](absl::string_view line) {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
    };
  }
  auto server = drun::C10dStoreServer::Start(host == "*" ? "" : host, port, options);
  if (!server.ok()) {
    std::fprintf(stderr, "drun_store_server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  std::printf("%d\n", (*server)->port());
  std::fflush(stdout);

  pollfd fds[2] = {{sfd, POLLIN, 0}, {watch_stdin ? 0 : -1, POLLIN, 0}};
  for (;;) {
    if (poll(fds, 2, -1) < 0) continue;
    if (fds[0].revents) break;
    if (fds[1].revents) {
      char buf[256];
      ssize_t n = read(0, buf, sizeof(buf));
      if (n <= 0) break;
    }
  }
  const uint64_t errors = (*server)->protocol_errors();
  (*server)->Stop();
  if (log) std::fprintf(stderr, "drun_store_server: stopped (%llu protocol errors)\n",
                        static_cast<unsigned long long>(errors));
  return 0;
}
