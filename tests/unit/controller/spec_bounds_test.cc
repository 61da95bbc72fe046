// Every size in a submitted spec is checked before any other work touches it; each refusal names
// the part and its limit and changes nothing.
#include "spec_bounds.h"

#include "engine_fixture.h"
#include "muster/common/job_limits.h"

namespace muster::controller {
namespace {

v1::JobSpec Plain() {
  v1::JobSpec s;
  s.set_name("train");
  s.set_script("#!/bin/sh\ntrue\n");
  s.set_work_dir("/tmp");
  s.add_environment("PATH=/usr/bin:/bin");
  return s;
}

void ExpectRefused(const v1::JobSpec& spec, const std::string& says) {
  Status st = CheckJobSpecBounds(spec, 4);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << says;
  EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
}

TEST(SpecBoundsTest, EachPartIsBoundedAndNamedWhenOver) {
  EXPECT_TRUE(CheckJobSpecBounds(Plain(), 4).ok());

  v1::JobSpec s = Plain();
  s.set_script("#!/bin/sh\n" + std::string(kMaxScriptBytes, '#'));
  ExpectRefused(s, "batch script is larger than 4 MiB");
  s = Plain();
  s.set_name(std::string(kMaxNameBytes + 1, 'n'));
  ExpectRefused(s, "job name is longer than 1024 bytes");
  s = Plain();
  s.set_name("two\nlines");
  ExpectRefused(s, "line break");
  s = Plain();
  s.add_environment(std::string("BAD=a\0b", 7));
  ExpectRefused(s, "NUL byte");
  s = Plain();
  s.add_environment("NOEQUALS");
  ExpectRefused(s, "is not KEY=VALUE");
  s = Plain();
  for (int i = 0; i < 9; ++i)
    s.add_environment("V" + std::to_string(i) + "=" + std::string(120'000, 'x'));
  ExpectRefused(s, "the environment is longer than");
  s = Plain();
  s.set_stdout_pattern("/tmp/%2000000000j");
  ExpectRefused(s, "--output '%2000000000j': a padding width is at most 64");
  s = Plain();
  s.set_work_dir("/" + std::string(kMaxPathBytes, 'd'));
  ExpectRefused(s, "working directory is longer than");
  s = Plain();
  for (int i = 0; i < 5; ++i) s.add_required_nodes("node1");
  ExpectRefused(s, "--nodelist has 5 entries; at most 4");
  s = Plain();
  for (int i = 0; i < 5; ++i) s.add_excluded_nodes("node" + std::to_string(i));
  ExpectRefused(s, "--exclude has 5 entries; at most 4");
  s = Plain();
  for (int i = 0; i < 65; ++i) s.add_gres()->set_name("nic");
  ExpectRefused(s, "--gres has 65 items");
  s = Plain();
  for (int i = 0; i < 9; ++i) s.add_gpu_types("t" + std::to_string(i));
  ExpectRefused(s, "--gpus-per-node has 9 entries; at most 8");
  s = Plain();
  s.add_gpu_types(std::string(kMaxShortStringBytes + 1, 'h'));
  ExpectRefused(s, "--gpus-per-node");
  // Numbers a raw API client might send, which the CLI's parsers would never produce.
  s = Plain();
  s.set_mem_per_gpu_mb(uint64_t{1} << 60);
  ExpectRefused(s, "memory request is too large");
  s = Plain();
  s.set_time_limit_ms(INT64_MAX);
  ExpectRefused(s, "time limit is too long");
  s = Plain();
  s.set_gpus_per_node(4'294'967'295u);
  ExpectRefused(s, "count is too large");
}

// The attack that stalled the controller for tens of seconds: ~150,000 names in -w and -x. Now
// refused on its size before any name is looked at, and the queue is untouched.
TEST_F(EngineTest, AHugeNodeListIsRefusedOnItsSizeAlone) {
  AllUp();
  v1::JobSpec s = Gang(1, 8);
  for (int i = 0; i < 150'000; ++i) {
    s.add_required_nodes("node" + std::to_string(i));
    s.add_excluded_nodes("other" + std::to_string(i));
  }
  auto r = Submit(s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--nodelist has 150000 entries; at most 4"),
            std::string::npos)
      << r.status().message();
  auto list = engine_->ListJobs(Root(), v1::ListJobsRequest());
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->jobs_size(), 0);
  // Repeated names within the bound are folded (in O(n log n)); a name in both lists is refused.
  v1::JobSpec ok = Gang(1, 8);
  for (const char* n : {"node2", "node2", "node2", "node2"}) ok.add_required_nodes(n);
  auto id = Submit(ok);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  v1::JobSpec both = Gang(1, 8);
  both.add_required_nodes("node3");
  both.add_excluded_nodes("node3");
  EXPECT_FALSE(Submit(both).ok());
}

TEST_F(EngineTest, AnOutputPatternWithAHugePaddingWidthIsRefusedAtSubmission) {
  AllUp();
  v1::JobSpec s = Gang(1, 8);
  s.set_stdout_pattern("/tmp/%2000000000j");
  auto r = Submit(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("padding width"), std::string::npos);
}

}  // namespace
}  // namespace muster::controller
