/* Worker for bench/standalone_bench.py's restart measurement (run with --no-python).
 *
 * The first thing main() does is read CLOCK_REALTIME, so "started" means "reached main":
 * exec + dynamic loading are inside the measured interval (they are reported separately
 * as the program's own start, see --self-start).
 *
 * TORCHELASTIC_RESTART_COUNT=0: every rank but 1 writes $PROBE_DIR/ready_<rank> and waits
 *   in pause() until the launcher's SIGTERM; rank 1 waits until the others are ready, then
 *   writes $PROBE_DIR/crash (its CLOCK_REALTIME in ns, taken right before exiting) and
 *   exits 1.
 * TORCHELASTIC_RESTART_COUNT>=1: writes $PROBE_DIR/start_<rank>_<attempt> (its time at
 *   main) and exits 0.
 *
 * restart_probe --self-start N: spawns itself N times (posix_spawn, as lean as a launcher
 *   can be) and prints the median ns from just before posix_spawn to the child's first
 *   clock read: the program's own start.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void write_ns(const char* dir, const char* name, long long ns) {
  char path[4096], buf[32];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int len = snprintf(buf, sizeof buf, "%lld\n", ns);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) _exit(3);
  if (write(fd, buf, (size_t)len) != len) _exit(3);
  close(fd);
}

static int cmp_ll(const void* a, const void* b) {
  long long x = *(const long long*)a, y = *(const long long*)b;
  return (x > y) - (x < y);
}

static int self_start(const char* self, int n) {
  long long* d = calloc((size_t)n, sizeof *d);
  for (int i = 0; i < n; ++i) {
    int fds[2];
    if (pipe(fds) != 0) return 2;
    char fdarg[16];
    snprintf(fdarg, sizeof fdarg, "%d", fds[1]);
    char* argv[] = {(char*)self, "--report-to", fdarg, NULL};
    pid_t pid;
    long long t0 = now_ns();
    if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0) return 2;
    close(fds[1]);
    long long t1 = 0;
    if (read(fds[0], &t1, sizeof t1) != sizeof t1) return 2;
    close(fds[0]);
    waitpid(pid, NULL, 0);
    d[i] = t1 - t0;
  }
  qsort(d, (size_t)n, sizeof *d, cmp_ll);
  printf("%lld %lld %lld\n", d[n / 2], d[0], d[n - 1]);
  return 0;
}

int main(int argc, char** argv) {
  const long long started = now_ns(); /* first thing */
  if (argc == 3 && strcmp(argv[1], "--report-to") == 0) {
    int fd = atoi(argv[2]);
    return write(fd, &started, sizeof started) == sizeof started ? 0 : 1;
  }
  if (argc == 3 && strcmp(argv[1], "--self-start") == 0) return self_start(argv[0], atoi(argv[2]));

  const char* dir = getenv("PROBE_DIR");
  const char* rc = getenv("TORCHELASTIC_RESTART_COUNT");
  const char* rank_s = getenv("RANK");
  const char* ws_s = getenv("WORLD_SIZE");
  if (!dir || !rc || !rank_s || !ws_s) {
    fprintf(stderr, "restart_probe: PROBE_DIR, TORCHELASTIC_RESTART_COUNT, RANK, WORLD_SIZE needed\n");
    return 2;
  }
  const int attempt = atoi(rc), rank = atoi(rank_s), world = atoi(ws_s);
  char name[64];
  if (attempt >= 1) {
    snprintf(name, sizeof name, "start_%d_%d", rank, attempt);
    write_ns(dir, name, started);
    return 0;
  }
  if (rank != 1) {
    snprintf(name, sizeof name, "ready_%d", rank);
    write_ns(dir, name, started);
    for (;;) pause(); /* until the launcher's SIGTERM */
  }
  /* rank 1: crash once everyone else of attempt 0 is running (at most ~30 s). */
  for (int i = 0; i < 30000; ++i) {
    int ready = 0;
    for (int r = 0; r < world; ++r) {
      if (r == 1) continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/ready_%d", dir, r);
      ready += access(path, F_OK) == 0;
    }
    if (ready == world - 1) break;
    usleep(1000);
  }
  write_ns(dir, "crash", now_ns());
  _exit(1);
}
