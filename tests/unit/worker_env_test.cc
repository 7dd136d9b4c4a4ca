#include "agent/worker_env.h"

#include <gtest/gtest.h>

#include "agent/handled_signals.h"

namespace drun {
namespace {

v1::Assignment TwoNodeAssignment() {
  v1::Assignment a;
  a.set_round(2);
  a.set_group_rank(1);
  a.set_group_world_size(2);
  a.set_rank_offset(4);
  a.set_world_size(7);
  a.set_restart_count(1);
  a.set_master_addr("10.0.0.1");
  a.set_master_port(29500);
  return a;
}

TEST(WorkerEnvTest, TorchrunsFullSet) {
  v1::JobSpec spec;
  spec.set_run_id("job7");
  spec.set_max_restarts(3);
  spec.set_role("trainer");
  WorkerEnvInput in;
  in.local_rank = 2;
  in.local_world_size = 3;
  in.error_file = "/tmp/e.json";
  EnvMap env = BuildWorkerEnv({{"HOME", "/root"}}, spec, TwoNodeAssignment(), in);
  EnvMap want = {{"LOCAL_RANK", "2"},
                 {"RANK", "6"},
                 {"GROUP_RANK", "1"},
                 {"ROLE_RANK", "6"},
                 {"ROLE_NAME", "trainer"},
                 {"LOCAL_WORLD_SIZE", "3"},
                 {"WORLD_SIZE", "7"},
                 {"GROUP_WORLD_SIZE", "2"},
                 {"ROLE_WORLD_SIZE", "7"},
                 {"MASTER_ADDR", "10.0.0.1"},
                 {"MASTER_PORT", "29500"},
                 {"TORCHELASTIC_RESTART_COUNT", "1"},
                 {"TORCHELASTIC_MAX_RESTARTS", "3"},
                 {"TORCHELASTIC_RUN_ID", "job7"},
                 {"TORCHELASTIC_USE_AGENT_STORE", "False"},
                 {"TORCHELASTIC_ERROR_FILE", "/tmp/e.json"},
                 {"TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGINT,SIGTERM,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2"},
                 {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
                 {"NCCL_ASYNC_ERROR_HANDLING", "1"},
                 {"OMP_NUM_THREADS", "1"},
                 {"HOME", "/root"}};
  EXPECT_EQ(env, want);
}

TEST(WorkerEnvTest, UserChoicesAreKept) {
  v1::JobSpec spec;
  (*spec.mutable_env())["FORWARDED"] = "x";
  (*spec.mutable_env())["NCCL_ASYNC_ERROR_HANDLING"] = "0";
  WorkerEnvInput in;
  in.local_world_size = 4;
  v1::Assignment a = TwoNodeAssignment();
  a.set_use_agent_store(true);
  EnvMap env = BuildWorkerEnv({{"OMP_NUM_THREADS", "8"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"},
                               {"RANK", "stale"}},
                              spec, a, in);
  EXPECT_EQ(env["OMP_NUM_THREADS"], "8");
  EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "3");
  EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "0");
  EXPECT_EQ(env["FORWARDED"], "x");
  EXPECT_EQ(env["RANK"], "4");
  EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "True");
  EXPECT_EQ(env["ROLE_NAME"], "default");
}

TEST(WorkerEnvTest, OneWorkerLeavesOmpAloneAndGpuIsNarrowed) {
  v1::JobSpec spec;
  WorkerEnvInput in;
  in.local_world_size = 1;
  in.cuda_visible_device = "5";
  EnvMap env = BuildWorkerEnv({}, spec, TwoNodeAssignment(), in);
  EXPECT_EQ(env.count("OMP_NUM_THREADS"), 0u);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "5");
}

TEST(WorkerEnvTest, VirtualLocalRankGivesEveryWorkerLocalRankZeroAndItsOwnGpu) {
  v1::JobSpec spec;
  spec.set_virtual_local_rank(true);
  WorkerEnvInput in;
  in.local_rank = 3;
  in.local_world_size = 4;
  in.cuda_visible_device = "6";
  EnvMap env = BuildWorkerEnv({{"CUDA_VISIBLE_DEVICES", "0,2,4,6"}}, spec, TwoNodeAssignment(), in);
  EXPECT_EQ(env["LOCAL_RANK"], "0");
  EXPECT_EQ(env["RANK"], "7");  // the global rank stays the real one
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "6");
}

TEST(WorkerEnvTest, NumaBindingThreadsUnlessTheUserChose) {
  v1::JobSpec spec;
  WorkerEnvInput in;
  in.local_world_size = 2;
  in.omp_threads = 8;
  EXPECT_EQ(BuildWorkerEnv({}, spec, TwoNodeAssignment(), in)["OMP_NUM_THREADS"], "8");
  EXPECT_EQ(BuildWorkerEnv({{"OMP_NUM_THREADS", "3"}}, spec, TwoNodeAssignment(), in)["OMP_NUM_THREADS"], "3");
  (*spec.mutable_env())["OMP_NUM_THREADS"] = "5";
  EXPECT_EQ(BuildWorkerEnv({}, spec, TwoNodeAssignment(), in)["OMP_NUM_THREADS"], "5");
  // One worker, placed: its share too.
  v1::JobSpec plain;
  in.local_world_size = 1;
  in.omp_threads = 2;
  EXPECT_EQ(BuildWorkerEnv({}, plain, TwoNodeAssignment(), in)["OMP_NUM_THREADS"], "2");
}

TEST(WorkerEnvTest, SignalsToHandleReachTheWorkers) {
  v1::JobSpec spec;
  spec.add_signals_to_handle(SIGTERM);
  spec.add_signals_to_handle(SIGUSR1);
  EnvMap env = BuildWorkerEnv({}, spec, TwoNodeAssignment(), WorkerEnvInput{});
  EXPECT_EQ(env["TORCHELASTIC_SIGNALS_TO_HANDLE"], "SIGTERM,SIGUSR1");
}

TEST(HandledSignalsTest, ParsesTorchrunsSpellingAndOthers) {
  EXPECT_EQ(*ParseSignalList("SIGTERM,SIGINT,SIGHUP,SIGQUIT"), TorchrunDefaultSignals());
  EXPECT_EQ(*ParseSignalList(" term, usr1 ,SIGTERM,12"), (std::vector<int>{SIGTERM, SIGUSR1, SIGUSR2}));
  for (const char* bad : {"", ",", "SIGKILL", "SIGALRM", "TERM;INT", "99"}) {
    auto r = ParseSignalList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("SIGINT,SIGTERM,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2"), std::string::npos)
        << r.status().message();
  }
}

TEST(HandledSignalsTest, DefaultIsEveryForwardableSignal) {
  v1::JobSpec spec;
  for (int sig : ForwardableSignals()) EXPECT_TRUE(HandlesSignal(spec, sig)) << sig;
  spec.add_signals_to_handle(SIGTERM);
  EXPECT_TRUE(HandlesSignal(spec, SIGTERM));
  EXPECT_FALSE(HandlesSignal(spec, SIGUSR1));
  EXPECT_FALSE(HandlesSignal(spec, SIGINT));
}

TEST(WorkerEnvTest, EnvironRoundTrip) {
  char a[] = "A=1", b[] = "B=x=y", c[] = "NOEQ";
  char* environ[] = {a, b, c, nullptr};
  EnvMap m = EnvironToMap(environ);
  EXPECT_EQ(m, (EnvMap{{"A", "1"}, {"B", "x=y"}}));
  EXPECT_EQ(EnvToList(m), (std::vector<std::string>{"A=1", "B=x=y"}));
}

}  // namespace
}  // namespace drun
