// --help and its topics, the usage line, and --print-completion's scripts:
// every one of them rendered from the option table (KnownOptions), so an
// option's names, metavar, help and default are written once, in
// launcher/job/options.inc.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "launcher/job/cli.h"

namespace drun {
namespace {

// A word wider than `width` (a path pattern, a list) cut after its last '/' or
// ',' that fits, else at `width`.
std::vector<absl::string_view> CutWord(absl::string_view word, size_t width) {
  std::vector<absl::string_view> pieces;
  while (word.size() > width) {
    size_t cut = word.substr(0, width).find_last_of("/,");
    cut = cut == absl::string_view::npos ? width : cut + 1;
    pieces.push_back(word.substr(0, cut));
    word.remove_prefix(cut);
  }
  pieces.push_back(word);
  return pieces;
}

// `words` filled into lines of at most `width` columns.
std::vector<std::string> WrapWords(absl::string_view words, size_t width) {
  std::vector<std::string> lines;
  std::vector<absl::string_view> pieces;
  for (absl::string_view word : absl::StrSplit(words, ' ', absl::SkipEmpty())) {
    for (absl::string_view piece : CutWord(word, width)) pieces.push_back(piece);
  }
  for (absl::string_view word : pieces) {
    if (!lines.empty() && lines.back().size() + 1 + word.size() <= width) {
      absl::StrAppend(&lines.back(), " ", word);
    } else {
      lines.emplace_back(word);
    }
  }
  return lines;
}

// The option's names and metavar as --help shows them: "-m, --module",
// "    --nnodes N|MIN:MAX", "-x VAR[=VALUE]" (mpirun's -x has no long form).
std::string Names(const OptionInfo& o) {
  std::string lhs = o.short_name ? absl::StrCat("-", std::string(1, o.short_name), ", --", o.name)
                                 : absl::StrCat("    --", o.name);
  if (o.name.size() == 1) lhs = absl::StrCat("-", o.name);
  if (!o.metavar.empty()) absl::StrAppend(&lhs, " ", o.metavar);
  return lhs;
}

// One option of --help within 80 columns, as torchrun's: the names and metavar
// in a 34-column field (on a line of their own when longer), the help text
// wrapped beside it, ending with the row's default.
std::string HelpEntry(const OptionInfo& o) {
  constexpr size_t kIndent = 2, kField = 34, kWidth = 80;
  const std::string pad(kIndent + kField, ' ');
  const std::string lhs = Names(o);
  std::string out = std::string(kIndent, ' ') + lhs;
  if (lhs.size() < kField) {
    out.resize(kIndent + kField, ' ');
  } else {
    absl::StrAppend(&out, "\n", pad);
  }
  std::string help = o.help;
  if (!o.default_value.empty()) absl::StrAppend(&help, " (default ", o.default_value, ")");
  std::vector<std::string> lines = WrapWords(help, kWidth - pad.size());
  absl::StrAppend(&out, absl::StrJoin(lines, absl::StrCat("\n", pad)), "\n");
  return out;
}

std::vector<std::string> Groups() {
  std::vector<std::string> groups;
  for (const OptionInfo& o : KnownOptions()) {
    if (std::find(groups.begin(), groups.end(), o.group) == groups.end()) groups.push_back(o.group);
  }
  return groups;
}

std::string GroupText(const std::string& group) {
  std::string out = absl::StrCat(group, " options:\n");
  for (const OptionInfo& o : KnownOptions()) {
    if (o.group == group) absl::StrAppend(&out, HelpEntry(o));
  }
  return out;
}

constexpr absl::string_view kUsage =
    "usage: drun [options] training_script [script args...]\n"
    "       drun stacks [RUN_ID]\n";

constexpr absl::string_view kAbout =
    "Launches a distributed training job: one agent per node runs --nproc-per-node\n"
    "workers with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,\n"
    "MASTER_PORT, TORCHELASTIC_*), supervises them, restarts the whole job on failure\n"
    "(--max-restarts) and prints each worker's output with a [rank<N>] prefix.\n";

constexpr absl::string_view kSpellings =
    "Every option may also be written with underscores (--nproc_per_node) or set in\n"
    "the environment as PET_<NAME> (torchrun's options) or DRUN_<NAME> (drun's own;\n"
    "not --help, --version, --print-config, --print-completion and -x);\n"
    "the command line wins. The interpreter is $PYTHON_EXEC, else the python3 of the\n"
    "venv or conda env drun is installed in (pip), else python3 on PATH.\n";

constexpr absl::string_view kExamples =
    "examples:\n"
    "  drun --standalone --nproc-per-node 4 train.py --epochs 5\n"
    "  drun --nproc-per-node gpu:0,2 --max-restarts 3 train.py\n"
    "  drun --nproc-per-node 4 --node-setup '$PYTHON_EXEC prepare_data.py' train.py\n"
    "  drun --nnodes 2:4 --nproc-per-node 2 --rdzv-endpoint node0:29400 train.py\n"
    "  drun --hostfile hosts --nproc-per-node 2 -x WANDB_API_KEY train.py\n"
    "  srun drun --nproc-per-node 2 train.py          (inside sbatch)\n"
    "  drun --config configs/one_lab_pc.yaml\n"
    "  drun stacks [RUN_ID]   every rank's stack of your running job (another shell)\n";

// The one-screen help's: one per way to run a job.
constexpr absl::string_view kCommonExamples =
    "examples:\n"
    "  drun --standalone --nproc-per-node 4 train.py --epochs 5\n"
    "  drun --nnodes 2:4 --nproc-per-node 2 --rdzv-endpoint node0:29400 train.py\n"
    "  drun --hostfile hosts --nproc-per-node 2 -x WANDB_API_KEY train.py\n"
    "  srun drun --nproc-per-node 2 train.py          (inside sbatch)\n"
    "  drun stacks [RUN_ID]   every rank's stack of your running job (another shell)\n";

constexpr absl::string_view kModes =
    "modes: --standalone or --nnodes 1: this process is the node. --rdzv-endpoint\n"
    "HOST:PORT on every node: the node whose address HOST is hosts the rendezvous.\n"
    "--hostfile/-H: agents start over ssh. Under srun (SLURM_STEP_ID set, none of\n"
    "--rdzv-endpoint/--rdzv-backend/--node-rank/--master-*) drun configures itself:\n"
    "with one task per node each task is that node's agent (nnodes, node rank and\n"
    "GPUs from Slurm); with more tasks than nodes each task is one worker\n"
    "(RANK=SLURM_PROCID, LOCAL_RANK=SLURM_LOCALID). --launcher slurm in a batch\n"
    "script runs that srun for you (docs/slurm.md).\n";

constexpr absl::string_view kExitStatus =
    "exit status: 0 when every worker exits 0; else the first failing worker's\n"
    "exit code (128+N for signal N); 124 for --hang-timeout; 2 for a bad command\n"
    "line.\n";

std::string TopicsLine() {
  return absl::StrCat("drun --help TOPIC lists more: ", absl::StrJoin(HelpTopics(), ", "),
                      ".\nman drun is the manual.\n");
}

// The one-screen help: the options people use first.
std::string CommonHelp() {
  std::string out = absl::StrCat(kUsage, "\n", kAbout, "\ncommon options:\n");
  for (const OptionInfo& o : KnownOptions()) {
    if (o.common) absl::StrAppend(&out, HelpEntry(o));
  }
  absl::StrAppend(&out, "\n", TopicsLine(), "\n", kCommonExamples, "\n", kExitStatus);
  return out;
}

std::string AllHelp() {
  std::string out = absl::StrCat(kUsage, "\n", kAbout, kSpellings);
  for (const std::string& group : Groups()) absl::StrAppend(&out, "\n", GroupText(group));
  absl::StrAppend(&out, "\n", kExamples, "\n", kModes, "\n", kExitStatus);
  return out;
}

}  // namespace

std::vector<std::string> HelpTopics() {
  std::vector<std::string> topics = {"all"};
  for (const std::string& g : Groups()) topics.push_back(g);
  return topics;
}

std::string UsageText() {
  return absl::StrCat(kUsage,
                      "e.g.:  drun --nproc-per-node 4 train.py --epochs 5\n"
                      "drun --help shows the common options, drun --help all every option; man drun is the "
                      "manual.\n");
}

std::string HelpText(const std::string& topic) {
  if (topic.empty()) return CommonHelp();
  if (topic == "all") return AllHelp();
  std::string out = absl::StrCat(kUsage, "\n", GroupText(topic));
  if (topic == "slurm" || topic == "ssh" || topic == "rendezvous") absl::StrAppend(&out, "\n", kModes);
  if (topic == "job" || topic == "rendezvous" || topic == "output") absl::StrAppend(&out, "\n", kSpellings);
  absl::StrAppend(&out, "\n", TopicsLine());
  return out;
}

namespace {

// The words a metavar lists that are typed as they are ("local|ssh|slurm",
// the "cpu", "gpu" and "auto" of "N|cpu|gpu|auto|gpu:LIST"), for completion.
std::vector<std::string> ValueWords(const OptionInfo& o) {
  if (o.id == Opt::kHelp) return HelpTopics();
  std::vector<std::string> words;
  for (absl::string_view w : absl::StrSplit(o.metavar, '|')) {
    const bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    });
    if (plain && w[0] >= 'a') words.emplace_back(w);
  }
  return words;
}

bool TakesPath(const OptionInfo& o) {
  return o.metavar == "FILE" || o.metavar == "DIR" || o.metavar == "PATH" || o.id == Opt::kRdzvTls;
}

std::string Spelling(const OptionInfo& o) {
  return o.name.size() == 1 ? absl::StrCat("-", o.name) : absl::StrCat("--", o.name);
}

std::string BashScript() {
  std::vector<std::string> names, valued;
  std::string cases;
  for (const OptionInfo& o : KnownOptions()) {
    names.push_back(Spelling(o));
    if (o.short_name && o.name.size() > 1) names.push_back(absl::StrCat("-", std::string(1, o.short_name)));
    std::vector<std::string> spellings = {Spelling(o)};
    if (o.short_name && o.name.size() > 1) spellings.push_back(absl::StrCat("-", std::string(1, o.short_name)));
    if (!o.is_flag) for (const std::string& s : spellings) valued.push_back(s);
    const std::string pattern = absl::StrJoin(spellings, "|");
    if (const std::vector<std::string> words = ValueWords(o); !words.empty()) {
      absl::StrAppend(&cases, "    ", pattern, ") COMPREPLY=($(compgen -W '", absl::StrJoin(words, " "),
                      "' -- \"$cur\")); return ;;\n");
    } else if (TakesPath(o)) {
      absl::StrAppend(&cases, "    ", pattern, ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n");
    } else if (o.id == Opt::kX) {
      absl::StrAppend(&cases, "    ", pattern, ") COMPREPLY=($(compgen -e -- \"$cur\")); return ;;\n");
    } else if (!o.is_flag) {
      absl::StrAppend(&cases, "    ", pattern, ") return ;;\n");
    }
  }
  return absl::StrCat(
      "# bash completion for drun (generated by drun --print-completion bash from its option table)\n"
      "_drun() {\n"
      "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} i w\n"
      "  local valued=' ", absl::StrJoin(valued, " "), " '\n"
      "  # Past the training script (or --), its own arguments: file names.\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    w=${COMP_WORDS[i]}\n"
      "    case $w in\n"
      "      --) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
      "      -*) [[ $valued == *\" $w \"* ]] && ((i++)) ;;\n"
      "      *) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
      "    esac\n"
      "  done\n"
      "  case $prev in\n",
      cases,
      "  esac\n"
      "  if [[ $cur == -* ]]; then\n"
      "    COMPREPLY=($(compgen -W '", absl::StrJoin(names, " "), "' -- \"$cur\"))\n"
      "  else\n"
      "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
      "  fi\n"
      "}\n"
      "complete -o filenames -F _drun drun\n");
}

std::string TcshScript() {
  std::vector<std::string> longs, shorts, rules;
  for (const OptionInfo& o : KnownOptions()) {
    if (o.name.size() > 1) longs.push_back(o.name);
    if (o.short_name) shorts.push_back(std::string(1, o.short_name));
    if (const std::vector<std::string> words = ValueWords(o); !words.empty()) {
      rules.push_back(absl::StrCat("'n/", Spelling(o), "/(", absl::StrJoin(words, " "), ")/'"));
    }
  }
  return absl::StrCat("# tcsh completion for drun (generated by drun --print-completion tcsh)\n",
                      "complete drun 'c/--/(", absl::StrJoin(longs, " "), ")/' 'c/-/(",
                      absl::StrJoin(shorts, " "), ")/' ", absl::StrJoin(rules, " "), " 'p/*/f/'\n");
}

}  // namespace

std::string CompletionScript(const std::string& shell) {
  if (shell == "bash") return BashScript();
  if (shell == "zsh") {
    return absl::StrCat("#compdef drun\n# zsh completion for drun (generated by drun --print-completion zsh)\n",
                        "autoload -U +X bashcompinit && bashcompinit\n", BashScript());
  }
  if (shell == "tcsh") return TcshScript();
  return "";
}

}  // namespace drun
