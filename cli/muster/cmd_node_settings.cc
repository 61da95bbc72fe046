// muster node update|reset: a node's features, weight and GRES set live (kept by the controller
// across restarts and reconfigurations until reset), and the same keys of scontrol update
// NodeName=.
#include <getopt.h>

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "muster/common/strings.h"
#include "options.h"
#include "output.h"

namespace muster::cli {
namespace {

// "a,b" (or "a&b", as Slurm accepts it); "" or "(null)": none.
void SetFeatures(const std::string& text, v1::NodeSettings* s) {
  v1::NodeSettings::Features* f = s->mutable_features();
  f->clear_names();
  if (text == "(null)") return;
  std::string list = text;
  for (char& c : list) {
    if (c == '&') c = ',';
  }
  for (const std::string& name : Split(list, ',', /*skip_empty=*/true)) {
    f->add_names(std::string(Trim(name)));
  }
}

Status SetWeight(const std::string& text, v1::NodeSettings* s) {
  std::optional<uint64_t> w = ParseUint(text);
  if (!w || *w > 4'294'967'280ULL) {
    return InvalidArgument("weight '" + text + "' is not a number from 0 to 4294967280");
  }
  s->set_weight(static_cast<uint32_t>(*w));
  return Status::Ok();
}

int Send(const v1::UpdateNodeRequest& req, const std::string& who) {
  auto controller = ConnectController();
  if (!controller.ok()) return Fail(who, controller.status());
  auto resp = controller->UpdateNode(req);
  if (!resp.ok()) return Fail(who, resp.status());
  return kExitOk;
}

}  // namespace

Status NodeSettingsFromKeys(const std::map<std::string, std::string>& kv, v1::NodeSettings* s) {
  // Muster keeps one feature set: the active ones are the available ones.
  const std::string* features = nullptr;
  for (const char* key : {"features", "availablefeatures", "activefeatures"}) {
    auto it = kv.find(key);
    if (it == kv.end()) continue;
    if (features && *features != it->second) {
      return InvalidArgument(
          "AvailableFeatures and ActiveFeatures differ; Muster keeps one feature set a node");
    }
    features = &it->second;
  }
  if (features) SetFeatures(*features, s);
  if (auto it = kv.find("weight"); it != kv.end()) {
    MUSTER_RETURN_IF_ERROR(SetWeight(it->second, s));
  }
  if (auto it = kv.find("gres"); it != kv.end()) s->set_gres(it->second);
  return Status::Ok();
}

int CmdNodeSettings(int argc, char** argv) {
  const std::string action = argv[1];
  const bool reset = action == "reset";
  const std::string who = "node " + action;
  v1::UpdateNodeRequest req;
  req.set_action(reset ? v1::UpdateNodeRequest::RESET : v1::UpdateNodeRequest::SET);
  v1::NodeSettings* s = req.mutable_settings();
  std::vector<std::string> names;
  const int value = reset ? no_argument : required_argument;
  const struct option opts[] = {{"features", value, nullptr, 'f'},
                                {"weight", value, nullptr, 'w'},
                                {"gres", value, nullptr, 'g'},
                                {nullptr, 0, nullptr, 0}};
  OptionReader in(argc - 1, argv + 1, "", opts);  // from the action on
  for (int c; (c = in.Next()) != -1;) {
    if (c == OptionReader::kWord) {
      names.push_back(in.Word());
    } else if (reset && (c == 'f' || c == 'w' || c == 'g')) {
      req.add_reset(c == 'f' ? "features" : c == 'w' ? "weight" : "gres");
    } else if (c == 'f') {
      SetFeatures(optarg, s);
    } else if (c == 'w') {
      if (Status st = SetWeight(optarg, s); !st.ok()) return Usage("node", st.message());
    } else if (c == 'g') {
      s->set_gres(optarg);
    } else {
      return Usage("node", "unknown option '" + in.Word() + "'");
    }
  }
  if (names.empty()) return Usage("node", "no node names given");
  if (!reset && !s->has_features() && !s->has_weight() && !s->has_gres()) {
    return Usage("node", "nothing to update: give --features, --weight or --gres");
  }
  req.set_nodes(Join(names, ","));
  return Send(req, who);
}

}  // namespace muster::cli
