// The ssh launcher's console (launcher/ssh/ssh_console.h): hosts' streams that
// come prefixed by their agents, through one Console into pipes.
#include "launcher/ssh/ssh_console.h"

#include "tests/ssh/console_hub_fixture.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

namespace drun {
namespace {

using ConsoleHubTest = ConsoleHubFixture;

TEST_F(ConsoleHubTest, APartialLineShowsAndACutLineGoesOnUnderTheRanksContinuation) {
  HostStream a(hub_.get(), 1, "a"), b(hub_.get(), 1, "b");
  a.Feed("[a:rank0]: x");
  RunDeadlines();
  EXPECT_EQ(ReadAll(out_[0]), "[a:rank0]: x");  // shown before its newline
  b.Feed("[b:rank1]: whole\n");
  RunDeadlines();  // b waits for a's line, then cuts it
  a.Feed("yz\n");
  hub_->Drain();
  EXPECT_EQ(ReadAll(out_[0]), "\n[b:rank1]: whole\n[a:rank0]+ yz\n");
}

TEST_F(ConsoleHubTest, ARedrawAfterACutKeepsItsOwnPrefix) {
  HostStream a(hub_.get(), 2, "a"), b(hub_.get(), 2, "b");
  a.Feed("[a:rank0]:  10%");
  RunDeadlines();
  b.Feed("[b:rank1]: log\n");
  RunDeadlines();
  a.Feed("\r[a:rank0]:  50%");
  RunDeadlines();
  a.Feed("\r[a:rank0]: 100%\n");
  hub_->Drain();
  EXPECT_EQ(ReadAll(err_[0]),
            "[a:rank0]:  10%\n[b:rank1]: log\n[a:rank0]:  50%\r[a:rank0]: 100%\n");
}

TEST_F(ConsoleHubTest, AnAgentsOwnLineNamesItsHost) {
  HostStream a(hub_.get(), 2, "red01");
  a.Feed("[red01:rank0]: warn\ndrun: stopping on SIGTERM\n[red01:rank0]: bye\n");
  hub_->Drain();
  EXPECT_EQ(ReadAll(err_[0]),
            "[red01:rank0]: warn\ndrun: red01: stopping on SIGTERM\n[red01:rank0]: bye\n");
}

TEST_F(ConsoleHubTest, AnEndedStreamEndsItsOpenLine) {
  {
    HostStream a(hub_.get(), 1, "a");
    a.Feed("[a:rank0]: (Pdb) ");
  }
  hub_->Text("drun: the end\n");
  hub_->Drain();
  EXPECT_EQ(ReadAll(out_[0]), "[a:rank0]: (Pdb) \n");
  EXPECT_EQ(ReadAll(err_[0]), "drun: the end\n");
}

}  // namespace
}  // namespace drun
