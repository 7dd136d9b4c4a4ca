// drun_manpage [FILE]: writes drun(1) as troff to FILE (atomically), or to standard output.
// drun_manpage --completion SHELL [FILE]: the same for drun --print-completion SHELL.
// The build runs it to make drun.1 and the bash completion file (the light drun is not
// needed for either).
#include <cstdio>
#include <string>

#include "launcher/job/cli.h"
#include "launcher/job/man_page.h"

int main(int argc, char** argv) {
  std::string page;
  if (argc >= 3 && std::string(argv[1]) == "--completion") {
    page = drun::CompletionScript(argv[2]);
    argc -= 2;
    argv += 2;
  } else {
    page = drun::ManPage();
  }
  if (argc > 2 || page.empty()) {
    std::fprintf(stderr, "usage: drun_manpage [--completion bash|zsh|tcsh] [FILE]\n");
    return 2;
  }
  if (argc == 1) {
    if (std::fwrite(page.data(), 1, page.size(), stdout) != page.size() ||
        std::fflush(stdout) != 0) {
      std::perror("drun_manpage: write");
      return 1;
    }
    return 0;
  }
  // Through a temporary file, so an interrupted build never leaves half a page behind.
  const std::string path = argv[1];
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    std::perror(("drun_manpage: " + tmp).c_str());
    return 1;
  }
  const bool ok = std::fwrite(page.data(), 1, page.size(), f) == page.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::perror(("drun_manpage: " + path).c_str());
    std::remove(tmp.c_str());
    return 1;
  }
  return 0;
}
