"""One job model, resolved once (issue 11), as a user sees it: the options of every mode
reach the workers with the values given (MASTER_PORT given is MASTER_PORT used, -x and
--env-file on one node, mpirun's process counts), and contradictions are refused in one
line before any worker starts.

Workers that need a real process group run tests/e2e/programs/allreduce_env.py under
Debian's PyTorch (init_process_group(gloo, env://) and an all_reduce). Several drun
processes on loopback play the nodes of a two-node job, each with its own --local-addr.
"""
import os
import socket

from drun_testlib import (DrunTestCase, base_env, free_port, load_json_files, main, program,
                          rank_lines, texts_of)

ALLREDUCE = program("allreduce_env.py")
DUMP_ENV = program("dump_env.py")


def free_port_pair(addr="127.0.0.1"):
    """A port P with P+1 also free: static jobs with --no-agent-store put the rendezvous on
    MASTER_PORT+1 (rank 0's worker binds MASTER_PORT itself)."""
    for _ in range(50):
        p = free_port(addr)
        if p >= 65535:
            continue
        try:
            with socket.socket() as s:
                s.bind((addr, p + 1))
        except OSError:
            continue
        return p
    raise AssertionError("no pair of free ports")


class JobModelTest(DrunTestCase):

    # -- helpers ---------------------------------------------------------------------------

    def assertRefused(self, run, *needles):
        """Exit 2, one line on stderr that starts with 'drun: ' and names every needle,
        no 'did you mean', and no worker output."""
        self.assertExit(run, 2)
        lines = [l for l in run.stderr_lines if l.strip()]
        self.assertEqual(len(lines), 1, f"expected one line\n{run.describe()}")
        self.assertTrue(lines[0].startswith("drun: "), run.describe())
        for needle in needles:
            self.assertIn(needle, lines[0], run.describe())
        self.assertNotIn("did you mean", lines[0])
        self.assertEqual(rank_lines(run.stdout_lines + run.stderr_lines), [], run.describe())
        return lines[0]

    def allreduce_records(self, run, world, outdir=None):
        """The workers' records, checked: `world` ranks, each agreeing on the sum."""
        outdir = outdir or self.tmp
        records = load_json_files(outdir, "allreduce_")
        self.assertEqual(sorted(records), sorted(f"allreduce_{r}.json" for r in range(world)),
                         run.describe() if run else "")
        expected = world * (world + 1) / 2
        for rec in records.values():
            self.assertEqual(rec["world"], world)
            self.assertEqual(rec["sum"], expected)
        return list(records.values())

    def assertMasterPort(self, records, port):
        for rec in records:
            self.assertEqual(rec["MASTER_PORT"], str(port), rec)

    def dump_env(self, *args, nproc=None, env=None):
        """Runs dump_env.py under drun with `args`; returns (run, {rank: worker env})."""
        run = self.drun(*args, DUMP_ENV, self.tmp, env=env)
        self.assertExit(run, 0)
        records = load_json_files(self.tmp, "env_")
        envs = {int(name[4:-5]): rec["env"] for name, rec in records.items()}
        if nproc is not None:
            self.assertEqual(sorted(envs), list(range(nproc)), run.describe())
        return run, envs

    # -- MASTER_PORT given is MASTER_PORT used: one node -----------------------------------

    def test_static_one_node_no_agent_store_master_port(self):
        port = free_port_pair()
        run = self.drun("--node-rank", "0", "--nnodes", "1", "--master-addr", "127.0.0.1",
                        "--master-port", port, "--no-agent-store", "--nproc-per-node", "2",
                        ALLREDUCE, self.tmp)
        self.assertExit(run, 0)
        self.assertMasterPort(self.allreduce_records(run, 2), port)

    def test_rdzv_backend_static_one_node_no_agent_store_master_port(self):
        port = free_port_pair()
        run = self.drun("--rdzv-backend", "static", "--nnodes", "1", "--master-addr",
                        "127.0.0.1", "--master-port", port, "--no-agent-store",
                        "--nproc-per-node", "2", ALLREDUCE, self.tmp)
        self.assertExit(run, 0)
        self.assertMasterPort(self.allreduce_records(run, 2), port)

    def test_static_one_node_agent_store_master_port(self):
        # The rendezvous and drun's store both on MASTER_PORT (torchrun's rule).
        port = free_port()
        run = self.drun("--node-rank", "0", "--nnodes", "1", "--master-addr", "127.0.0.1",
                        "--master-port", port, "--nproc-per-node", "2", ALLREDUCE, self.tmp)
        if run.returncode != 0 and "address already in use" in run.stderr.lower():
            self.skipTest("needs one-port serving (branch oneport)")
        self.assertExit(run, 0)
        self.assertMasterPort(self.allreduce_records(run, 2), port)

    def test_c10d_endpoint_with_master_port_one_node(self):
        rdzv, port = free_port(), free_port()
        run = self.drun("--nnodes", "1", "--rdzv-endpoint", f"127.0.0.1:{rdzv}",
                        "--master-port", port, "--nproc-per-node", "2", ALLREDUCE, self.tmp)
        self.assertExit(run, 0)
        self.assertMasterPort(self.allreduce_records(run, 2), port)

    def test_c10d_endpoint_with_master_port_no_agent_store_one_node(self):
        rdzv, port = free_port(), free_port()
        run = self.drun("--nnodes", "1", "--rdzv-endpoint", f"127.0.0.1:{rdzv}",
                        "--master-port", port, "--no-agent-store", "--nproc-per-node", "2",
                        ALLREDUCE, self.tmp)
        self.assertExit(run, 0)
        self.assertMasterPort(self.allreduce_records(run, 2), port)

    # -- MASTER_PORT given is MASTER_PORT used: two nodes on loopback ----------------------

    def run_two_nodes(self, node_args):
        """Starts one drun per entry of node_args (each its own --local-addr), waits for all;
        every one must exit 0."""
        runs = [self.start(*args, ALLREDUCE, self.tmp) for args in node_args]
        for run in runs:
            run.wait()
        for run in runs:
            self.assertExit(run, 0)
        return runs

    def test_master_port_reaches_workers_static_two_nodes(self):
        port = free_port_pair()
        common = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", port,
                  "--no-agent-store", "--nproc-per-node", "1"]
        runs = self.run_two_nodes([
            common + ["--node-rank", "0", "--local-addr", "127.0.0.1"],
            common + ["--node-rank", "1", "--local-addr", "127.0.0.2"],
        ])
        records = self.allreduce_records(runs[0], 2)
        self.assertMasterPort(records, port)
        self.assertEqual({r["MASTER_ADDR"] for r in records}, {"127.0.0.1"})

    def test_master_port_reaches_workers_static_two_nodes_agent_store(self):
        port = free_port()
        common = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", port,
                  "--nproc-per-node", "1"]
        runs = [self.start(*args, ALLREDUCE, self.tmp) for args in (
            common + ["--node-rank", "0", "--local-addr", "127.0.0.1"],
            common + ["--node-rank", "1", "--local-addr", "127.0.0.2"])]
        for run in runs:
            run.wait()
        if any(r.returncode != 0 and "address already in use" in r.stderr.lower() for r in runs):
            self.skipTest("needs one-port serving (branch oneport)")
        for run in runs:
            self.assertExit(run, 0)
        self.assertMasterPort(self.allreduce_records(runs[0], 2), port)

    def test_master_port_reaches_workers_c10d_two_nodes(self):
        rdzv, port = free_port(), free_port()
        common = ["--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{rdzv}", "--master-port",
                  port, "--nproc-per-node", "1"]
        runs = self.run_two_nodes([
            common + ["--local-addr", "127.0.0.1"],
            common + ["--local-addr", "127.0.0.2"],
        ])
        self.assertMasterPort(self.allreduce_records(runs[0], 2), port)

    # -- --rdzv-conf is_host -------------------------------------------------------------

    def test_is_host_spellings_make_the_node_host(self):
        # --local-addr 127.0.0.2 is not the endpoint's address: without is_host this node
        # would only be a client of 127.0.0.1:R, where nobody listens.
        for value in ("on", "yes", "True"):
            with self.subTest(is_host=value):
                rdzv = free_port()
                run = self.drun("--nnodes", "1", "--rdzv-endpoint", f"127.0.0.1:{rdzv}",
                                "--local-addr", "127.0.0.2", "--rdzv-conf", f"is_host={value}",
                                DUMP_ENV, self.tmp)
                self.assertExit(run, 0)

    # -- -x and --env-file on one node ---------------------------------------------------

    def test_x_and_env_file_reach_workers_on_one_node(self):
        env_file = os.path.join(self.tmp, "vars.env")
        with open(env_file, "w") as f:
            f.write("# comment\nBAR=from file\nexport BAZ='quoted value'\n")
        _, envs = self.dump_env("--nproc-per-node", "2", "-x", "FOO=1", "--env-file", env_file,
                                nproc=2)
        for rank, env in envs.items():
            self.assertEqual(env.get("FOO"), "1", rank)
            self.assertEqual(env.get("BAR"), "from file", rank)
            self.assertEqual(env.get("BAZ"), "quoted value", rank)

    def test_x_master_addr_notice_and_drun_value_wins(self):
        run, envs = self.dump_env("-x", "MASTER_ADDR=1.2.3.4", nproc=1)
        notices = [l for l in run.stderr_lines if "MASTER_ADDR" in l]
        self.assertEqual(len(notices), 1, run.describe())
        self.assertIn("--master-addr", notices[0])
        self.assertTrue(notices[0].startswith("drun: "), notices[0])
        self.assertEqual(envs[0]["MASTER_ADDR"], "127.0.0.1")

    # -- mpirun's process counts -----------------------------------------------------------

    def test_mpirun_counts(self):
        for args, n in ((["-np", "4"], 4), (["-N", "2"], 2), (["--npernode", "2"], 2),
                        (["-n", "2"], 2)):
            with self.subTest(args=args):
                for name in os.listdir(self.tmp):
                    os.unlink(os.path.join(self.tmp, name))
                _, envs = self.dump_env(*args, nproc=n)
                self.assertEqual({e["WORLD_SIZE"] for e in envs.values()}, {str(n)})

    def test_np_not_divisible_by_nodes_refused(self):
        run = self.drun("-np", "3", "--nnodes", "2", DUMP_ENV, self.tmp)
        self.assertRefused(run, "--nproc-per-node")

    def test_pet_nnodes_error_names_variable(self):
        run = self.drun(DUMP_ENV, self.tmp, env=base_env(PET_NNODES="2"))
        self.assertRefused(run, "PET_NNODES")

    # -- the entrypoint, checked before any worker starts ----------------------------------

    def test_standalone_python_train_py_refused_once(self):
        run = self.drun("--standalone", "--nproc-per-node", "2", "python", "train.py")
        self.assertRefused(run, "--no-python")

    def test_missing_script_refused_before_workers(self):
        run = self.drun("--nproc-per-node", "2", os.path.join(self.tmp, "missing.py"))
        self.assertRefused(run, "missing.py")

    def test_no_python_missing_program_refused_before_workers(self):
        run = self.drun("--no-python", "--nproc-per-node", "2", "nonexistent-prog-drun-e2e")
        self.assertRefused(run, "nonexistent-prog-drun-e2e")

    # -- --standalone's contradictions ---------------------------------------------------

    def test_standalone_nnodes_2_refused(self):
        run = self.drun("--standalone", "--nnodes", "2", DUMP_ENV, self.tmp)
        self.assertRefused(run, "--standalone", "--nnodes 2")

    def test_standalone_foreign_master_addr_refused(self):
        run = self.drun("--standalone", "--master-addr", "10.255.255.1", DUMP_ENV, self.tmp)
        self.assertRefused(run, "--master-addr 10.255.255.1", "not an address of this machine")

    def test_standalone_local_master_addr_honoured(self):
        port = free_port()
        run = self.drun("--standalone", "--master-addr", "127.0.0.1", "--master-port", port,
                        "--nproc-per-node", "2", ALLREDUCE, self.tmp)
        self.assertExit(run, 0)
        records = self.allreduce_records(run, 2)
        self.assertMasterPort(records, port)
        self.assertEqual({r["MASTER_ADDR"] for r in records}, {"127.0.0.1"})

    def test_standalone_other_loopback_master_addr_honoured(self):
        _, envs = self.dump_env("--standalone", "--master-addr", "127.0.0.2", nproc=1)
        self.assertEqual(envs[0]["MASTER_ADDR"], "127.0.0.2")

    # -- torchrun's other flags -------------------------------------------------------------

    def test_run_path_accepted(self):
        _, envs = self.dump_env("--run-path", "--nproc-per-node", "2", nproc=2)
        self.assertEqual(len(envs), 2)

    def test_local_ranks_filter_accepted(self):
        run = self.drun("--nproc-per-node", "2", "--local-ranks-filter", "0", DUMP_ENV, self.tmp)
        self.assertExit(run, 0)
        self.assertEqual(sorted(load_json_files(self.tmp, "env_")),
                         ["env_0.json", "env_1.json"])
        self.assertTrue(texts_of(run.stdout_lines, 0), run.describe())
        self.assertEqual(texts_of(run.stdout_lines, 1), [], run.describe())

    def test_torchrun2_flags_refused_with_reason(self):
        cases = (
            (["--logs-specs", "x"], "LogsSpecs"),
            (["--duplicate-stdout-filters", "x"], "-t keeps every line"),
            (["--event-log-handler", "null"], "--report"),
        )
        for args, reason in cases:
            with self.subTest(flag=args[0]):
                run = self.drun(*args, DUMP_ENV, self.tmp)
                self.assertRefused(run, f"{args[0]} is not supported", reason)


if __name__ == "__main__":
    main()
