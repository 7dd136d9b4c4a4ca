"""Shared harness of drun's ssh launcher tests: a testbed of hosts on this machine.

Each "host" is a network namespace running Debian's own sshd (its own host key, its own
hostname through a UTS namespace, its own mount namespace so a host can lack drun); the
launcher runs in another namespace ("client") with a throwaway home bind-mounted over the
real one (libssh and OpenSSH read ~/.ssh from the passwd entry, not $HOME), so /root/.ssh is
never read or written. Names resolve through /etc/netns/<ns>/hosts.

Network safety: before any namespace exists, the test subnet gets an `unreachable` route in
the root namespace; the bridge and every test address live in namespaces created here; only
loopback and those addresses are dialled. Everything is torn down afterwards (namespaces,
route, /etc/netns directories); processes are recorded by pid and never matched by name.

Rules (as in tests/multinode): wait for events, never sleep. Lines are read by threads and
waited for with a condition variable; deaths are waited for with pidfd + poll; workers that
must stay up wait on a Gate (a FIFO the test holds open). Timeouts are bounds only.
"""
import ctypes
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

# Process helpers shared with the single-node suite (tests/e2e/drun_testlib.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2e"))
from drun_testlib import _cmdline, drun_path  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "programs")
# The project's clone: the hosts run its programs, in its tests/ssh.
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON = os.environ.get("PYTHON_EXEC", "/usr/bin/python3")
RUN_TIMEOUT = float(os.environ.get("DRUN_SSH_RUN_TIMEOUT", "90"))
SUBNET_PREFIX = "10.213.51"
SUBNET = SUBNET_PREFIX + ".0/24"
DECOY_PREFIX = "10.213.52"  # the stock testbed's decoy interfaces (inside the host namespaces)
DECOY_SUBNET = DECOY_PREFIX + ".0/24"
CLIENT_ADDR = SUBNET_PREFIX + ".1"
GHOST = ("ghost", SUBNET_PREFIX + ".99")  # a name whose address nobody has
PREFIX_RE = re.compile(r"^\[(?P<host>[^\]:]*):rank(?P<rank>\d+)\]: ?(?P<text>.*)$")

_PR_SET_CHILD_SUBREAPER = 36


def unavailable_reason():
    if os.geteuid() != 0:
        return "needs root (network namespaces, sshd, bind mounts): run the suite as root"
    for tool in ("ip", "unshare", "ssh-keygen", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not os.access("/usr/sbin/sshd", os.X_OK):
        return "openssh-server (/usr/sbin/sshd) is not installed"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"`ip netns` is unavailable: {probe.stderr.strip()}"
    return None


def run(*args, check=True, **kw):
    proc = subprocess.run([str(a) for a in args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, **kw)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))}: exit {proc.returncode}: "
                           f"{proc.stderr.strip()}")
    return proc


def become_subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return int(stat[stat.rindex(")") + 2:].split()[1])
    except (OSError, ValueError):
        return None


def wait_pids_dead(pids, timeout=10.0):
    """Waits (pidfd + poll) until every pid has exited; returns those still alive."""
    fds = {}
    try:
        for pid in pids:
            try:
                fds[os.pidfd_open(pid)] = pid
            except ProcessLookupError:
                continue
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        alive = dict(fds)
        deadline = time.monotonic() + timeout
        while alive:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for fd, _ in poller.poll(remaining * 1000):
                poller.unregister(fd)
                alive.pop(fd, None)
        return sorted(alive.values())
    finally:
        for fd in fds:
            os.close(fd)


class Lines:
    """A process's stdout and stderr read by two threads into line lists."""

    def __init__(self, proc, name):
        self.proc = proc
        self.name = name
        self._lines = {"stdout": [], "stderr": []}
        self._raw = {"stdout": b"", "stderr": b""}  # every byte, as it came
        self._arrivals = {"stdout": [], "stderr": []}  # (raw length after a chunk, time.time())
        self._eof = {"stdout": False, "stderr": False}
        self._cond = threading.Condition()
        self._threads = []
        for stream, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            if pipe is None:
                self._eof[stream] = True
                continue
            t = threading.Thread(target=self._pump, args=(stream, pipe), daemon=True)
            t.start()
            self._threads.append(t)

    def _pump(self, stream, pipe):
        partial = b""
        fd = pipe.fileno()
        while True:
            chunk = os.read(fd, 65536)
            with self._cond:
                self._raw[stream] += chunk
                self._arrivals[stream].append((len(self._raw[stream]), time.time()))
                data = partial + chunk
                if chunk:
                    *complete, partial = data.split(b"\n")
                else:
                    complete, partial = ([data] if data else []), b""
                self._lines[stream].extend(c.decode("utf-8", "replace") for c in complete)
                if not chunk:
                    self._eof[stream] = True
                self._cond.notify_all()
            if not chunk:
                break
        pipe.close()

    def wait_for(self, pattern, stream="stdout", count=1, timeout=RUN_TIMEOUT):
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [line for line in self._lines[stream] if regex.search(line)]
                if len(found) >= count:
                    return found
                remaining = deadline - time.monotonic()
                if self._eof[stream] or remaining <= 0:
                    break
                self._cond.wait(remaining)
        raise AssertionError(f"{self.name}: waited for {count} line(s) matching {pattern!r} on "
                             f"{stream}, got {len(found)}\n{self.describe()}")

    def wait_raw(self, pattern, stream="stdout", timeout=RUN_TIMEOUT):
        """Waits until the bytes received so far (partial lines too) match `pattern` (bytes);
        returns the match."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                m = regex.search(self._raw[stream])
                if m:
                    return m
                remaining = deadline - time.monotonic()
                if self._eof[stream] or remaining <= 0:
                    break
                self._cond.wait(remaining)
        raise AssertionError(f"{self.name}: waited for bytes matching {pattern!r} on {stream}"
                             f"\n{self.describe()}")

    def arrival(self, offset, stream="stdout"):
        """When the byte before `offset` of the raw stream arrived (time.time())."""
        with self._cond:
            for end, when in self._arrivals[stream]:
                if end >= offset:
                    return when
        raise AssertionError(f"no byte {offset} on {stream} yet")

    def raw(self, stream="stdout"):
        with self._cond:
            return self._raw[stream]

    def lines(self, stream="stdout"):
        with self._cond:
            return list(self._lines[stream])

    def join(self, timeout=10):
        for t in self._threads:
            t.join(timeout)

    def describe(self, limit=60):
        with self._cond:
            out = self._lines["stdout"][-limit:]
            err = self._lines["stderr"][-limit:]
        return (f"=== {self.name} exit={self.proc.poll()}\n--- stdout ---\n" + "\n".join(out)
                + "\n--- stderr ---\n" + "\n".join(err))


class Gate:
    """A FIFO the test holds open for writing; workers waiting on it exit 0 once opened."""

    def __init__(self, directory, name="gate"):
        self.path = os.path.join(directory, name + ".fifo")
        os.mkfifo(self.path)
        self._fd = os.open(self.path, os.O_RDWR)

    def open(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class HostSpec:
    def __init__(self, name, known=True, authorized=True, has_drun=True, port=22, private=()):
        self.name = name
        # Directories (relative to the testbed's tmp) this host sees as its own empty tmpfs:
        # a file system it does not share with the launcher or the other hosts.
        self.private = tuple(private)
        self.known = known            # its key is in the client's known_hosts
        self.authorized = authorized  # the client's key may log in
        self.has_drun = has_drun      # drun is at the client's path there
        self.port = port


class Testbed:
    """Namespaces, sshd per host, the client's throwaway home. Use as a context manager
    or call setup()/teardown()."""

    def __init__(self, hosts, tag="t", stock=False, plain_home=False, private_tmp=False):
        self.specs = [h if isinstance(h, HostSpec) else HostSpec(h) for h in hosts]
        # stock: each host as Debian and Ubuntu install it, its own name on 127.0.1.1 in
        # /etc/hosts, and a second interface (a decoy "docker0") that leads nowhere.
        self.stock = stock
        # plain_home: the hosts' root has an empty home (no ~/.bashrc), so a remote command's
        # shell starts in milliseconds (bench/ssh_bench.py measures both ways).
        self.plain_home = plain_home
        # private_tmp: each host gets its own empty tmpfs at /tmp (what drun leaves in a host's
        # /tmp is then that host's alone: host_path(name, "/tmp")). The testbed's own directory
        # must then live outside /tmp (TMPDIR of the test process).
        self.private_tmp = private_tmp
        self.tag = f"drs{tag}{os.getpid() % 100000}"
        self.tmp = tempfile.mkdtemp(prefix="drun-ssh-")
        os.chmod(self.tmp, 0o755)
        self.home = os.path.join(self.tmp, "home")
        self.bin = os.path.join(self.tmp, "bin")
        self.drun = os.path.join(self.bin, "drun")
        self.client_ns = f"{self.tag}-client"
        self.bridge_ns = f"{self.tag}-br"
        self.host_ns = {s.name: f"{self.tag}-{s.name}" for s in self.specs}
        self.addr = {s.name: f"{SUBNET_PREFIX}.{11 + i}" for i, s in enumerate(self.specs)}
        self.sshd = {}      # name -> Popen
        self.sshd_log = {}  # name -> Lines
        self._namespaces = []
        self._netns_dirs = []
        self._routes = []  # the subnets this testbed made unreachable in the root namespace
        self._run_sshd_dir = False
        self.agent_proc = None

    # -- setup ---------------------------------------------------------------------------

    def setup(self):
        try:
            self._setup()
        except BaseException:
            self.teardown()
            raise
        return self

    def __enter__(self):
        return self.setup()

    def __exit__(self, *exc):
        self.teardown()

    def _setup(self):
        for subnet in [SUBNET] + ([DECOY_SUBNET] if self.stock else []):
            exact = run("ip", "-4", "route", "show", "exact", subnet).stdout.strip()
            local = run("ip", "-4", "-o", "addr", "show", "to", subnet).stdout.strip()
            if local or (exact and not exact.startswith("unreachable")):
                raise unittest.SkipTest(f"the root namespace already uses {subnet}: {local or exact}")
            if not exact:
                run("ip", "route", "add", "unreachable", subnet)
                self._routes.append(subnet)
        if not os.path.isdir("/run/sshd"):
            os.makedirs("/run/sshd", mode=0o755)
            self._run_sshd_dir = True

        if self.private_tmp and os.path.commonpath([self.tmp, "/tmp"]) == "/tmp":
            raise RuntimeError(f"private_tmp needs the testbed outside /tmp (set TMPDIR): {self.tmp}")
        os.makedirs(self.bin)
        shutil.copy2(drun_path(), self.drun)
        # drun execs drun-net (its networked half) from its own directory.
        net = os.path.join(os.path.dirname(drun_path()), "drun-net")
        if os.path.exists(net):
            shutil.copy2(net, os.path.join(self.bin, "drun-net"))
        ssh_dir = os.path.join(self.home, ".ssh")
        os.makedirs(ssh_dir, mode=0o700)
        self.key = os.path.join(ssh_dir, "id_ed25519")
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "drun-test", "-f", self.key)
        with open(self.key + ".pub") as f:
            pub = f.read()
        self.authorized_keys = os.path.join(self.tmp, "authorized_keys")
        with open(self.authorized_keys, "w") as f:
            f.write(pub)
        self.no_keys = os.path.join(self.tmp, "no_keys")
        open(self.no_keys, "w").close()

        # The network: bridge namespace, client and hosts each with a veth into it.
        for ns in [self.bridge_ns, self.client_ns] + list(self.host_ns.values()):
            run("ip", "netns", "add", ns)
            self._namespaces.append(ns)
        run("ip", "-n", self.bridge_ns, "link", "set", "lo", "up")
        run("ip", "-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.bridge_ns, "link", "set", "br0", "up")
        members = [(self.client_ns, CLIENT_ADDR)] + [(self.host_ns[s.name], self.addr[s.name])
                                                     for s in self.specs]
        for i, (ns, addr) in enumerate(members):
            run("ip", "-n", self.bridge_ns, "link", "add", f"vh{i}", "type", "veth",
                "peer", "name", "eth0", "netns", ns)
            run("ip", "-n", self.bridge_ns, "link", "set", f"vh{i}", "master", "br0")
            run("ip", "-n", self.bridge_ns, "link", "set", f"vh{i}", "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
            run("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")

        hosts_text = "127.0.0.1 localhost\n::1 localhost\n" + f"{CLIENT_ADDR} drun-client\n" + \
            "".join(f"{self.addr[s.name]} {s.name}\n" for s in self.specs) + \
            f"{GHOST[1]} {GHOST[0]}\n"
        for ns in [self.client_ns] + list(self.host_ns.values()):
            d = f"/etc/netns/{ns}"
            os.makedirs(d, exist_ok=True)
            self._netns_dirs.append(d)
            own = [n for n, h in self.host_ns.items() if h == ns]
            with open(os.path.join(d, "hosts"), "w") as f:
                # glibc takes the first match: the stock line hides the host's real address.
                f.write((f"127.0.1.1 {own[0]}\n" if self.stock and own else "") + hosts_text)
        if self.stock:
            for i, s in enumerate(self.specs):
                ns = self.host_ns[s.name]
                # A veth pair with both ends here (this kernel may lack "dummy").
                run("ip", "-n", ns, "link", "add", "docker0", "type", "veth", "peer", "name", "docker0p")
                run("ip", "-n", ns, "addr", "add", f"{DECOY_PREFIX}.{11 + i}/24", "dev", "docker0")
                for dev in ("docker0", "docker0p"):
                    run("ip", "-n", ns, "link", "set", dev, "up")

        known = []
        for s in self.specs:
            hdir = os.path.join(self.tmp, "hosts", s.name)
            os.makedirs(hdir)
            hkey = os.path.join(hdir, "ssh_host_ed25519_key")
            run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hkey)
            with open(hkey + ".pub") as f:
                key_type, key_b64 = f.read().split()[:2]
            if s.known:
                name = s.name if s.port == 22 else f"[{s.name}]:{s.port}"
                known.append(f"{name} {key_type} {key_b64}\n")
            cfg = os.path.join(hdir, "sshd_config")
            with open(cfg, "w") as f:
                f.write(f"ListenAddress {self.addr[s.name]}\nPort {s.port}\nHostKey {hkey}\n"
                        f"PidFile {hdir}/sshd.pid\n"
                        f"AuthorizedKeysFile {self.authorized_keys if s.authorized else self.no_keys}\n"
                        "PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n"
                        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                        "ClientAliveInterval 1\nClientAliveCountMax 3\nLogLevel INFO\n"
                        "MaxStartups 100\nMaxSessions 50\n")
            hide = "" if s.has_drun else f"mount -t tmpfs drun-hidden {self.bin}; "
            for rel in s.private:
                path = os.path.join(self.tmp, rel)
                os.makedirs(path, exist_ok=True)
                hide += f"mount -t tmpfs drun-private {path}; "
            if self.private_tmp:
                hide += self._cover_keeping_clone("/tmp", "mount -t tmpfs drun-host-tmp /tmp") + "; "
            if self.plain_home:
                empty = os.path.join(self.tmp, "plain_home")
                os.makedirs(empty, mode=0o700, exist_ok=True)
                hide += self._cover_keeping_clone("/root", f"mount --bind {empty} /root") + "; "
            proc = subprocess.Popen(
                ["ip", "netns", "exec", self.host_ns[s.name], "unshare", "--uts", "--mount",
                 "sh", "-c", f"hostname {s.name}; {hide}exec /usr/sbin/sshd -D -e -f {cfg}"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.sshd[s.name] = proc
            self.sshd_log[s.name] = Lines(proc, f"sshd@{s.name}")
        self.known_hosts = os.path.join(ssh_dir, "known_hosts")
        with open(self.known_hosts, "w") as f:
            f.writelines(known)
        for s in self.specs:
            self.sshd_log[s.name].wait_for(r"Server listening on", stream="stderr", timeout=20)
        self.baseline = {s.name: self.host_processes(s.name) for s in self.specs}

    def _cover_keeping_clone(self, mountpoint, cover):
        """Shell commands that run `cover` (a mount over `mountpoint`: a host's own empty
        /tmp, a throwaway home over /root) while the project's clone and the interpreter the
        jobs run stay visible where they are, also when they live under `mountpoint`: each
        is bound to a stage outside it first, then back in place."""
        keep = []
        for path in (REPO, os.path.dirname(os.path.dirname(os.path.realpath(PYTHON)))):
            path = os.path.realpath(path)
            if os.path.commonpath([path, mountpoint]) == mountpoint and path != mountpoint \
                    and path not in keep:
                keep.append(path)
        before, after = "", ""
        for path in keep:
            stage = tempfile.mkdtemp(prefix="kept-", dir=self.tmp)
            before += f"mount --bind {shlex.quote(path)} {stage} && "
            after += f" && mkdir -p {shlex.quote(path)} && mount --bind {stage} {shlex.quote(path)}"
        return before + cover + after

    # -- running things ------------------------------------------------------------------

    def client_cmd(self, argv):
        """argv run in the client namespace with the throwaway home over /root."""
        cover = self._cover_keeping_clone("/root", 'mount --bind "$0" /root')
        return ["ip", "netns", "exec", self.client_ns, "unshare", "--mount", "sh", "-c",
                cover + ' && exec "$@"', self.home] + [str(a) for a in argv]

    def env(self, **overrides):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PET_", "DRUN_", "SSH_")) and k not in ("RANK", "WORLD_SIZE")}
        env["PYTHON_EXEC"] = PYTHON
        env["HOME"] = "/root"
        for k, v in overrides.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def drun_run(self, args, env=None, cwd=None, name="drun", stdin=subprocess.DEVNULL):
        """Starts the launcher in the client namespace; returns (Popen, Lines)."""
        proc = subprocess.Popen(self.client_cmd([self.drun] + list(args)),
                                env=env or self.env(), cwd=cwd or HERE,
                                stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        return proc, Lines(proc, name)

    def write_hostfile(self, text, name="hostfile"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def write_ssh_config(self, text):
        with open(os.path.join(self.home, ".ssh", "config"), "w") as f:
            f.write(text)

    # -- processes per host ---------------------------------------------------------------

    def _ns_inode(self, name):
        return os.stat(f"/proc/{self.sshd[name].pid}/ns/net").st_ino

    def host_processes(self, name):
        """Pids of the processes in host `name`'s network namespace."""
        ino = self._ns_inode(name)
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.stat(f"/proc/{entry}/ns/net").st_ino == ino:
                    pids.append(int(entry))
            except OSError:
                continue
        return sorted(pids)

    def agent_pids(self, name):
        """The `drun agent` processes on host `name` (not their guardian children)."""
        pids = [p for p in self.host_processes(name)
                if (_cmdline(p) or "").startswith(f"{self.drun} agent")]
        return [p for p in pids if _ppid(p) not in pids]

    def wait_back_to_baseline(self, timeout=20):
        """Waits until every host runs exactly the processes it ran before the test (its
        sshd): each extra process is waited for by pidfd. Returns {host: [leftovers]}."""
        left = {}
        for s in self.specs:
            extra = [p for p in self.host_processes(s.name) if p not in self.baseline[s.name]]
            alive = wait_pids_dead(extra, timeout=timeout)
            if alive:
                left[s.name] = [(p, _cmdline(p)) for p in alive]
        return left

    def describe_hosts(self):
        return "\n".join(f"{s.name}: " + ", ".join(f"{p} {_cmdline(p)}"
                                                   for p in self.host_processes(s.name))
                         for s in self.specs)

    def host_path(self, name, path):
        """`path` as host `name` sees it (through its sshd's root, in its mount namespace)."""
        return f"/proc/{self.sshd[name].pid}/root{path}"

    def cut(self, name):
        run("ip", "-n", self.host_ns[name], "link", "set", "eth0", "down")

    def restore(self, name):
        """Undoes cut(name)."""
        run("ip", "-n", self.host_ns[name], "link", "set", "eth0", "up")

    def throttle(self, name, kbit):
        """Limits what host `name` sends to `kbit` kbit/s (a token bucket on its link)."""
        run("ip", "netns", "exec", self.host_ns[name], "tc", "qdisc", "replace", "dev", "eth0",
            "root", "tbf", "rate", f"{kbit}kbit", "burst", "16kbit", "latency", "500ms")

    def unthrottle(self, name):
        run("ip", "netns", "exec", self.host_ns[name], "tc", "qdisc", "del", "dev", "eth0",
            "root", check=False)

    # -- teardown -------------------------------------------------------------------------

    def teardown(self):
        errors = []
        for name, proc in self.sshd.items():
            if proc.poll() is None:
                proc.kill()  # our child, by pid
            proc.wait()
        for lines in self.sshd_log.values():
            lines.join(5)
        # Anything left in a host's namespace (a test failed): by pid, then the namespace.
        for ns in reversed(self._namespaces):
            r = run("ip", "netns", "pids", ns, check=False)
            pids = [int(p) for p in r.stdout.split()]
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            wait_pids_dead(pids, timeout=5)
        for ns in reversed(self._namespaces):
            r = run("ip", "netns", "del", ns, check=False)
            if r.returncode != 0:
                errors.append(f"netns del {ns}: {r.stderr.strip()}")
        self._namespaces = []
        for d in self._netns_dirs:
            shutil.rmtree(d, ignore_errors=True)
        self._netns_dirs = []
        for subnet in self._routes:
            r = run("ip", "route", "del", "unreachable", subnet, check=False)
            if r.returncode != 0:
                errors.append(f"route del {subnet}: {r.stderr.strip()}")
        self._routes = []
        if self._run_sshd_dir:
            try:
                os.rmdir("/run/sshd")
            except OSError:
                pass
            self._run_sshd_dir = False
        shutil.rmtree(self.tmp, ignore_errors=True)
        _reap_children()
        if errors:
            raise RuntimeError("; ".join(errors))


def _reap_children():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def prefixed(lines):
    out = []
    for line in lines:
        m = PREFIX_RE.match(line)
        if m:
            out.append((m.group("host"), int(m.group("rank")), m.group("text")))
    return out


def records(lines, kind="worker"):
    """The `kind key=value ...` lines printed by tests/ssh/programs, as dicts."""
    out = []
    for host, rank, text in prefixed(lines):
        if not text.startswith(kind + " "):
            continue
        rec = {"prefix_host": host, "prefix_rank": rank}
        for field in text.split()[1:]:
            k, _, v = field.partition("=")
            rec[k] = int(v) if v.lstrip("-").isdigit() else v
        out.append(rec)
    return out


class SshTestCase(unittest.TestCase):
    HOSTS = ["red01", "orange07", "purple11"]
    STOCK = False  # hosts as Debian installs them (Testbed's stock)

    @classmethod
    def setUpClass(cls):
        drun_path()
        reason = unavailable_reason()
        if reason:
            raise unittest.SkipTest(reason)
        become_subreaper()
        cls.bed = Testbed(cls.HOSTS, tag=cls.__name__[:4].lower(), stock=cls.STOCK).setup()

    @classmethod
    def tearDownClass(cls):
        bed = getattr(cls, "bed", None)
        if bed:
            bed.teardown()

    def setUp(self):
        self.procs = []
        self.addCleanup(self._cleanup)

    def _cleanup(self):
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def drun(self, args, **kw):
        p = self.bed.drun_run(args, **kw)
        self.procs.append(p)
        return p

    def finish(self, p, timeout=RUN_TIMEOUT):
        proc, lines = p
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            lines.join()
            self.fail(f"drun did not exit within {timeout}s\n{lines.describe()}")
        lines.join()
        return code

    def assertHostsClean(self, timeout=20):
        left = self.bed.wait_back_to_baseline(timeout=timeout)
        self.assertEqual(left, {}, "processes left on the hosts:\n" + self.bed.describe_hosts())


def main():
    unittest.main(verbosity=2)


if __name__ == "__main__":
    sys.exit("ssh_testlib.py is a library; run the test_*.py files")
