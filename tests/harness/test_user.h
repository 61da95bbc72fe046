// A real unprivileged user for the tests that run jobs as someone other than root (CI runs as
// root): `muster-test`, with a supplementary group `muster-test-extra`. Made once per test binary
// where missing, and removed at its end if it made them.
#pragma once

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace muster::testing {

struct TestUser {
  bool ready = false;  // false: not root, or useradd is missing; tests skip
  uid_t uid = 0;
  gid_t gid = 0;
  gid_t extra_gid = 0;
  static constexpr const char* kName = "muster-test";
};

class TestUserFactory {
 public:
  static const TestUser& Get() {
    static TestUserFactory factory;
    return factory.user_;
  }

 private:
  TestUserFactory() {
    if (::geteuid() != 0) return;
    created_ = ::getpwnam(TestUser::kName) == nullptr;
    int rc = std::system(
        "(getent group muster-test-extra >/dev/null || groupadd muster-test-extra) && "
        "(id muster-test >/dev/null 2>&1 || useradd --no-create-home --shell /bin/sh "
        "--groups muster-test-extra muster-test)");
    struct passwd* pw = ::getpwnam(TestUser::kName);
    struct group* gr = ::getgrnam("muster-test-extra");
    if (rc != 0 || !pw || !gr) return;
    user_.uid = pw->pw_uid;
    user_.gid = pw->pw_gid;
    user_.extra_gid = gr->gr_gid;
    user_.ready = true;
  }
  ~TestUserFactory() {
    // What the setup made, it removes (a user that existed before stays).
    if (created_ && user_.ready) {
      (void)std::system("userdel muster-test; groupdel muster-test-extra 2>/dev/null");
    }
  }
  TestUser user_;
  bool created_ = false;
};

}  // namespace muster::testing
