// muster certs: the CA and the daemons' certificates for mutual TLS (see docs/admin-guide.md,
// "Certificates").
#include <getopt.h>

#include <cstdio>
#include <filesystem>

#include "cli.h"
#include "muster/client/certificates.h"
#include "muster/common/config.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"

namespace muster::cli {
namespace {

constexpr const char* kDefaultTlsDir = "/etc/muster/tls";
constexpr const char* kDefaultNodeKeyDir = "/etc/muster/node-keys";
constexpr const char* kDefaultEtcdDir = "/etc/muster/etcd-tls";

void PrintCertsHelp() {
  std::printf(
      "Usage: muster certs [--dir DIR] [--node NAME]... [--no-controller] [--renew] [--days N]\n"
      "       muster certs --node-keys [--dir DIR] [--node NAME]... [--renew]\n"
      "       muster certs --etcd [--dir DIR] [--renew]\n"
      "Makes what is missing in DIR: a CA (ca.crt, ca.key), the controller's certificate\n"
      "(controller.crt, controller.key) and one per node (NAME.crt, NAME.key): every node of\n"
      "the config's [[nodes]], or only those named with --node.\n"
      "  --dir DIR        default: the directory of [tls] ca_file, else %s\n"
      "  --node NAME      only this node (repeatable; a hostlist such as gpu[01-16] works)\n"
      "  --no-controller  leave the controller's certificate out\n"
      "  --renew          issue the controller's and the nodes' certificates again, with new "
      "keys,\n"
      "                   from the same CA (rotation)\n"
      "  --days N         validity of the controller's and nodes' certificates (default 825)\n"
      "  --node-keys      instead, without TLS: each node's key for [node_auth] (NAME.key,\n"
      "                   default DIR %s); with --renew, new ones\n"
      "  --etcd           instead: etcd's own CA, its server's certificate (server.crt, naming\n"
      "                   etcd, 127.0.0.1 and localhost) and the controllers' (client.crt), in\n"
      "                   DIR (default: the directory of etcd_ca_file, else %s)\n"
      "Keep ca.key on the controller's host (or offline); give each node only ca.crt and its own\n"
      "NAME.crt and NAME.key. Node keys: the controllers hold all, each node only its own, 0600.\n",
      kDefaultTlsDir, kDefaultNodeKeyDir, kDefaultEtcdDir);
}

}  // namespace

int CmdCerts(int argc, char** argv) {
  client::CertificateOptions o;
  std::vector<std::string> nodes;
  bool nodes_given = false;
  bool node_keys = false;
  bool etcd = false;
  const struct option opts[] = {
      {"dir", required_argument, nullptr, 'd'},     {"node", required_argument, nullptr, 'n'},
      {"no-controller", no_argument, nullptr, 'C'}, {"renew", no_argument, nullptr, 'r'},
      {"days", required_argument, nullptr, 'D'},    {"node-keys", no_argument, nullptr, 'K'},
      {"help", no_argument, nullptr, 'h'},          {nullptr, 0, nullptr, 0}};
  optind = 0;
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":d:n:h", opts, nullptr)) != -1;) {
    switch (c) {
      case 'd':
        o.dir = optarg;
        break;
      case 'n': {
        auto expanded = ExpandHostlist(optarg);
        if (!expanded.ok()) return Usage("certs", "bad --node: " + expanded.status().message());
        nodes.insert(nodes.end(), expanded->begin(), expanded->end());
        nodes_given = true;
        break;
      }
      case 'C':
        o.controller = false;
        break;
      case 'r':
        o.renew = true;
        break;
      case 'K':
        node_keys = true;
        break;
      case 'E':
        etcd = true;
        break;
      case 'D': {
        auto v = ParseUint(optarg);
        if (!v || *v == 0 || *v > 36500) return Usage("certs", "bad --days (1 to 36500)");
        o.days = static_cast<uint32_t>(*v);
        break;
      }
      case 'h':
        PrintCertsHelp();
        return kExitOk;
      default:
        return Usage("certs", "unknown or incomplete option");
    }
  }
  if (optind < argc)
    return Usage("certs", "unexpected argument '" + std::string(argv[optind]) + "'");

  if (etcd && node_keys) return Usage("certs", "--etcd and --node-keys are separate runs");
  // The config gives the defaults: where [tls] looks, the controller's name, the nodes.
  const std::string config_path = ResolveConfigPath("");
  auto config = LoadConfig(config_path);
  if (etcd) {
    if (o.dir.empty()) {
      o.dir = config.ok() && !config->controller.etcd_ca_file.empty()
                  ? std::filesystem::path(config->controller.etcd_ca_file).parent_path().string()
                  : kDefaultEtcdDir;
    }
    auto report = client::MakeEtcdCertificates(o.dir, o.renew);
    if (!report.ok()) return Fail("certs", report.status());
    for (const auto& f : report->written) std::printf("wrote %s\n", f.c_str());
    for (const auto& f : report->kept) std::printf("kept  %s (--renew to replace it)\n", f.c_str());
    std::printf(
        "\nRun etcd with https:// client and peer URLs and:\n"
        "  --cert-file=%s/server.crt --key-file=%s/server.key --trusted-ca-file=%s/ca.crt "
        "--client-cert-auth\n"
        "  --peer-cert-file=%s/server.crt --peer-key-file=%s/server.key "
        "--peer-trusted-ca-file=%s/ca.crt --peer-client-cert-auth\n"
        "and add under [controller] on the controller hosts:\n"
        "etcd_ca_file = \"%s/ca.crt\"\netcd_cert_file = \"%s/client.crt\"\n"
        "etcd_key_file = \"%s/client.key\"\n",
        o.dir.c_str(), o.dir.c_str(), o.dir.c_str(), o.dir.c_str(), o.dir.c_str(), o.dir.c_str(),
        o.dir.c_str(), o.dir.c_str(), o.dir.c_str());
    return kExitOk;
  }
  if (config.ok()) {
    o.cluster_name = config->cluster_name;
    o.controller_name = config->tls.controller_name;
    if (o.dir.empty() && node_keys && config->node_auth.enabled()) {
      o.dir = std::filesystem::path(config->node_auth.key_file).parent_path().string();
    } else if (o.dir.empty() && !node_keys && config->tls.enabled()) {
      o.dir = std::filesystem::path(config->tls.ca_file).parent_path().string();
    }
    if (!nodes_given) {
      for (const auto& n : config->nodes) nodes.push_back(n.name);
    }
  } else if (!nodes_given && o.controller && !node_keys) {
    std::fprintf(stderr, "muster certs: no config (%s): making the CA and the controller's only\n",
                 config.status().message().c_str());
  }
  if (o.dir.empty()) o.dir = node_keys ? kDefaultNodeKeyDir : kDefaultTlsDir;
  o.nodes = std::move(nodes);
  if (node_keys) {
    if (o.nodes.empty()) return Usage("certs", "no nodes for --node-keys: name them with --node");
    auto report = client::MakeNodeKeys(o);
    if (!report.ok()) return Fail("certs", report.status());
    for (const auto& f : report->written) std::printf("wrote %s\n", f.c_str());
    for (const auto& f : report->kept) std::printf("kept  %s (--renew to replace it)\n", f.c_str());
    if (!config.ok() || !config->node_auth.enabled()) {
      std::printf(
          "\nTo use them, add to %s on every host:\n[node_auth]\nkey_file = \"%s/%%n.key\"\n",
          config_path.c_str(), o.dir.c_str());
    }
    return kExitOk;
  }

  auto report = client::MakeCertificates(o);
  if (!report.ok()) return Fail("certs", report.status());
  for (const auto& f : report->written) std::printf("wrote %s\n", f.c_str());
  for (const auto& f : report->kept) std::printf("kept  %s (--renew to replace it)\n", f.c_str());
  if (!config.ok() || !config->tls.enabled()) {
    std::printf(
        "\nTo use them, add to %s on every host:\n"
        "[tls]\n"
        "ca_file = \"%s/ca.crt\"\n"
        "controller_cert_file = \"%s/controller.crt\"\n"
        "controller_key_file = \"%s/controller.key\"\n"
        "node_cert_file = \"%s/%%n.crt\"\n"
        "node_key_file = \"%s/%%n.key\"\n",
        config_path.c_str(), o.dir.c_str(), o.dir.c_str(), o.dir.c_str(), o.dir.c_str(),
        o.dir.c_str());
  }
  return kExitOk;
}

}  // namespace muster::cli
