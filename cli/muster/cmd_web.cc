// muster web: asks the controller, as the calling user (its socket's peer credentials, or
// MUNGE from another host), for a one-time address that logs a browser in to the web view.
#include <cstdio>
#include <optional>

#include "cli.h"
#include "muster/common/duration.h"
#include "options.h"
#include "output.h"

namespace muster::cli {

int CmdWeb(int argc, char** argv) {
  bool json = false;
  if (std::optional<int> rc = ReadJsonOption(
          "web", "unknown argument", argc, argv,
          "Usage: muster web [--json]\n"
          "Prints a one-time address that logs your browser in to the controller's web view as\n"
          "you. Open it within a minute; it works once.\n",
          &json)) {
    return *rc;
  }
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("web", controller.status());
  v1::WebLoginResponse resp;
  if (Status st = controller->Call(v1::METHOD_WEB_LOGIN, v1::WebLoginRequest(), &resp); !st.ok()) {
    return Fail("web", st);
  }
  if (json) {
    JsonWriter w;
    w.BeginObject().Field("url", resp.url()).Field("expires_ms", resp.expires_ms()).EndObject();
    std::printf("%s\n", w.str().c_str());
    return kExitOk;
  }
  std::printf("Open this address within a minute (it logs you in once; until %s):\n  %s\n",
              FormatTimestamp(resp.expires_ms()).c_str(), resp.url().c_str());
  return kExitOk;
}

}  // namespace muster::cli
