// ReadTraceFile: the format from --format or the file's name, plain or gzip files.
#include "muster/sim/trace_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace muster::sim {
namespace {

// A gzip file of `text` in deflate's stored (uncompressed) blocks, made here so that the test
// needs no compressor: RFC 1952's header and trailer around RFC 1951's type-0 blocks.
std::string Gzip(const std::string& text) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : text) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  crc = ~crc;
  auto le32 = [](std::string& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  std::string out = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, 0, '\xff'};
  size_t pos = 0;
  do {
    const size_t n = std::min<size_t>(text.size() - pos, 65'535);
    const bool last = pos + n == text.size();
    out.push_back(last ? 1 : 0);  // BFINAL, BTYPE 00
    out.push_back(static_cast<char>(n & 0xff));
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(~n & 0xff));
    out.push_back(static_cast<char>((~n >> 8) & 0xff));
    out.append(text, pos, n);
    pos += n;
  } while (pos < text.size());
  le32(out, crc);
  le32(out, static_cast<uint32_t>(text.size()));
  return out;
}

class TraceFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/trace-file-test." + std::to_string(::getpid());
    ASSERT_EQ(std::system(("mkdir -p '" + dir_ + "'").c_str()), 0);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string dir_;
};

constexpr const char* kPhilly =
    ",run_time,wait_time,submit_time,gpu_num\n"
    "0,100,5,1000,16\n"
    "1,200,0,900,1\n";
constexpr const char* kPods =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
    "openb-pod-0007,2000,1024,1,1000,T4,LS,Succeeded,10,70,20\n";
constexpr const char* kCsv = "id,submit,run,procs\n5,0,60,2\n";
constexpr const char* kSacct =
    "77|2024-01-05T10:11:12|2024-01-05T10:12:00|2024-01-05T11:12:00|01:30:00|8|1|"
    "cpu=8,gres/gpu=2,node=1|alice|physics|COMPLETED\n";

TEST_F(TraceFileTest, TheFileNameNamesPhillyAndOpenb) {
  auto philly = ReadTraceFile(Write("philly_df_schedule.csv", kPhilly));
  ASSERT_TRUE(philly.ok()) << philly.status().ToString();
  EXPECT_EQ(philly->format, "philly");
  ASSERT_EQ(philly->jobs.size(), 2u);
  EXPECT_EQ(philly->jobs[1].nodes, 2u) << "16 GPUs on the default 8-GPU nodes";

  auto openb = ReadTraceFile(Write("openb_pod_list_default.csv", kPods));
  ASSERT_TRUE(openb.ok()) << openb.status().ToString();
  EXPECT_EQ(openb->format, "openb");
  ASSERT_EQ(openb->jobs.size(), 1u);
  EXPECT_EQ(openb->jobs[0].trace_id, 7);

  auto other = ReadTraceFile(Write("history.csv", kCsv));
  ASSERT_FALSE(other.ok()) << "another .csv needs --format";
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ReadTraceFile(Write("openb_node_list_gpu_node.csv", kCsv)).ok())
      << "the node list is no trace";
}

TEST_F(TraceFileTest, TheFormatNamedWinsOverTheName) {
  const std::string csv = Write("history.csv", kCsv);
  auto t = ReadTraceFile(csv, "csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->format, "csv");
  ASSERT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->jobs[0].trace_id, 5);

  auto sacct = ReadTraceFile(Write("jan.txt", kSacct), "sacct");
  ASSERT_TRUE(sacct.ok()) << sacct.status().ToString();
  EXPECT_EQ(sacct->format, "sacct");
  ASSERT_EQ(sacct->jobs.size(), 1u);
  EXPECT_EQ(sacct->jobs[0].gpus, 2u);

  auto as_philly = ReadTraceFile(Write("philly-like.txt", kPhilly), "philly", {.gpus_per_node = 4});
  ASSERT_TRUE(as_philly.ok());
  EXPECT_EQ(as_philly->jobs[1].nodes, 4u) << "the options reach the reader";

  auto wrong = ReadTraceFile(csv, "philly");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find(csv), std::string::npos) << "the error names the file";

  auto unknown = ReadTraceFile(csv, "parquet");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadTraceFile(dir_ + "/missing.csv", "csv").status().code(), StatusCode::kNotFound);
}

TEST_F(TraceFileTest, GzipFilesAreInflatedAndNamedWithoutTheirGz) {
  auto philly = ReadTraceFile(Write("philly_df_schedule.csv.gz", Gzip(kPhilly)));
  ASSERT_TRUE(philly.ok()) << philly.status().ToString();
  EXPECT_EQ(philly->format, "philly");
  ASSERT_EQ(philly->jobs.size(), 2u);
  EXPECT_EQ(philly->jobs[0].trace_id, 1);
  EXPECT_EQ(philly->jobs[1].run_s, 100);

  // More than one stored block.
  std::string big = "id,submit,run,procs\n";
  for (int i = 0; i < 5000; ++i) {
    big += std::to_string(i) + "," + std::to_string(i) + ",60,1\n";
  }
  ASSERT_GT(big.size(), 65'535u);
  auto csv = ReadTraceFile(Write("big.csv.gz", Gzip(big)), "csv");
  ASSERT_TRUE(csv.ok()) << csv.status().ToString();
  EXPECT_EQ(csv->jobs.size(), 5000u);
  EXPECT_EQ(csv->jobs.back().trace_id, 4999);
  EXPECT_EQ(csv->skipped, 0u);
}

TEST_F(TraceFileTest, AFileThatInflatesPastTheLimitIsAnErrorNotAnAllocation) {
  // A gzip bomb in small: the reader stops at the limit rather than holding it all.
  const std::string text(1 << 20, 'x');
  const std::string path = Write("bomb.swf.gz", Gzip(text));
  auto small = ReadMaybeCompressed(path, 64 << 10);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(small.status().message().find("holds more than 65536 bytes (after inflating)"),
            std::string::npos)
      << small.status().ToString();
  auto whole = ReadMaybeCompressed(path, 1 << 20);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->size(), text.size());
  EXPECT_EQ(kMaxTraceFileBytes, uint64_t{4} << 30);
}

}  // namespace
}  // namespace muster::sim
