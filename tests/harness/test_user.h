// A real unprivileged user for the tests that run jobs as someone other than root (CI runs as
// root): `muster-test`, with a supplementary group `muster-test-extra`. Made where missing and
// kept: test binaries run side by side (ctest -j) and share it, so none may remove it while
// another still uses it.
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
    int rc = std::system(
        "(getent group muster-test-extra >/dev/null || groupadd muster-test-extra) && "
        "(id muster-test >/dev/null 2>&1 || useradd --no-create-home --shell /bin/sh "
        "--groups muster-test-extra muster-test) && "
        "usermod -a -G muster-test-extra muster-test");
    struct passwd* pw = ::getpwnam(TestUser::kName);
    struct group* gr = ::getgrnam("muster-test-extra");
    if (rc != 0 || !pw || !gr) return;
    user_.uid = pw->pw_uid;
    user_.gid = pw->pw_gid;
    user_.extra_gid = gr->gr_gid;
    user_.ready = true;
  }
  TestUser user_;
};

}  // namespace muster::testing
