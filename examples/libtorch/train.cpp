// A distributed LibTorch C++ trainer: data-parallel linear regression with c10d's TCPStore
// and ProcessGroupGloo, set up exactly as `init_process_group("gloo")` (env://) sets up a
// Python program. It is an ordinary user program: it knows nothing about drun and runs the
// same under torchrun.
//
//   drun --standalone --nproc-per-node 4 --no-python build/examples/libtorch/drun_libtorch_train
//
// Every rank fits y = 3x + 2 on its own synthetic shard; gradients are averaged with
// allreduce, so the replicas stay identical. At the end every rank prints
// `rank R final weights <w> <b>` and checks, with two more allreduces, that all ranks hold
// the same bits; the exit code is 1 if they do not.
//
// Environment (set by drun or torchrun for every worker):
//   MASTER_ADDR, MASTER_PORT   where the c10d store listens
//   RANK, WORLD_SIZE           this worker's global rank and the number of workers
//   LOCAL_RANK                 rank on this node (printed only; a GPU trainer picks its
//                              device with it)
//   TORCHELASTIC_USE_AGENT_STORE == "True"
//                              the launcher serves the store: every rank is a client and
//                              keys live under /worker/attempt_<TORCHELASTIC_RESTART_COUNT>
//                              (torch 1.13's env:// rendezvous; 2.x dropped the prefix, see
//                              kAttemptPrefix below). Otherwise rank 0 hosts the store on
//                              MASTER_PORT (torchrun 1.13 default, `drun --no-agent-store`).
//   GLOO_SOCKET_IFNAME         optional: the network interface gloo binds, as in Python.
//   TRAIN_STEPS, TRAIN_LR      optional: number of steps (40) and learning rate (0.1).

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace {

// torch 1.13's env:// handler puts every key of an agent-store job under this prefix (so
// the keys of a restarted attempt never meet the old ones). torch 2.x gets a fresh store per
// attempt and uses no prefix: set this to false to talk to 2.x workers on the same store.
constexpr bool kAttemptPrefix = true;

// Bounds, as torch's defaults: store operations (connecting, waiting for peers' keys) and
// collectives. A rank that never shows up turns into an exception, not a hang.
constexpr std::chrono::seconds kStoreTimeout{300};
constexpr std::chrono::minutes kCollectiveTimeout{30};

// The variable's value, or a one-line error naming it (the program was not started by a
// launcher) and exit code 2.
std::string RequireEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    std::fprintf(stderr,
                 "drun_libtorch_train: %s is not set; start me with a launcher, e.g. "
                 "drun --standalone --nproc-per-node 2 --no-python %s\n",
                 name, "drun_libtorch_train");
    std::exit(2);
  }
  return value;
}

std::string GetEnv(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return (value != nullptr && *value != '\0') ? std::string(value) : fallback;
}

// TCPStoreOptions::useLibUV (torch 2.3 on; true by default) asks for a libuv server that
// Debian's torch 2.6 and 2.14 are built without. As Python's env:// rendezvous does, the
// USE_LIBUV environment variable decides (unset: torch's default); torch 1.13 has no such
// option and ignores it.
template <class Options>
auto SetUseLibUV(Options& o, bool on, int) -> decltype(o.useLibUV = on, void()) {
  o.useLibUV = on;
}
template <class Options>
void SetUseLibUV(Options&, bool, long) {}

// Builds the store exactly as torch's `_create_c10d_store` (torch/distributed/rendezvous.py)
// does for env://, and returns the store the default process group uses.
c10::intrusive_ptr<c10d::Store> CreateStore(const std::string& master_addr, int master_port,
                                            int rank, int world_size) {
  const bool agent_store = GetEnv("TORCHELASTIC_USE_AGENT_STORE", "") == "True";

  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(master_port);
  // With an agent store nobody binds the port: rank 0 is a client like everyone else.
  // Otherwise rank 0 starts the server in this process and the others connect to it.
  opts.isServer = !agent_store && rank == 0;
  // Every rank announces itself (ADD "init/" 1); the server side (rank 0 when it hosts)
  // waits until all world_size ranks have.
  opts.numWorkers = static_cast<std::size_t>(world_size);
  opts.waitWorkers = true;
  opts.timeout = kStoreTimeout;
  opts.multiTenant = !agent_store;  // as torch: several stores in one process share a server
  SetUseLibUV(opts, GetEnv("USE_LIBUV", "1") != "0", 0);
  c10::intrusive_ptr<c10d::Store> store =
      c10::make_intrusive<c10d::TCPStore>(master_addr, opts);

  if (agent_store && kAttemptPrefix) {
    // torch 1.13 raises KeyError without it; a launcher always sets it.
    const std::string attempt = RequireEnv("TORCHELASTIC_RESTART_COUNT");
    store = c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + attempt, store);
  }
  // init_process_group's own prefixes: the default group, then its name ("0"), so the keys
  // match a Python rank's (e.g. /worker/attempt_0/default_pg/0/0/rank_1) and a C++ and a
  // Python trainer could even share one job.
  store = c10::make_intrusive<c10d::PrefixStore>("default_pg", store);
  return c10::make_intrusive<c10d::PrefixStore>("0", store);
}

// The gloo transport device: the interface named by GLOO_SOCKET_IFNAME if set, else this
// host's name as it resolves (loopback if it does not), which is what Python uses.
std::shared_ptr<::gloo::transport::Device> CreateDevice() {
  const std::string ifname = GetEnv("GLOO_SOCKET_IFNAME", "");
  if (!ifname.empty()) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// In-place allreduce of one tensor; blocks until it is done (throws on a peer's failure).
// Takes the gloo group itself: a c10d::ProcessGroup in torch 1.x, a c10d::Backend from 2.0 on
// (where ProcessGroupGloo.hpp no longer declares ProcessGroup), with the same allreduce.
void Allreduce(c10d::ProcessGroupGloo& pg, torch::Tensor& tensor,
               c10d::ReduceOp op = c10d::ReduceOp::SUM) {
  std::vector<torch::Tensor> tensors{tensor};
  c10d::AllreduceOptions opts;
  opts.reduceOp = op;
  pg.allreduce(tensors, opts)->wait();
}

int Train() {
  // 1. Who am I? Exactly the variables torchrun documents.
  const std::string master_addr = RequireEnv("MASTER_ADDR");
  const int master_port = std::stoi(RequireEnv("MASTER_PORT"));
  const int rank = std::stoi(RequireEnv("RANK"));
  const int world_size = std::stoi(RequireEnv("WORLD_SIZE"));
  const int local_rank = std::stoi(GetEnv("LOCAL_RANK", "0"));
  const int steps = std::stoi(GetEnv("TRAIN_STEPS", "40"));
  const double lr = std::stod(GetEnv("TRAIN_LR", "0.1"));

  // 2. The store and the process group (what init_process_group("gloo") does).
  auto store = CreateStore(master_addr, master_port, rank, world_size);
  auto options = c10d::ProcessGroupGloo::Options::create(kCollectiveTimeout);
  options->devices.push_back(CreateDevice());
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
  std::printf("rank %d/%d local_rank %d: process group ready (store %s:%d, %s)\n", rank,
              world_size, local_rank, master_addr.c_str(), master_port,
              GetEnv("TORCHELASTIC_USE_AGENT_STORE", "") == "True" ? "agent store"
                                                                   : "rank 0 hosts the store");

  // 3. Model and data. Seeding by rank gives every rank its own data shard and, on purpose,
  // its own initial weights: the broadcast below makes the replicas equal, as DDP does.
  torch::manual_seed(rank);
  torch::nn::Linear model(1, 1);
  const torch::Tensor x = torch::randn({64, 1});
  const torch::Tensor y = 3.0 * x + 2.0 + 0.1 * torch::randn({64, 1});

  {
    torch::NoGradGuard no_grad;
    for (auto& param : model->parameters()) {
      std::vector<torch::Tensor> tensors{param};
      c10d::BroadcastOptions opts;
      opts.rootRank = 0;
      pg->broadcast(tensors, opts)->wait();
    }
  }

  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(lr));

  // 4. Training: the local gradient, averaged over all ranks with allreduce (DDP does the
  // same, bucketed and overlapped with backward), then the same step on every replica.
  for (int step = 1; step <= steps; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    for (auto& param : model->parameters()) {
      torch::Tensor grad = param.grad();
      Allreduce(*pg, grad);
      grad.div_(world_size);
    }
    optimizer.step();
    std::printf("rank %d/%d step %d loss %.6f\n", rank, world_size, step, loss.item<double>());
  }

  // 5. Result and the check that every rank holds the same bits: the elementwise MAX and
  // MIN over all ranks equal this rank's values only if everyone agrees.
  torch::Tensor weights =
      torch::cat({model->weight.detach().flatten(), model->bias.detach().flatten()});
  std::printf("rank %d final weights %.9g %.9g\n", rank, weights[0].item<double>(),
              weights[1].item<double>());
  torch::Tensor max = weights.clone();
  torch::Tensor min = weights.clone();
  Allreduce(*pg, max, c10d::ReduceOp::MAX);
  Allreduce(*pg, min, c10d::ReduceOp::MIN);
  const bool agree = torch::equal(max, weights) && torch::equal(min, weights);

  // Everyone reaches this point before anyone tears down: when rank 0 hosts the store, its
  // exit closes the store under the other ranks' feet.
  pg->barrier()->wait();

  if (!agree) {
    std::fprintf(stderr, "rank %d: final weights differ across ranks (min %s, max %s)\n", rank,
                 torch::str(min).c_str(), torch::str(max).c_str());
    return 1;
  }
  std::printf("rank %d: all %d ranks hold identical weights\n", rank, world_size);
  return 0;
}

}  // namespace

int main() {
  // Line-buffered even into the launcher's pipe, so progress shows while training runs.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    return Train();
  } catch (const std::exception& e) {
    // c10::Error's what() carries a C++ backtrace; its first line says what happened.
    std::string what = e.what();
    std::fprintf(stderr, "drun_libtorch_train: %s\n", what.substr(0, what.find('\n')).c_str());
    return 1;
  }
}
