// The web view's stylesheet and script, served as /static/muster.css and /static/muster.js:
// no build step, no third-party code, nothing fetched from elsewhere (the pages' Content
// Security Policy allows only the view's own origin).
#pragma once

#include <string>

namespace muster::web {

const std::string& StyleSheet();
const std::string& Script();

}  // namespace muster::web
