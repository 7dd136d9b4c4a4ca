#include "launcher/job/man_page.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "launcher/job/cli.h"

namespace drun {
namespace {

// Text for troff: backslashes become \e, and '-' in option-like words (--nnodes, -H) becomes
// \- so the rendered page shows ASCII hyphens that can be copied into a shell.
std::string Esc(absl::string_view text) {
  std::string out;
  bool word_start = true;
  bool in_option = false;
  for (char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-' && (word_start || in_option)) {
      out += "\\-";
      in_option = true;
    } else {
      out += c;
      in_option = in_option && c != ' ' && c != ',' && c != ')' && c != ';';
    }
    word_start = c == ' ' || c == '(' || c == '\'' || c == '/' || c == '[';
  }
  return out;
}

// A line of running text: a leading '.' or '\'' would read as a request.
std::string Line(absl::string_view text) {
  std::string s = Esc(text);
  if (!s.empty() && (s[0] == '.' || s[0] == '\'')) s.insert(0, "\\&");
  return s + "\n";
}

std::string Bold(absl::string_view s) { return absl::StrCat("\\fB", Esc(s), "\\fR"); }
std::string Italic(absl::string_view s) { return absl::StrCat("\\fI", Esc(s), "\\fR"); }

// An option name in bold, every '-' escaped (option names hold no backslashes).
std::string OptText(absl::string_view s) {
  return absl::StrCat("\\fB", absl::StrReplaceAll(s, {{"-", "\\-"}}), "\\fR");
}

std::string GroupTitle(const std::string& group) {
  if (group == "ssh") return "SSH options";
  std::string t = group;
  t[0] = absl::ascii_toupper(static_cast<unsigned char>(t[0]));
  return t + " options";
}

// A paragraph of example commands, kept as typed.
std::string Example(absl::string_view comment, absl::string_view commands) {
  std::string out = absl::StrCat(".PP\n", Line(comment), ".PP\n.RS 4\n.nf\n");
  for (absl::string_view l : absl::StrSplit(commands, '\n')) {
    out += Line(l);
  }
  return out + ".fi\n.RE\n";
}

}  // namespace

namespace {

std::string SectionName() {
  std::string m;
  m += ".SH NAME\n";
  m += "drun \\- launch and supervise distributed PyTorch jobs (a torchrun replacement)\n";
  return m;
}

std::string SectionSynopsis() {
  std::string m;
  m += ".SH SYNOPSIS\n";
  m += ".B drun\n[\\fIoptions\\fR] \\fItraining_script\\fR [\\fIscript args\\fR ...]\n.br\n";
  m += ".B drun\n\\fB\\-\\-config\\fR \\fIjob.yaml\\fR [\\fIoptions\\fR] "
       "[\\fItraining_script\\fR [\\fIscript args\\fR ...]]\n.br\n";
  m += ".B drun\n\\fB\\-\\-help\\fR [\\fITOPIC\\fR] | \\fB\\-\\-version\\fR | "
       "\\fB\\-\\-print\\-completion\\fR \\fISHELL\\fR\n.br\n";
  m += ".B drun stacks\n[\\fIRUN_ID\\fR]\n";
  return m;
}

std::string SectionStacks() {
  std::string m;
  m += ".SH DRUN STACKS\n";
  m += Line(
      "drun stacks [RUN_ID] prints, for every rank of a running job on this machine, its pid, "
      "process state and kernel wait channel, the CPU it used lately, how long it has been quiet, "
      "the last line it printed and its stack: Python frames (file:line function, every thread) "
      "for Python workers, native frames with function names otherwise (eu-stack or gdb). It does "
      "not stop or signal the workers. The job is found through a per-user directory "
      "($XDG_RUNTIME_DIR/drun, else /tmp/drun-UID); with several jobs running, RUN_ID picks one. "
      "Another user's jobs are never shown. Under --log-dir each dump is also kept as "
      "stacks_<time>.txt in the attempt's directory, and --report lists it. On a multi-node job "
      "it shows every node's ranks, run where the job was started (ssh, --launcher slurm) or on "
      "any node of it: the request goes to every agent through the rendezvous.");
  m += Line(
      "--hang-timeout SECONDS does the same by itself when no rank made progress (a byte of "
      "output, or CPU above 10 % of a core) for that long: a table of the ranks marks the one not "
      "where the others are, the full dump goes to hang_stacks.txt under --log-dir (else to "
      "standard error), and the job ends with exit code 124, or restarts while --max-restarts "
      "allows. On many nodes the job hangs when every node's ranks made no progress; the node of "
      "the odd rank prints the table. See docs/hangs.md.");
  return m;
}

std::string SectionDescription() {
  std::string m;
  m += ".SH DESCRIPTION\n";
  m += Line(
      "drun starts a rendezvous server and one agent per node; each agent runs "
      "--nproc-per-node workers with the environment torchrun gives them (RANK, LOCAL_RANK, "
      "WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*), supervises them, restarts the "
      "whole job when any worker fails (--max-restarts), forwards signals, and prints every "
      "worker's output with a rank prefix. The job ends as soon as every worker has exited 0.");
  m += ".PP\n";
  m += Line("Agents start in one of four ways:");
  m += ".TP\n" + Bold("local") + "\n";
  m += Line("this process is the only node (--standalone, or --nnodes 1).");
  m += ".TP\n" + Bold("node") + "\n";
  m += Line(
      "torchrun's way: the same drun command, with --nnodes and --rdzv-endpoint HOST:PORT, "
      "typed on every node.");
  m += ".TP\n" + Bold("ssh") + "\n";
  m += Line(
      "drun starts `drun agent' on every host of --hostfile or -H over ssh (libssh, or "
      "--rsh): one connection and one command per host, all at once; each agent checks its "
      "host (the same drun version, the working directory, the script) before it joins. A "
      "job starts once --nnodes MIN hosts have joined; a host that does not answer (5 s "
      "connect timeout) is tried again every 5 s and joins as a spare when it is up. A job "
      "that cannot reach MIN hosts ends with one line per failing host. With log files "
      "(--log-dir, -r, -t) every host writes under one run directory, and at the end the "
      "launcher collects each host's files into its own --log-dir (over the host's ssh "
      "connection, or a second --rsh command), unless it already sees them there (a shared "
      "file system); one line says where they are, and one line names each host whose logs "
      "stay on it (HOST:DIR).");
  m += ".TP\n" + Bold("slurm") + "\n";
  m += Line(
      "`srun drun ...' configures itself from SLURM_* in every task; --launcher slurm "
      "inside sbatch runs srun itself.");
  m += ".PP\n";
  m += Line(
      "Every option may also be written with underscores (--nproc_per_node), set in the "
      "environment (see ENVIRONMENT), or given in a YAML job file (see JOB FILES). The "
      "command line wins over the environment, and the environment over the job file. The "
      "training script runs with $PYTHON_EXEC, else the python3 of the venv or conda env drun "
      "is installed in (pip install of the wheel), else python3 on PATH, unless --no-python is "
      "given.");
  return m;
}

std::string SectionOptions(const std::vector<OptionInfo>& options) {
  std::string m;
  m += ".SH OPTIONS\n";
  m += Line(
      "drun --help shows the common options on one screen; drun --help TOPIC shows one group "
      "below (its name in lower case: job, rendezvous, output, ssh, slurm, other), and "
      "drun --help all every option.");
  for (const std::string& group : HelpTopics()) {
    if (group == "all") continue;
    bool any = false;
    for (const auto& o : options) {
      if (o.group != group) continue;
      if (!any) m += ".SS " + GroupTitle(group) + "\n";
      any = true;
      m += ".TP\n";
      if (o.name.size() == 1) {  // mpirun's -x has no long form
        absl::StrAppend(&m, OptText(absl::StrCat("-", o.name)));
      } else {
        if (o.short_name) absl::StrAppend(&m, OptText(absl::StrCat("-", std::string(1, o.short_name))), ", ");
        absl::StrAppend(&m, OptText(absl::StrCat("--", o.name)));
      }
      if (!o.metavar.empty()) absl::StrAppend(&m, " ", Italic(o.metavar));
      m += "\n";
      const std::string def = o.default_value.empty() ? "" : absl::StrCat(" (default ", o.default_value, ")");
      m += Line(absl::StrCat(o.help, def, absl::EndsWith(o.help, ".") ? "" : "."));
      if (!o.env.empty()) {
        absl::StrAppend(&m, ".br\nEnvironment: ", Bold(o.env), ".\n");
      }
    }
  }
  return m;
}

std::string SectionTls() {
  std::string m;
  m += ".SH TLS\n";
  m += Line(
      "--rdzv-tls CERT,KEY,CA (a job file's tls: block) puts the rendezvous channel in TLS "
      "(1.2 or later) with client certificates: the node that hosts the rendezvous presents CERT "
      "and admits only agents whose certificate verifies against CA; agents present their CERT "
      "and verify the server's against CA. Host names are not checked: the CA is the job's trust "
      "boundary. KEY must be a PEM key without a pass phrase, readable only by its owner (chmod "
      "600). Relative paths are made absolute; remote agents (--hostfile, --launcher slurm) read "
      "the same paths on their host, so the files must be there. The job token still proves "
      "itself inside TLS. The workers' c10d store stays plain TCP (PyTorch speaks no TLS): only "
      "the job's nodes may connect to it. A single-node job has no rendezvous channel: the files "
      "are checked and nothing else changes. See docs/architecture.md, \"TLS\".");
  return m;
}

std::string SectionJobFiles() {
  std::string m;
  m += ".SH JOB FILES\n";
  m += Line(
      "--config FILE reads a YAML map whose keys are the long options above, with dashes or "
      "underscores (nproc-per-node: 4). Flags take true or false; other options take numbers "
      "or strings; rdzv-conf may be a map and x a list. Five keys are not options:");
  m += ".TP\n" + Bold("env") + "\n";
  m += Line("a map VAR: value set for every worker on every node.");
  m += ".TP\n" + Bold("hosts") + "\n";
  m += Line(
      "a list of host, host:slots or user@host:slots entries, or maps {host, slots, "
      "max_slots, user}; instead of --hostfile or -H.");
  m += ".TP\n" + Bold("script") + "\n";
  m += Line("the training script (or program with no-python, or module with module).");
  m += ".TP\n" + Bold("args") + "\n";
  m += Line("the script's arguments, a list.");
  m += ".TP\n" + Bold("tls") + "\n";
  m += Line("a map {cert, key, ca}: --rdzv-tls CERT,KEY,CA.");
  m += ".PP\n";
  m += Line(
      "An unknown key or a value of the wrong type is an error naming the file, line and key. "
      "Example files are installed in /usr/share/doc/drun/configs.");
  m += ".PP\n.RS 4\n.nf\n";
  for (absl::string_view l : {"nproc-per-node: 4", "max-restarts: 2",
                              "node-setup: python3 examples/prepare_fashion_mnist.py /tmp/fmnist",
                              "env:", "  OMP_NUM_THREADS: 1", "script: examples/mnist_ddp.py",
                              "args: [--data-dir, /tmp/fmnist, --epochs, 1]"}) {
    m += Line(l);
  }
  m += ".fi\n.RE\n";
  return m;
}

std::string SectionEnvironment(const std::vector<OptionInfo>& options) {
  std::string m;
  m += ".SH ENVIRONMENT\n";
  m += Line(
      "Each option has an environment variable: PET_<NAME> for torchrun's options (as "
      "torchrun reads them), DRUN_<NAME> for drun's own, with the name in capitals and dashes "
      "as underscores. A value on the command line wins. Flags take 1 or 0.");
  for (const auto& o : options) {
    if (o.env.empty()) continue;
    m += ".TP\n" + Bold(o.env) + "\n";
    m += Line(absl::StrCat("as --", o.name, "."));
  }
  m += ".TP\n" + Bold("PYTHON_EXEC") + "\n";
  m += Line("the Python interpreter for the workers (default: the python3 of the venv or conda "
            "env drun is installed in, else python3 on PATH).");
  m += ".TP\n" + Bold("DRUN_RDZV_TOKEN") + "\n";
  m += Line(
      "the job token agents present to the rendezvous, when --rdzv-token-file is not "
      "given; agents without it are refused.");
  m += ".TP\n" + Bold("SLURM_*") + "\n";
  m += Line(
      "under srun, drun reads SLURM_JOB_ID, SLURM_STEP_ID, SLURM_STEP_NODELIST, "
      "SLURM_STEP_NUM_NODES, SLURM_NODEID, SLURM_PROCID, SLURM_GPUS_ON_NODE and "
      "SLURM_STEP_RESV_PORTS to configure the job without rendezvous options.");
  m += ".TP\n" + Bold("CUDA_VISIBLE_DEVICES") + "\n";
  m += Line("limits the GPUs that --nproc-per-node gpu or auto counts.");
  m += ".TP\n" + Bold("NO_COLOR") + "\n";
  m += Line("when set, rank prefixes are not coloured.");
  m += ".PP\n";
  m += Line(
      "Workers get torchrun's variables on top of the agent's environment: LOCAL_RANK, RANK, "
      "GROUP_RANK, ROLE_RANK, ROLE_NAME, LOCAL_WORLD_SIZE, WORLD_SIZE, GROUP_WORLD_SIZE, "
      "ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT, "
      "TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID, TORCHELASTIC_USE_AGENT_STORE, "
      "TORCHELASTIC_ERROR_FILE, TORCHELASTIC_SIGNALS_TO_HANDLE, TORCH_NCCL_ASYNC_ERROR_HANDLING, "
      "NCCL_ASYNC_ERROR_HANDLING, and, when OMP_NUM_THREADS is unset, OMP_NUM_THREADS: the worker's "
      "whole cores under --numa-binding, else 1 when a node runs more than one worker. Under "
      "--virtual-local-rank LOCAL_RANK is 0 and CUDA_VISIBLE_DEVICES names the worker's own GPU.");
  return m;
}

std::string SectionExitStatus() {
  std::string m;
  m += ".SH EXIT STATUS\n";
  m += ".TP\n" + Bold("0") + "\n" +
       Line("every worker on every node exited 0 (and --help, --version, --print-config, --print-completion).");
  m += ".TP\n" + Italic("N") + "\n" +
       Line(
           "the exit code of the first worker that failed (or of the --node-setup command), "
           "after the restarts allowed by --max-restarts; 128+N when it was killed by signal N. "
           "drun prints which host and rank failed and the last lines of its standard error.");
  m += ".TP\n" + Bold("1") + "\n" +
       Line(
           "the launcher failed (unreachable host, rendezvous error, port in use, a working or "
           "log directory it cannot use).");
  m += ".TP\n" + Bold("2") + "\n" +
       Line(
           "a bad command line, environment variable, job file, host file or token file, or a "
           "training script or program that cannot be run.");
  m += ".TP\n" + Bold("124") + "\n" +
       Line("--hang-timeout: no rank made progress for that long, and no restart was left.");
  m += ".TP\n" + Bold("127") + "\n" +
       Line(
           "a multi-node, ssh or Slurm job or `drun agent', and drun-net (the "
           "networked half of drun) is neither next to drun nor in ../lib/drun/ beside its "
           "directory: install both files. --version then prints drun's version, says that "
           "drun-net is missing, and exits 0.");
  m += ".TP\n" + Bold("128+N") + "\n" +
       Line(
           "drun itself was stopped by signal N, after stopping the workers: 130 for SIGINT "
           "(Ctrl-C), 143 for SIGTERM, 129 for SIGHUP, 131 for SIGQUIT. SIGUSR1 and SIGUSR2 are "
           "passed to the workers and do not stop drun. A signal left out of --signals-to-handle "
           "ends drun by its default action (the workers are killed). A worker killed by a signal gives the "
           "same code; the root-cause summary on standard error tells them apart.");
  return m;
}

std::string SectionFiles() {
  std::string m;
  m += ".SH FILES\n";
  m += ".TP\n" + Italic("/usr/share/doc/drun/configs/*.yaml") + "\n" +
       Line("example job files: one lab PC, lab PCs over ssh, a Slurm allocation, elastic 2:4.");
  m += ".TP\n" + Italic("/usr/share/doc/drun/examples/") + "\n" +
       Line("the example trainers (DDP on Fashion-MNIST, send/recv, reduce).");
  m += ".TP\n" + Italic("/usr/share/bash-completion/completions/drun") + "\n" +
       Line(
           "bash completion of drun's options and their listed values, installed by cmake --install "
           "and the Debian package (drun --print-completion bash writes it; zsh and tcsh get theirs "
           "the same way).");
  m += ".TP\n" + Italic("~/.ssh/known_hosts") + "\n" +
       Line(
           "host keys the ssh launcher checks; --ssh-accept-new adds unknown ones. "
           "Authentication uses ssh-agent or the keys in ~/.ssh.");
  return m;
}

std::string SectionExamples() {
  std::string m;
  m += ".SH EXAMPLES\n";
  m += Example("Four workers on this machine:",
               "drun --standalone --nproc-per-node 4 train.py --epochs 5");
  m += Example(
      "The same from an example job file (its paths are relative to the current "
      "directory), overriding one setting:",
      "cd /usr/share/doc/drun\n"
      "drun --config configs/one_lab_pc.yaml --max-restarts 1");
  m += Example("Lab PCs over ssh (host file lines such as `red01 max_slots = 2'):",
               "drun --hostfile hosts --nproc-per-node 2 train.py");
  m += Example("An elastic job of 2 to 4 nodes; the same command on every node:",
               "drun --nnodes 2:4 --nproc-per-node 4 --max-restarts 3 \\\n"
               "     --rdzv-endpoint node01:29400 --rdzv-id job42 train.py");
  m += Example("Inside an sbatch script (one task per node):",
               "srun drun --nproc-per-node 4 train.py");
  m += Example("Show the resolved job as a job file:", "drun --config job.yaml --print-config");
  m += Example("Where is every rank of my running job? (from another shell)", "drun stacks");
  return m;
}

std::string SectionSeeAlso() {
  std::string m;
  m += ".SH SEE ALSO\n";
  m += Bold("torchrun") + "(1), " + Bold("mpirun") + "(1), " + Bold("srun") + "(1), " +
       Bold("sbatch") + "(1), " + Bold("ssh") + "(1)\n";
  m += ".PP\n";
  m += Line("docs/config.md and docs/install.md in drun's sources.");
  return m;
}

}  // namespace

std::string ManPage() {
  const std::vector<OptionInfo> options = KnownOptions();
  std::string m;
  absl::StrAppend(&m,
                  ".\\\" drun(1), generated by drun_manpage from the option table in "
                  "launcher/job/cli.cc; do not edit.\n",
                  ".TH DRUN 1 \"\" \"", VersionWords(), "\" \"User Commands\"\n",
                  // No hyphenation or justification: names like PET_LOCAL_RANKS_FILTER must
                  // stay whole to be searched for and copied.
                  ".nh\n.ad l\n");
  m += SectionName();
  m += SectionSynopsis();
  m += SectionDescription();
  m += SectionOptions(options);
  m += SectionJobFiles();
  m += SectionTls();
  m += SectionStacks();
  m += SectionEnvironment(options);
  m += SectionExitStatus();
  m += SectionFiles();
  m += SectionExamples();
  m += SectionSeeAlso();
  return m;
}

}  // namespace drun
