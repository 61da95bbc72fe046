// [[controllers]]: the controllers of a hot standby, and where agents and commands look for the
// one that leads.
#include <unistd.h>

#include <set>

#include "config_reader.h"
#include "muster/common/framing.h"

namespace muster {
namespace config_internal {

Status ParseControllers(TableReader& r, Config& c, const std::string& source) {
  return TableArray(
      r, "controllers",
      [&](TableReader& t, const toml::table& tbl) {
        ControllerHostConfig h;
        MUSTER_RETURN_IF_ERROR(t.String("name", &h.name));
        MUSTER_RETURN_IF_ERROR(t.String("agent_address", &h.agent_address));
        MUSTER_RETURN_IF_ERROR(t.String("api_address", &h.api_address));
        MUSTER_RETURN_IF_ERROR(t.String("api_listen", &h.api_listen));
        MUSTER_RETURN_IF_ERROR(t.String("socket", &h.socket_path));
        MUSTER_RETURN_IF_ERROR(t.String("state_dir", &h.state_dir));
        if (!IsValidNodeName(h.name)) {
          return t.Error(t.Has("name") ? t.Get("name") : &tbl, "name",
                         "every [[controllers]] entry needs a name (letters, digits, '.', '_' "
                         "and '-', at most 64): musterctld --name picks its own");
        }
        std::string host;
        uint16_t port = 0;
        if (!SplitHostPort(h.agent_address, &host, &port).ok() || port == 0) {
          return t.Error(t.Has("agent_address") ? t.Get("agent_address") : &tbl, "agent_address",
                         "expected host:port where agents reach controller " + h.name);
        }
        for (const auto& [key, value] :
             {std::pair{"api_address", &h.api_address}, std::pair{"api_listen", &h.api_listen}}) {
          if (!value->empty() && (!SplitHostPort(*value, &host, &port).ok() || port == 0)) {
            return t.Error(t.Get(key), key, "'" + *value + "' is not host:port with a port");
          }
        }
        c.controllers.push_back(std::move(h));
        return Status::Ok();
      },
      source);
}

Status ValidateControllers(const Config& c, const std::string& source) {
  if (c.controllers.size() > 1 && c.controller.etcd_endpoints.empty()) {
    return InvalidArgument(source +
                           ": several [[controllers]] need controller.etcd_endpoints: without an "
                           "election each would lead on its own");
  }
  std::set<std::string> names, addresses;
  for (const ControllerHostConfig& h : c.controllers) {
    if (!names.insert(h.name).second) {
      return InvalidArgument(source + ": controller '" + h.name + "' is listed twice");
    }
    if (!addresses.insert(h.agent_address).second) {
      return InvalidArgument(source + ": two [[controllers]] have agent_address " +
                             h.agent_address);
    }
    if (!IsLoopbackAddress(h.agent_address) && !c.controller.insecure && !c.tls.enabled()) {
      return FailedPrecondition(source + ": controller " + h.name + "'s agent_address " +
                                h.agent_address +
                                " is not a loopback address and [tls] is not configured (see "
                                "controller.agent_address)");
    }
  }
  for (const std::string& e : c.controller.etcd_endpoints) {
    std::string host;
    uint16_t port = 0;
    if (e.find('/') != std::string::npos || !SplitHostPort(e, &host, &port).ok() || port == 0) {
      return InvalidArgument(source + ": controller.etcd_endpoints: '" + e +
                             "' is not host:port (etcd's client URL without http://)");
    }
  }
  const int etcd_tls_files = !c.controller.etcd_ca_file.empty() +
                             !c.controller.etcd_cert_file.empty() +
                             !c.controller.etcd_key_file.empty();
  if (etcd_tls_files != 0 && etcd_tls_files != 3) {
    return InvalidArgument(source +
                           ": controller.etcd_ca_file, etcd_cert_file and etcd_key_file "
                           "go together");
  }
  if (!c.controller.etcd_endpoints.empty() && etcd_tls_files == 0) {
    return FailedPrecondition(
        source +
        ": controller.etcd_endpoints needs etcd_ca_file, etcd_cert_file and "
        "etcd_key_file: an etcd that answers anyone lets any user on its host stop or "
        "split the election (make them with `muster certs --etcd`; run etcd with "
        "--client-cert-auth)");
  }
  if (!c.controller.etcd_prefix.empty() &&
      (c.controller.etcd_prefix.front() != '/' || c.controller.etcd_prefix.back() != '/')) {
    return InvalidArgument(source + ": controller.etcd_prefix must start and end with '/'");
  }
  return Status::Ok();
}

}  // namespace config_internal

namespace {
void AddOnce(std::vector<std::string>* out, const std::string& v) {
  if (v.empty()) return;
  for (const std::string& have : *out) {
    if (have == v) return;
  }
  out->push_back(v);
}

std::vector<std::string> EachController(const Config& c, std::string ControllerHostConfig::*field,
                                        const std::string& fallback) {
  std::vector<std::string> out;
  for (const ControllerHostConfig& h : c.controllers) {
    AddOnce(&out, (h.*field).empty() ? fallback : h.*field);
  }
  if (c.controllers.empty()) AddOnce(&out, fallback);
  return out;
}
}  // namespace

std::vector<std::string> ControllerAgentAddresses(const Config& c) {
  return EachController(c, &ControllerHostConfig::agent_address, c.controller.agent_address);
}

std::vector<std::string> ControllerApiAddresses(const Config& c) {
  return EachController(c, &ControllerHostConfig::api_address, c.controller.api_address);
}

std::vector<std::string> ControllerSocketPaths(const Config& c) {
  return EachController(c, &ControllerHostConfig::socket_path, c.controller.socket_path);
}

std::string DefaultControllerName(const Config& c) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string name = host;
  const size_t dot = name.find('.');
  if (dot != std::string::npos && !c.controllers.empty() && !ConfigForController(c, name).ok()) {
    name.resize(dot);
  }
  return name;
}

Result<Config> ConfigForController(const Config& c, const std::string& name) {
  if (c.controllers.empty()) return c;
  for (const ControllerHostConfig& h : c.controllers) {
    if (h.name != name) continue;
    Config mine = c;
    ControllerConfig& cc = mine.controller;
    cc.agent_address = h.agent_address;
    if (!h.api_address.empty()) {
      cc.api_address = h.api_address;
      cc.api_listen = h.api_listen;
    } else if (!h.api_listen.empty()) {
      cc.api_listen = h.api_listen;
    }
    if (!h.socket_path.empty()) cc.socket_path = h.socket_path;
    if (!h.state_dir.empty()) cc.state_dir = h.state_dir;
    return mine;
  }
  std::string known;
  for (const ControllerHostConfig& h : c.controllers) known += (known.empty() ? "" : ", ") + h.name;
  return NotFound(c.source + ": no [[controllers]] entry is named '" + name +
                  "' (listed: " + known + "); start musterctld with --name NAME");
}

}  // namespace muster
