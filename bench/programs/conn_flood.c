/* conn_flood HOST PORT RATE SECONDS [MODE]: opens RATE TCP connections per second to
 * HOST:PORT (IPv4) for SECONDS, paced in 10 ms slices, and prints what it did:
 *   "attempts=N connected=C refused=R closed_by_peer=P" on one line.
 * MODE "close" (default) closes each connection at once; "garbage" writes a few bytes
 * first; "silent" keeps up to 512 open without a word (the oldest are closed first).
 * Used by bench/flood_bench.py and tests/multinode/test_flood.py: a non-member hammering
 * a job's rendezvous and store port. Non-blocking connects; nothing sleeps but the pacing. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SILENT_MAX 512

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: conn_flood HOST PORT RATE SECONDS [close|garbage|silent]\n");
    return 2;
  }
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)atoi(argv[2]));
  if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1) return 2;
  const double rate = atof(argv[3]), seconds = atof(argv[4]);
  const char* mode = argc > 5 ? argv[5] : "close";
  long attempts = 0, connected = 0, refused = 0, peer_closed = 0;
  int silent[SILENT_MAX];
  int n_silent = 0, next_silent = 0;
  const double start = now_s();
  for (;;) {
    const double t = now_s() - start;
    if (t >= seconds) break;
    const long due = (long)(t * rate);
    while (attempts < due) {
      attempts++;
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) break;
      int rc = connect(fd, (struct sockaddr*)&a, sizeof a);
      if (rc != 0 && errno == EINPROGRESS) {
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, 100) == 1) {
          int err = 0;
          socklen_t len = sizeof err;
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
          rc = err == 0 ? 0 : -1;
        }
      }
      if (rc != 0) {
        refused++;
        close(fd);
        continue;
      }
      connected++;
      if (strcmp(mode, "garbage") == 0) (void)!write(fd, "GET / HTTP/1.1\r\n\r\n", 18);
      if (strcmp(mode, "silent") == 0) {
        if (n_silent == SILENT_MAX) {
          char c;
          if (recv(silent[next_silent], &c, 1, MSG_DONTWAIT) == 0) peer_closed++;
          close(silent[next_silent]);
        } else {
          n_silent++;
        }
        silent[next_silent] = fd;
        next_silent = (next_silent + 1) % SILENT_MAX;
        continue;
      }
      close(fd);
    }
    struct timespec slice = {0, 10 * 1000 * 1000};
    nanosleep(&slice, NULL); /* pacing: the next 10 ms slice of attempts */
  }
  for (int i = 0; i < n_silent; ++i) {
    char c;
    if (recv(silent[i], &c, 1, MSG_DONTWAIT) == 0) peer_closed++;
    close(silent[i]);
  }
  printf("attempts=%ld connected=%ld refused=%ld closed_by_peer=%ld seconds=%.2f\n", attempts,
         connected, refused, peer_closed, now_s() - start);
  return 0;
}
