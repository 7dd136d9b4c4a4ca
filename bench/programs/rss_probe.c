/* LD_PRELOAD library for bench/standalone_bench.py: when the launcher process exits
 * (exit() or return from main, which run the C library's destructors, or _exit(), which
 * this library interposes because drun leaves with it once its work is done), append one
 * line "pid VmHWM_kB VmRSS_kB RssAnon_kB RssFile_kB" of its own /proc/self/status to
 * $RSS_PROBE_OUT, plus " Pss_kB" from /proc/self/smaps_rollup (proportional set size:
 * shared pages divided among the processes mapping them). VmHWM is the process's peak
 * resident set, so this is the peak RSS of the launcher alone (its children are separate
 * processes with their own counters).
 *
 * The constructor removes LD_PRELOAD from the environment, so the workers the launcher
 * starts do not load this library (drun and Python both copy environ after constructors).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static char out_path[4096];

__attribute__((constructor)) static void rss_probe_init(void) {
  const char* p = getenv("RSS_PROBE_OUT");
  if (p) snprintf(out_path, sizeof out_path, "%s", p);
  unsetenv("LD_PRELOAD");
  unsetenv("RSS_PROBE_OUT");
}

static long field_kb(const char* status, const char* key) {
  const char* p = strstr(status, key);
  return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

__attribute__((destructor)) static void rss_probe_fini(void) {
  if (!out_path[0]) return;
  char status[8192];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, status, sizeof status - 1);
  close(fd);
  if (n <= 0) return;
  status[n] = 0;
  long pss = -1;
  fd = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char rollup[4096];
    ssize_t m = read(fd, rollup, sizeof rollup - 1);
    close(fd);
    if (m > 0) {
      rollup[m] = 0;
      pss = field_kb(rollup, "\nPss:");
    }
  }
  char line[256];
  int len = snprintf(line, sizeof line, "%d %ld %ld %ld %ld %ld\n", (int)getpid(),
                     field_kb(status, "VmHWM:"), field_kb(status, "VmRSS:"),
                     field_kb(status, "RssAnon:"), field_kb(status, "RssFile:"), pss);
  fd = open(out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (write(fd, line, (size_t)len) != len) {
  }
  close(fd);
}

/* drun ends with _exit (no destructors run): record first, then leave the same way. */
void _exit(int status) {
  rss_probe_fini();
  out_path[0] = 0;
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}
