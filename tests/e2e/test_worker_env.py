"""The environment drun gives its workers: exactly torchrun's variables on top of drun's
own environment, with the values a single-node job should have."""
import os
import re
import signal
import socket

from drun_testlib import (DrunTestCase, base_env, example, load_json_files, main, program,
                          rank_lines, wait_pids_dead)

TORCHRUN_VARS = {
    "LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
    "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_SIGNALS_TO_HANDLE",
    # torchrun 1.13's name, the only one Debian 12's torch 1.13 reads (drun probes the
    # workers' torch; 2.x gets TORCH_NCCL_ASYNC_ERROR_HANDLING instead: tests/compat).
    "NCCL_ASYNC_ERROR_HANDLING",
}
# A launcher may implement python -u by setting this instead of (or as well as) passing -u.
OPTIONAL_VARS = {"PYTHONUNBUFFERED"}
AGENT_VAR = "DRUN_E2E_AGENT_VAR"
AGENT_VALUE = "passes through: spaces, 'quotes', $dollar; semicolon"


class WorkerEnvTest(DrunTestCase):

    def dump_env(self, nproc, *flags, env=None):
        """Runs dump_env.py under drun; returns ({rank: record}, agent_env)."""
        agent_env = env if env is not None else base_env()
        run = self.drun("--standalone", "--nproc-per-node", nproc, *flags,
                        program("dump_env.py"), self.tmp, env=agent_env)
        self.assertExit(run, 0)
        records = load_json_files(self.tmp, "env_")
        self.assertEqual(sorted(records), sorted(f"env_{r}.json" for r in range(nproc)),
                         run.describe())
        return {int(name[4:-5]): rec for name, rec in records.items()}, agent_env

    def assertEnvSet(self, env, agent_env, expected_new):
        added = set(env) - set(agent_env)
        self.assertEqual(added - OPTIONAL_VARS, expected_new,
                         f"variables drun added differ from torchrun's set")
        for key, value in agent_env.items():
            if key in OPTIONAL_VARS:
                continue
            self.assertEqual(env.get(key), value, f"agent variable {key} not passed through")

    def test_default_environment_is_torchruns(self):
        agent_env = base_env(PYTHONUNBUFFERED=None, OMP_NUM_THREADS=None)
        agent_env[AGENT_VAR] = AGENT_VALUE
        records, agent_env = self.dump_env(4, env=agent_env)
        ports, run_ids, error_files = set(), set(), set()
        for rank, record in records.items():
            env = record["env"]
            with self.subTest(rank=rank):
                self.assertEnvSet(env, agent_env, TORCHRUN_VARS | {"OMP_NUM_THREADS"})
                self.assertEqual(env[AGENT_VAR], AGENT_VALUE)
                self.assertEqual(env["RANK"], str(rank))
                self.assertEqual(env["LOCAL_RANK"], str(rank))
                self.assertEqual(env["ROLE_RANK"], str(rank))
                self.assertEqual(env["GROUP_RANK"], "0")
                self.assertEqual(env["ROLE_NAME"], "default")
                for key in ("LOCAL_WORLD_SIZE", "WORLD_SIZE", "ROLE_WORLD_SIZE"):
                    self.assertEqual(env[key], "4", key)
                self.assertEqual(env["GROUP_WORLD_SIZE"], "1")
                self.assertEqual(env["MASTER_ADDR"], "127.0.0.1")
                self.assertRegex(env["MASTER_PORT"], r"^[0-9]+$")
                self.assertTrue(0 < int(env["MASTER_PORT"]) < 65536)
                self.assertEqual(env["TORCHELASTIC_RESTART_COUNT"], "0")
                self.assertEqual(env["TORCHELASTIC_MAX_RESTARTS"], "0")
                self.assertTrue(env["TORCHELASTIC_RUN_ID"])
                self.assertIn(env["TORCHELASTIC_USE_AGENT_STORE"], ("True", "False"))
                self.assertTrue(os.path.isabs(env["TORCHELASTIC_ERROR_FILE"]),
                                env["TORCHELASTIC_ERROR_FILE"])
                self.assertNotIn("TORCH_NCCL_ASYNC_ERROR_HANDLING", env)
                self.assertEqual(env["NCCL_ASYNC_ERROR_HANDLING"], "1")
                self.assertEqual(env["OMP_NUM_THREADS"], "1")
                self.assertNotIn("CUDA_VISIBLE_DEVICES", env)
                self.assertTrue(record["stdout_write_through"],
                                "worker stdout is buffered: no -u, no PYTHONUNBUFFERED")
                self.assertTrue(record["stderr_write_through"])
            ports.add(env["MASTER_PORT"])
            run_ids.add(env["TORCHELASTIC_RUN_ID"])
            error_files.add(env["TORCHELASTIC_ERROR_FILE"])
        self.assertEqual(len(ports), 1, "ranks disagree on MASTER_PORT")
        self.assertEqual(len(run_ids), 1, "ranks disagree on TORCHELASTIC_RUN_ID")
        self.assertEqual(len(error_files), 4, "ranks share an error file")

    def test_flags_and_user_values_win(self):
        agent_env = base_env(OMP_NUM_THREADS="7", NCCL_ASYNC_ERROR_HANDLING="0",
                             TORCH_NCCL_ASYNC_ERROR_HANDLING="2")
        records, agent_env = self.dump_env(2, "--role", "trainer", "--run-id", "e2e-run-42",
                                           "--max-restarts", "3", env=agent_env)
        for rank, record in records.items():
            env = record["env"]
            with self.subTest(rank=rank):
                self.assertEnvSet(env, agent_env, TORCHRUN_VARS - {"NCCL_ASYNC_ERROR_HANDLING"})
                self.assertEqual(env["ROLE_NAME"], "trainer")
                self.assertEqual(env["TORCHELASTIC_RUN_ID"], "e2e-run-42")
                self.assertEqual(env["TORCHELASTIC_MAX_RESTARTS"], "3")
                self.assertEqual(env["TORCHELASTIC_RESTART_COUNT"], "0")
                self.assertEqual(env["OMP_NUM_THREADS"], "7")
                self.assertEqual(env["NCCL_ASYNC_ERROR_HANDLING"], "0")
                self.assertEqual(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "2")
                self.assertEqual(env["WORLD_SIZE"], "2")

    def test_a_users_nccl_error_handling_under_either_name_stands_alone(self):
        agent_env = base_env(TORCH_NCCL_ASYNC_ERROR_HANDLING="3")
        records, agent_env = self.dump_env(1, env=agent_env)
        env = records[0]["env"]
        self.assertEqual(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "3")
        self.assertNotIn("NCCL_ASYNC_ERROR_HANDLING", env)

    def test_use_libuv_0_gives_rank0s_store_and_the_job_runs(self):
        """torch's advice for a torch without libuv, USE_LIBUV=0: rank 0 hosts the store
        (torch 1.13 has no libuv and runs either way; tests/compat runs 2.6 and 2.14)."""
        for flags, env in ((("-x", "USE_LIBUV=0"), base_env()), ((), base_env(USE_LIBUV="0"))):
            run = self.drun("--standalone", "--nproc-per-node", 2, *flags,
                            program("dump_env.py"), self.tmp, env=env)
            self.assertExit(run, 0)
            notices = [l for l in run.stderr_lines if "rank 0's torch hosts the workers' store" in l]
            self.assertEqual(len(notices), 1, run.describe())
            records = load_json_files(self.tmp, "env_")
            self.assertEqual(len(records), 2, run.describe())
            for rec in records.values():
                self.assertEqual(rec["env"]["TORCHELASTIC_USE_AGENT_STORE"], "False")
                self.assertEqual(rec["env"]["USE_LIBUV"], "0")
        # An all_reduce through rank 0's store, as a DDP job starts.
        run = self.drun("--standalone", "--nproc-per-node", 2, example("p2p_all_reduce.py"),
                        env=base_env(USE_LIBUV="0"))
        self.assertExit(run, 0)
        for rank in range(2):
            self.assertIn(f"Rank {rank}: Sum of all messages is 1",
                          [t for r, t in rank_lines(run.stdout_lines) if r == rank], run.describe())

    def test_iface_sets_the_socket_interface_on_one_node_too(self):
        # One node sets no interface by itself (the default test above); --iface means the
        # same in every mode: by name or by subnet, over what drun's environment says.
        for choice in ("lo", "127.0.0.0/8"):
            agent_env = base_env(GLOO_SOCKET_IFNAME="eth9")
            records, _ = self.dump_env(1, "--iface", choice, env=agent_env)
            env = records[0]["env"]
            self.assertEqual((env["GLOO_SOCKET_IFNAME"], env["NCCL_SOCKET_IFNAME"]), ("lo", "lo"))
            for f in os.listdir(self.tmp):
                os.unlink(os.path.join(self.tmp, f))
        run = self.drun("--iface", "lo", "--nproc-per-node", "1", program("dump_env.py"), self.tmp)
        self.assertIn("drun: gloo and NCCL use interface lo (--iface lo)", run.stderr_lines)

    def test_iface_naming_no_interface_here_is_one_line_before_any_worker(self):
        run = self.drun("--iface", "nosuch0", "--nproc-per-node", "2", program("dump_env.py"), self.tmp)
        self.assertExit(run, 2)
        self.assertEqual(run.stderr_lines, [f"drun: --iface nosuch0 on {socket.gethostname()}: this machine has "
                                            "no network interface nosuch0"])
        self.assertEqual(os.listdir(self.tmp), [])
        run = self.drun("--iface", "10.213.250.0/24", program("dump_env.py"), self.tmp)
        self.assertExit(run, 2)
        self.assertIn("no network interface of this machine has an address in 10.213.250.0/24",
                      run.stderr_lines[0])

    def test_single_worker_gets_no_omp_num_threads(self):
        agent_env = base_env(OMP_NUM_THREADS=None)
        records, agent_env = self.dump_env(1, "--rdzv-id", "e2e-rdzv-id", env=agent_env)
        env = records[0]["env"]
        self.assertEnvSet(env, agent_env, TORCHRUN_VARS)
        self.assertNotIn("OMP_NUM_THREADS", env)
        self.assertEqual(env["TORCHELASTIC_RUN_ID"], "e2e-rdzv-id")
        self.assertEqual(env["WORLD_SIZE"], "1")

    def test_module_flag_runs_python_module(self):
        agent_env = base_env(PYTHONPATH=os.path.dirname(program("dump_env.py")))
        for flag in ("-m", "--module"):
            with self.subTest(flag=flag):
                run = self.drun("--standalone", "--nproc-per-node", 2, flag, "dump_env",
                                self.tmp, env=agent_env)
                self.assertExit(run, 0)
                records = load_json_files(self.tmp, "env_")
                self.assertEqual(sorted(records), ["env_0.json", "env_1.json"])
                self.assertEqual(records["env_1.json"]["argv"][1:], [self.tmp])
                for name in records:
                    os.unlink(os.path.join(self.tmp, name))

    def test_gpu_list_on_a_node_without_gpus_is_refused(self):
        # This machine has no GPU: gpu:1,3,5 is refused as gpu is, in one line, before any
        # worker starts (the CUDA_VISIBLE_DEVICES mapping of a GPU list is covered by
        # worker_env_test). Before, it ran three CPU workers.
        run = self.drun("--standalone", "--nproc-per-node", "gpu:1,3,5", "--no-python",
                        "/bin/sh", "-c", 'echo "worker $LOCAL_RANK ran"',
                        env=base_env(CUDA_VISIBLE_DEVICES=None))
        self.assertExit(run, 2)
        self.assertEqual(run.stdout_lines, [], run.describe())
        self.assertIn("drun: --nproc-per-node gpu:1,3,5: no GPU found on this node; use a number, "
                      "cpu or auto", run.stderr_lines, run.describe())

    def test_virtual_local_rank_gives_every_worker_local_rank_0_and_its_own_gpu(self):
        show = 'echo "local=$LOCAL_RANK rank=$RANK lws=$LOCAL_WORLD_SIZE cvd=$CUDA_VISIBLE_DEVICES"'
        for flag_env, agent_cvd, want in (
                ({}, None, ["0", "1", "2"]),                       # GPU i for local rank i
                ({}, "4,6,7", ["4", "6", "7"]),                    # the i-th visible one
                ({"PET_VIRTUAL_LOCAL_RANK": "1"}, "3,2,1", ["3", "2", "1"])):  # torchrun's twin
            with self.subTest(cvd=agent_cvd):
                env = base_env(CUDA_VISIBLE_DEVICES=agent_cvd, **flag_env)
                flags = [] if flag_env else ["--virtual-local-rank"]
                run = self.drun("--standalone", "--nproc-per-node", 3, *flags, "--no-python",
                                "/bin/sh", "-c", show, env=env)
                self.assertExit(run, 0)
                self.assertEqual(sorted(rank_lines(run.stdout_lines)),
                                 [(r, f"local=0 rank={r} lws=3 cvd={want[r]}") for r in range(3)],
                                 run.describe())

    def test_virtual_local_rank_past_the_visible_gpus_fails_the_start(self):
        run = self.drun("--standalone", "--nproc-per-node", 3, "--virtual-local-rank", "--no-python",
                        "/bin/true", env=base_env(CUDA_VISIBLE_DEVICES="0,1"))
        self.assertNotEqual(run.returncode, 0, run.describe())
        self.assertIn("drun: cannot start workers: --virtual-local-rank: local rank 2 has no GPU in "
                      "CUDA_VISIBLE_DEVICES=0,1", run.stderr_lines, run.describe())
        self.assertNotIn("node-setup", run.stderr, run.describe())

    def cores_of(self, cpus):
        """The physical cores (lowest SMT sibling) of `cpus`, from /sys."""
        cores = set()
        for cpu in cpus:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") as f:
                cores.add(int(re.split("[,-]", f.read().strip())[0]))
        return cores

    def test_numa_binding_exclusive_gives_each_worker_its_own_cpus(self):
        allowed = set(os.sched_getaffinity(0))
        nproc = min(2, len(self.cores_of(allowed)))
        records, _ = self.dump_env(nproc, "--numa-binding", "exclusive",
                                   env=base_env(OMP_NUM_THREADS=None))
        seen = set()
        for rank, record in sorted(records.items()):
            cpus = set(record["affinity"])
            with self.subTest(rank=rank):
                self.assertTrue(cpus, "no CPU")
                self.assertFalse(cpus & seen, f"rank {rank} shares CPUs {cpus & seen}")
                self.assertEqual(record["env"]["OMP_NUM_THREADS"], str(len(self.cores_of(cpus))))
                self.assertEqual(record["env"]["LOCAL_RANK"], str(rank))
            seen |= cpus
        self.assertEqual(seen, allowed, "the shares do not cover the CPUs drun may use")

    def test_numa_binding_keeps_the_users_omp_num_threads_and_shares_cores_in_turn(self):
        allowed = sorted(os.sched_getaffinity(0))
        cores = self.cores_of(allowed)
        nproc = 2 * len(cores)  # more workers than cores: one core each, in turn
        records, _ = self.dump_env(nproc, "--numa-binding=exclusive",
                                   env=base_env(OMP_NUM_THREADS="3"))
        for rank, record in records.items():
            with self.subTest(rank=rank):
                self.assertEqual(len(self.cores_of(record["affinity"])), 1, record["affinity"])
                self.assertEqual(record["env"]["OMP_NUM_THREADS"], "3")
        self.assertEqual(records[0]["affinity"], records[len(cores)]["affinity"])

    def test_without_numa_binding_workers_keep_drun_affinity(self):
        records, _ = self.dump_env(2)
        for record in records.values():
            self.assertEqual(set(record["affinity"]), set(os.sched_getaffinity(0)))

    def test_numa_binding_takes_torchruns_values_only(self):
        run = self.drun("--numa-binding", "cores", "--nproc-per-node", 2, program("dump_env.py"), self.tmp)
        self.assertExit(run, 2)
        self.assertEqual(run.stderr_lines, ["drun: --numa-binding: 'cores' is not a binding; write node, "
                                            "socket, exclusive or core-complex"])
        self.assertEqual(os.listdir(self.tmp), [])

    def start_probe(self, *flags):
        """drun running signal_probe.py on 2 workers, each ready; returns (drun, worker pids)."""
        p = self.start("--standalone", "--nproc-per-node", 2, *flags, program("signal_probe.py"),
                       self.tmp)
        ready = p.wait_for_line(r"ready \d+ \d+$", count=2)
        return p, [int(line.split()[-1]) for line in ready]

    def got(self):
        return sorted(name for name in os.listdir(self.tmp) if name.startswith("got_"))

    def test_a_signal_in_signals_to_handle_is_forwarded(self):
        for flags in ((), ("--signals-to-handle", "SIGTERM,SIGUSR1"), ("--signals_to_handle=usr1",)):
            with self.subTest(flags=flags):
                p, _ = self.start_probe(*flags)
                p.send_signal(signal.SIGUSR1)
                self.assertEqual(p.wait(), 0, p.describe())
                self.assertEqual(self.got(), ["got_SIGUSR1_0", "got_SIGUSR1_1"])
                for name in self.got():
                    os.unlink(os.path.join(self.tmp, name))

    def test_a_signal_not_in_signals_to_handle_is_not_forwarded(self):
        # torchrun's default list: SIGUSR1's default action ends drun itself; the guardian
        # kills the workers, which never see the signal.
        for flags, sig in ((("--signals-to-handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT"), signal.SIGUSR1),
                           (("--signals-to-handle", "SIGUSR1"), signal.SIGTERM)):
            with self.subTest(signal=sig.name):
                p, pids = self.start_probe(*flags)
                p.send_signal(sig)
                self.assertEqual(p.wait(), -sig, p.describe())
                self.assertEqual(wait_pids_dead(pids, marker="signal_probe.py"), [])
                self.assertEqual(self.got(), [])

    def test_workers_see_the_signals_to_handle(self):
        records, _ = self.dump_env(1, "--signals-to-handle", "SIGTERM,SIGUSR2")
        self.assertEqual(records[0]["env"]["TORCHELASTIC_SIGNALS_TO_HANDLE"], "SIGTERM,SIGUSR2")
        run = self.drun("--signals-to-handle", "SIGTERM,SIGALRM", program("dump_env.py"), self.tmp)
        self.assertExit(run, 2)
        self.assertEqual(run.stderr_lines, ["drun: --signals-to-handle: 'SIGALRM' is not a signal drun can "
                                            "handle; write a list of SIGINT,SIGTERM,SIGHUP,SIGQUIT,"
                                            "SIGUSR1,SIGUSR2"])


if __name__ == "__main__":
    main()
