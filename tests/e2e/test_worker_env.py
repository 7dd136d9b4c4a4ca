"""The environment drun gives its workers: exactly torchrun's variables on top of drun's
own environment, with the values a single-node job should have."""
import os
import socket

from drun_testlib import (DrunTestCase, base_env, load_json_files, main, program,
                          rank_lines)

TORCHRUN_VARS = {
    "LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
    "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING",
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
                self.assertEqual(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1")
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
                self.assertEnvSet(env, agent_env, TORCHRUN_VARS - {
                    "NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"})
                self.assertEqual(env["ROLE_NAME"], "trainer")
                self.assertEqual(env["TORCHELASTIC_RUN_ID"], "e2e-run-42")
                self.assertEqual(env["TORCHELASTIC_MAX_RESTARTS"], "3")
                self.assertEqual(env["TORCHELASTIC_RESTART_COUNT"], "0")
                self.assertEqual(env["OMP_NUM_THREADS"], "7")
                self.assertEqual(env["NCCL_ASYNC_ERROR_HANDLING"], "0")
                self.assertEqual(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "2")
                self.assertEqual(env["WORLD_SIZE"], "2")

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

    def test_gpu_list_sets_cuda_visible_devices(self):
        run = self.drun("--standalone", "--nproc-per-node", "gpu:1,3,5", "--no-python",
                        "/bin/sh", "-c",
                        'echo "local=$LOCAL_RANK world=$WORLD_SIZE cvd=$CUDA_VISIBLE_DEVICES"')
        self.assertExit(run, 0)
        got = sorted(rank_lines(run.stdout_lines))
        self.assertEqual(got, [(0, "local=0 world=3 cvd=1"), (1, "local=1 world=3 cvd=3"),
                               (2, "local=2 world=3 cvd=5")], run.describe())


if __name__ == "__main__":
    main()
