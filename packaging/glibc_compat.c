// glibc_compat.c: lets the release build's drun and drun-net (packaging/portable.cmake),
// built on Debian 12 (glibc 2.36), run on glibc 2.28 (RHEL/Rocky 8, Debian 10, the floor
// of PyTorch's manylinux_2_28 wheels).
//
// Contract: linked into an executable (never a shared library) together with
// -static-libstdc++ -static-libgcc and every non-glibc library as an archive, so the only
// glibc symbols the executable imports are the ones its objects and those archives name.
// Of those, this file defines (hidden: never exported, so the dynamic linker cannot bind
// its own references back to them) every one whose default version is newer than 2.28:
//  - a symbol glibc moved into libc in 2.34 or gave a new version (pthread_create,
//    __libc_start_main, pow, ...) forwards to its old version, which every glibc from 2.28
//    on exports (the old versions resolve in libpthread.so.0/libdl.so.2 on 2.28, hence
//    portable.cmake's DT_NEEDED entries for them);
//  - a function that did not exist in 2.28 (stat as a function, sigabbrev_np,
//    pthread_cond_clockwait, arc4random, _dl_find_object) is the running glibc's own one
//    when it has it (found by version with dlvsym), else implemented here with what 2.28
//    has.
// packaging/check_glibc_floor.py proves the result: no imported symbol newer than 2.28.
// __libc_start_main: crt1.o from glibc >= 2.34 passes no init function, relying on the new
// libc to run the executable's constructors; 2.28's libc runs only the init function it is
// given, so this one always passes one (the same work the new libc does itself).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define HIDDEN __attribute__((visibility("hidden")))

// FORWARD(ret, name, version, (params), (args)): `name` calls name@version.
#define FORWARD(ret, name, ver, params, args)                   \
  extern ret name##_old params;                                 \
  __asm__(".symver " #name "_old," #name "@" ver);              \
  HIDDEN ret name params { return name##_old args; }

typedef void* (*StartRoutine)(void*);
FORWARD(int, pthread_create, "GLIBC_2.2.5",
        (pthread_t * t, const pthread_attr_t* a, StartRoutine f, void* arg), (t, a, f, arg))
FORWARD(int, pthread_join, "GLIBC_2.2.5", (pthread_t t, void** r), (t, r))
FORWARD(int, pthread_detach, "GLIBC_2.2.5", (pthread_t t), (t))
FORWARD(int, pthread_key_create, "GLIBC_2.2.5", (pthread_key_t * k, void (*d)(void*)), (k, d))
FORWARD(int, __pthread_key_create, "GLIBC_2.2.5", (pthread_key_t * k, void (*d)(void*)), (k, d))
FORWARD(int, pthread_key_delete, "GLIBC_2.2.5", (pthread_key_t k), (k))
FORWARD(void*, pthread_getspecific, "GLIBC_2.2.5", (pthread_key_t k), (k))
// glibc declares the value access(none): gcc then thinks forwarding it reads it uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
FORWARD(int, pthread_setspecific, "GLIBC_2.2.5", (pthread_key_t k, const void* v), (k, v))
#pragma GCC diagnostic pop
FORWARD(int, pthread_once, "GLIBC_2.2.5", (pthread_once_t * o, void (*f)(void)), (o, f))
FORWARD(int, pthread_attr_setstacksize, "GLIBC_2.2.5", (pthread_attr_t * a, size_t s), (a, s))
FORWARD(int, pthread_setname_np, "GLIBC_2.12", (pthread_t t, const char* n), (t, n))
FORWARD(int, pthread_getname_np, "GLIBC_2.12", (pthread_t t, char* n, size_t l), (t, n, l))
FORWARD(int, pthread_sigmask, "GLIBC_2.2.5", (int h, const sigset_t* s, sigset_t* o), (h, s, o))
FORWARD(int, pthread_kill, "GLIBC_2.2.5", (pthread_t t, int s), (t, s))
FORWARD(int, pthread_mutex_trylock, "GLIBC_2.2.5", (pthread_mutex_t * m), (m))
FORWARD(int, pthread_mutexattr_init, "GLIBC_2.2.5", (pthread_mutexattr_t * a), (a))
FORWARD(int, pthread_mutexattr_destroy, "GLIBC_2.2.5", (pthread_mutexattr_t * a), (a))
FORWARD(int, pthread_mutexattr_settype, "GLIBC_2.2.5", (pthread_mutexattr_t * a, int t), (a, t))
FORWARD(int, pthread_rwlock_init, "GLIBC_2.2.5",
        (pthread_rwlock_t * l, const pthread_rwlockattr_t* a), (l, a))
FORWARD(int, pthread_rwlock_destroy, "GLIBC_2.2.5", (pthread_rwlock_t * l), (l))
FORWARD(int, pthread_rwlock_rdlock, "GLIBC_2.2.5", (pthread_rwlock_t * l), (l))
FORWARD(int, pthread_rwlock_wrlock, "GLIBC_2.2.5", (pthread_rwlock_t * l), (l))
FORWARD(int, pthread_rwlock_unlock, "GLIBC_2.2.5", (pthread_rwlock_t * l), (l))
FORWARD(int, pthread_condattr_setclock, "GLIBC_2.3.3", (pthread_condattr_t * a, clockid_t c), (a, c))
FORWARD(void*, dlopen, "GLIBC_2.2.5", (const char* f, int m), (f, m))
FORWARD(void*, dlsym, "GLIBC_2.2.5", (void* h, const char* s), (h, s))
FORWARD(int, dlclose, "GLIBC_2.2.5", (void* h), (h))
FORWARD(char*, dlerror, "GLIBC_2.2.5", (void), ())
FORWARD(int, dladdr, "GLIBC_2.2.5", (const void* a, Dl_info* i), (a, i))
FORWARD(double, pow, "GLIBC_2.2.5", (double x, double y), (x, y))
FORWARD(double, exp, "GLIBC_2.2.5", (double x), (x))
FORWARD(double, log, "GLIBC_2.2.5", (double x), (x))
FORWARD(double, log2, "GLIBC_2.2.5", (double x), (x))

extern void* dlvsym_old(void* h, const char* s, const char* v);
__asm__(".symver dlvsym_old,dlvsym@GLIBC_2.2.5");

// The running glibc's own `name` at one of `versions` (newest first), or NULL; looked up
// once per call site (`slot`), by whichever thread comes first (the answer is the same).
struct Lookup {
  int looked;
  void* found;
};

static void* Newer(struct Lookup* slot, const char* name, const char* const* versions) {
  if (__atomic_load_n(&slot->looked, __ATOMIC_ACQUIRE)) return slot->found;
  void* f = NULL;
  for (; *versions && !f; ++versions) f = dlvsym_old(RTLD_DEFAULT, name, *versions);
  slot->found = f;
  __atomic_store_n(&slot->looked, 1, __ATOMIC_RELEASE);
  return f;
}

// --- __libc_start_main ------------------------------------------------------------------
typedef int (*MainFn)(int, char**, char**);
typedef void (*InitFn)(int, char**, char**);
extern int __libc_start_main_old(MainFn, int, char**, InitFn, void (*)(void), void (*)(void),
                                 void*);
__asm__(".symver __libc_start_main_old,__libc_start_main@GLIBC_2.2.5");
extern InitFn __init_array_start[] __attribute__((visibility("hidden")));
extern InitFn __init_array_end[] __attribute__((visibility("hidden")));
extern void _init(void);

// What glibc 2.28's __libc_csu_init did for a dynamically linked executable (the dynamic
// linker runs the preinit array) and glibc >= 2.34 does itself: _init, then .init_array.
static void RunConstructors(int argc, char** argv, char** envp) {
  _init();
  for (InitFn* f = __init_array_start; f < __init_array_end; ++f) (*f)(argc, argv, envp);
}

HIDDEN int __libc_start_main(MainFn main_fn, int argc, char** argv, InitFn init,
                             void (*fini)(void), void (*rtld_fini)(void), void* stack_end) {
  return __libc_start_main_old(main_fn, argc, argv, init ? init : RunConstructors, fini,
                               rtld_fini, stack_end);
}

// --- stat family (functions since 2.33; before, inline wrappers of __xstat) -------------
extern int __xstat_old(int, const char*, struct stat*);
extern int __lxstat_old(int, const char*, struct stat*);
extern int __fxstat_old(int, int, struct stat*);
extern int __fxstatat_old(int, int, const char*, struct stat*, int);
__asm__(".symver __xstat_old,__xstat@GLIBC_2.2.5");
__asm__(".symver __lxstat_old,__lxstat@GLIBC_2.2.5");
__asm__(".symver __fxstat_old,__fxstat@GLIBC_2.2.5");
__asm__(".symver __fxstatat_old,__fxstatat@GLIBC_2.4");
enum { kStatVer = 1 };  // _STAT_VER_LINUX on x86_64

HIDDEN int stat(const char* p, struct stat* b) { return __xstat_old(kStatVer, p, b); }
HIDDEN int lstat(const char* p, struct stat* b) { return __lxstat_old(kStatVer, p, b); }
HIDDEN int fstat(int fd, struct stat* b) { return __fxstat_old(kStatVer, fd, b); }
HIDDEN int fstatat(int d, const char* p, struct stat* b, int f) {
  return __fxstatat_old(kStatVer, d, p, b, f);
}
HIDDEN int stat64(const char* p, struct stat64* b) { return stat(p, (struct stat*)b); }
HIDDEN int lstat64(const char* p, struct stat64* b) { return lstat(p, (struct stat*)b); }
HIDDEN int fstat64(int fd, struct stat64* b) { return fstat(fd, (struct stat*)b); }
HIDDEN int fstatat64(int d, const char* p, struct stat64* b, int f) {
  return fstatat(d, p, (struct stat*)b, f);
}

// --- libstdc++'s single-thread fast path (2.32): 0 means "take the atomic path", always
// correct. -----------------------------------------------------------------------------
HIDDEN char __libc_single_threaded = 0;

// --- sigabbrev_np (2.32) ----------------------------------------------------------------
HIDDEN const char* sigabbrev_np(int sig) {
  static const char* const kNames[] = {
      NULL,    "HUP",  "INT",  "QUIT", "ILL",    "TRAP",   "ABRT",  "BUS",   "FPE",
      "KILL",  "USR1", "SEGV", "USR2", "PIPE",   "ALRM",   "TERM",  "STKFLT", "CHLD",
      "CONT",  "STOP", "TSTP", "TTIN", "TTOU",   "URG",    "XCPU",  "XFSZ",  "VTALRM",
      "PROF",  "WINCH", "POLL", "PWR", "SYS"};
  if (sig <= 0 || sig >= (int)(sizeof kNames / sizeof kNames[0])) return NULL;
  return kNames[sig];
}

// --- pthread_cond_clockwait (2.30): libstdc++'s condition_variable on steady_clock ------
typedef int (*ClockwaitFn)(pthread_cond_t*, pthread_mutex_t*, clockid_t, const struct timespec*);

// abs on clock `clk`, as the same instant on CLOCK_REALTIME.
static struct timespec OnRealtime(clockid_t clk, const struct timespec* abs) {
  struct timespec now_clk, now_rt;
  clock_gettime(clk, &now_clk);
  clock_gettime(CLOCK_REALTIME, &now_rt);
  int64_t ns = (int64_t)(abs->tv_sec - now_clk.tv_sec) * 1000000000 +
               (abs->tv_nsec - now_clk.tv_nsec) + now_rt.tv_nsec;
  struct timespec r = {now_rt.tv_sec + ns / 1000000000, ns % 1000000000};
  if (r.tv_nsec < 0) r.tv_sec -= 1, r.tv_nsec += 1000000000;
  return r;
}

HIDDEN int pthread_cond_clockwait(pthread_cond_t* c, pthread_mutex_t* m, clockid_t clk,
                                  const struct timespec* abs) {
  static const char* const kVersions[] = {"GLIBC_2.34", "GLIBC_2.30", NULL};
  static struct Lookup lookup;
  ClockwaitFn real = (ClockwaitFn)Newer(&lookup, "pthread_cond_clockwait", kVersions);
  if (real) return real(c, m, clk, abs);
  if (clk == CLOCK_REALTIME) return pthread_cond_timedwait(c, m, abs);
  if (clk != CLOCK_MONOTONIC) return EINVAL;
  struct timespec rt = OnRealtime(clk, abs);
  return pthread_cond_timedwait(c, m, &rt);
}

// --- arc4random (2.36): std::random_device's default source -----------------------------
HIDDEN void arc4random_buf(void* buf, size_t n) {
  unsigned char* p = buf;
  while (n > 0) {
    long got = syscall(SYS_getrandom, p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      abort();  // what glibc's own arc4random does when the kernel gives no randomness
    }
    p += got;
    n -= (size_t)got;
  }
}

HIDDEN uint32_t arc4random(void) {
  uint32_t v;
  arc4random_buf(&v, sizeof v);
  return v;
}

HIDDEN uint32_t arc4random_uniform(uint32_t upper) {
  if (upper < 2) return 0;
  uint32_t min = -upper % upper;  // rejection below 2^32 mod upper: no bias
  for (;;) {
    uint32_t r = arc4random();
    if (r >= min) return r % upper;
  }
}

// --- _dl_find_object (2.35): libgcc's unwinder, to find an address's .eh_frame_hdr -------
struct FindArg {
  uintptr_t pc;
  struct dl_find_object* out;
  int found;
};

static int FindInObject(struct dl_phdr_info* info, size_t size, void* data) {
  struct FindArg* a = data;
  uintptr_t lo = UINTPTR_MAX, hi = 0, eh = 0;
  int inside = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_GNU_EH_FRAME) eh = start;
    if (ph->p_type != PT_LOAD) continue;
    if (start < lo) lo = start;
    if (start + ph->p_memsz > hi) hi = start + ph->p_memsz;
    if (a->pc >= start && a->pc < start + ph->p_memsz) inside = 1;
  }
  if (!inside) return 0;
  memset(a->out, 0, sizeof *a->out);
  a->out->dlfo_map_start = (void*)lo;
  a->out->dlfo_map_end = (void*)hi;
  a->out->dlfo_eh_frame = (void*)eh;
  a->found = 1;
  return 1;
}

typedef int (*FindObjectFn)(void*, struct dl_find_object*);

HIDDEN int _dl_find_object(void* pc, struct dl_find_object* out) {
  static const char* const kVersions[] = {"GLIBC_2.35", NULL};
  static struct Lookup lookup;
  FindObjectFn real = (FindObjectFn)Newer(&lookup, "_dl_find_object", kVersions);
  if (real) return real(pc, out);
  struct FindArg a = {(uintptr_t)pc, out, 0};
  dl_iterate_phdr(FindInObject, &a);
  return a.found ? 0 : -1;
}
