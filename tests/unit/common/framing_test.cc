// The framed protocol: headers, host:port, and frames assembled from a stream as servers read
// it, bounded by what arrived rather than by what a header promised.
#include "muster/common/framing.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace muster {
namespace {

TEST(FramingTest, HeaderRoundTripAndLimits) {
  std::string f = EncodeFrame(7, "hello");
  ASSERT_EQ(f.size(), 13u);
  uint32_t len = 0, type = 0;
  ASSERT_TRUE(DecodeFrameHeader(f.data(), &len, &type).ok());
  EXPECT_EQ(len, 5u);
  EXPECT_EQ(type, 7u);
  const char too_small[8] = {0, 0, 0, 3, 0, 0, 0, 1};
  EXPECT_FALSE(DecodeFrameHeader(too_small, &len, &type).ok());
  const char too_big[8] = {0x7f, 0, 0, 0, 0, 0, 0, 1};
  EXPECT_FALSE(DecodeFrameHeader(too_big, &len, &type).ok());
}

TEST(FramingTest, SplitsHostPort) {
  std::string h;
  uint16_t p = 0;
  ASSERT_TRUE(SplitHostPort("127.0.0.1:6817", &h, &p).ok());
  EXPECT_EQ(h, "127.0.0.1");
  EXPECT_EQ(p, 6817);
  ASSERT_TRUE(SplitHostPort("[::1]:80", &h, &p).ok());
  EXPECT_EQ(h, "::1");
  EXPECT_FALSE(SplitHostPort("nocolon", &h, &p).ok());
  EXPECT_FALSE(SplitHostPort("h:99999", &h, &p).ok());
}

TEST(FrameAssemblerTest, FramesComeOutWhateverTheReadsCutThemInto) {
  const std::string stream = EncodeFrame(1, "hello") + EncodeFrame(2, "") + EncodeFrame(3, "x");
  for (size_t piece : {size_t{1}, size_t{3}, size_t{8}, stream.size()}) {
    FrameAssembler a(1024);
    for (size_t i = 0; i < stream.size(); i += piece) {
      ASSERT_TRUE(a.Append(stream.data() + i, std::min(piece, stream.size() - i)).ok());
    }
    Frame f;
    ASSERT_TRUE(a.Pop(&f));
    EXPECT_EQ(f.type, 1u);
    EXPECT_EQ(f.payload, "hello");
    ASSERT_TRUE(a.Pop(&f));
    EXPECT_EQ(f.type, 2u);
    EXPECT_EQ(f.payload, "");
    ASSERT_TRUE(a.Pop(&f));
    EXPECT_EQ(f.payload, "x");
    EXPECT_FALSE(a.Pop(&f));
    EXPECT_FALSE(a.mid_frame());
  }
}

// A header that promises 8 MiB and then one byte: the assembler holds nine bytes, not 8 MiB; a
// header over the limit is refused as soon as it is complete.
TEST(FrameAssemblerTest, HoldsWhatArrivedAndRefusesAnOversizedHeaderAtOnce) {
  FrameAssembler a(8u << 20);
  const std::string big = EncodeFrame(1, std::string(8u << 20, 'b'));
  ASSERT_TRUE(a.Append(big.data(), 9).ok());
  EXPECT_TRUE(a.mid_frame());
  EXPECT_EQ(a.held_bytes(), 9u);
  Frame f;
  EXPECT_FALSE(a.Pop(&f));

  FrameAssembler b(1024);
  const std::string over = EncodeFrame(1, std::string(1025, 'o'));
  Status st = b.Append(over.data(), 7);
  EXPECT_TRUE(st.ok()) << "the header is not complete yet";
  st = b.Append(over.data() + 7, 1);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("frame of 1025 bytes; at most 1024"), std::string::npos)
      << st.message();
  const char bogus[8] = {0, 0, 0, 2, 0, 0, 0, 1};  // a length below the header's own 4 bytes
  FrameAssembler c(1024);
  EXPECT_FALSE(c.Append(bogus, 8).ok());
}

// A port nobody listens on yet: refused at once without patience; with it, the connection is
// made once a listener appears (an agent coming back from a restart).
TEST(ConnectTcpTest, ARefusedConnectionIsTriedAgainWithinItsPatience) {
  // A free loopback port: bound, then closed again.
  int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(probe, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(probe);
  const std::string where = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  auto refused = ConnectTcp(where, 1000);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("refused"), std::string::npos)
      << refused.status().ToString();

  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  std::thread late([&] {
    ::usleep(300'000);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(listener, 4), 0);
  });
  auto patient = ConnectTcp(where, 1000, 5000);
  late.join();
  ASSERT_TRUE(patient.ok()) << patient.status().ToString();
  ::close(*patient);
  ::close(listener);
}

}  // namespace
}  // namespace muster
