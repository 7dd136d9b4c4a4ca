// Who may connect to a job's store (rendezvous/admission.h): the host itself,
// the current round's nodes; everyone else refused, counted, said once.
#include "rendezvous/admission.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace drun {
namespace {

TEST(AdmissionTest, TheHostItselfAndLoopbackAreAlwaysAdmitted) {
  Admission a;
  EXPECT_TRUE(a.Admits("10.0.0.1", "10.0.0.1"));
  EXPECT_TRUE(a.Admits("127.0.0.5", "127.0.0.1"));
  EXPECT_TRUE(a.Admits("::1", "::1"));
  EXPECT_EQ(a.refused(), 0u);
}

TEST(AdmissionTest, OnlyTheCurrentRoundsNodesAreAdmitted) {
  std::vector<std::string> said;
  Admission a([&](absl::string_view line) { said.emplace_back(line); });
  EXPECT_FALSE(a.Admits("10.0.0.2", "10.0.0.1"));  // before any round
  a.SetMembers({"10.0.0.2", "10.0.0.3", ""});
  EXPECT_TRUE(a.Admits("10.0.0.2", "10.0.0.1"));
  EXPECT_TRUE(a.Admits("10.0.0.3", "10.0.0.1"));
  EXPECT_FALSE(a.Admits("10.0.0.9", "10.0.0.1"));
  EXPECT_FALSE(a.Admits("", ""));  // an unknown peer is no member
  a.SetMembers({"10.0.0.3"});  // the next round, without 10.0.0.2
  EXPECT_FALSE(a.Admits("10.0.0.2", "10.0.0.1"));
  EXPECT_EQ(a.refused(), 4u);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0], "the job's c10d store refused a connection from 10.0.0.2, which is not a "
                     "node of the current round (further refusals are only counted)");
}

}  // namespace
}  // namespace drun
