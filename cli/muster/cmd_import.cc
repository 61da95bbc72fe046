// `muster import-slurm-conf slurm.conf [gres.conf] [topology.conf] [-o muster.toml]`: a site's
// Slurm configuration as a muster.toml, with every setting left behind named on stderr (and in
// the file's header).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli.h"
#include "muster/client/slurm_conf_import.h"

namespace muster::cli {
namespace {

constexpr size_t kMaxConfBytes = 16 << 20;

Result<std::string> ReadText(const std::string& path) {
  FILE* in = std::fopen(path.c_str(), "r");
  if (!in) return ErrnoStatus("cannot read " + path, errno);
  std::string text;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, in)) > 0;) {
    text.append(buf, n);
    if (text.size() > kMaxConfBytes) {
      std::fclose(in);
      return InvalidArgument(path + ": larger than 16 MiB; not a Slurm config");
    }
  }
  std::fclose(in);
  return text;
}

std::string Base(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void PrintImportHelp() {
  std::printf(
      "Usage: muster import-slurm-conf SLURM_CONF [GRES_CONF] [TOPOLOGY_CONF] [-o FILE] [--force]\n"
      "Writes an equivalent muster.toml (to stdout, or FILE): the nodes (CPUs, memory,\n"
      "features, GPUs with their type, MIG slices, shards and other GRES), partitions (nodes,\n"
      "default, time limits, tiers, preemption), the topology tree of topology.conf, the\n"
      "priority weights, limits, prolog/epilog, health checks, licenses and private data.\n"
      "Every setting it cannot carry over is named, with its file and line, on stderr and in\n"
      "the file's header. A second file whose name says topology is taken as topology.conf.\n"
      "  -o, --output FILE   write here (refused if it exists, unless --force)\n");
}

}  // namespace

int CmdImportSlurmConf(int argc, char** argv) {
  std::vector<std::string> files;
  std::string output;
  bool force = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      PrintImportHelp();
      return kExitOk;
    } else if (a == "-o" || a == "--output") {
      if (++i >= argc) return Usage("import-slurm-conf", a + " needs a file");
      output = argv[i];
    } else if (a.rfind("--output=", 0) == 0) {
      output = a.substr(9);
    } else if (a == "--force") {
      force = true;
    } else if (!a.empty() && a[0] == '-') {
      return Usage("import-slurm-conf", "unknown option " + a);
    } else {
      files.push_back(a);
    }
  }
  if (files.empty() || files.size() > 3) {
    return Usage("import-slurm-conf", "expected SLURM_CONF [GRES_CONF] [TOPOLOGY_CONF]");
  }
  client::SlurmConfFiles in;
  for (size_t i = 0; i < files.size(); ++i) {
    auto text = ReadText(files[i]);
    if (!text.ok()) return Fail("import-slurm-conf", text.status());
    const bool topology =
        i == 2 || (i == 1 && Base(files[i]).find("topology") != std::string::npos);
    if (i == 0) {
      in.slurm_conf = std::move(*text);
      in.slurm_conf_name = Base(files[i]);
    } else if (topology) {
      in.topology_conf = std::move(*text);
      in.topology_conf_name = Base(files[i]);
    } else {
      in.gres_conf = std::move(*text);
      in.gres_conf_name = Base(files[i]);
    }
  }
  auto imported = client::ImportSlurmConf(in);
  if (!imported.ok()) return Fail("import-slurm-conf", imported.status());
  if (output.empty()) {
    std::fputs(imported->toml.c_str(), stdout);
  } else {
    const int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (force ? O_TRUNC : O_EXCL);
    const int fd = ::open(output.c_str(), flags, 0644);
    if (fd < 0) {
      return Fail(
          "import-slurm-conf",
          ErrnoStatus("cannot create " + output + (errno == EEXIST ? " (--force)" : ""), errno));
    }
    const std::string& t = imported->toml;
    const bool written = ::write(fd, t.data(), t.size()) == static_cast<ssize_t>(t.size());
    ::close(fd);
    if (!written) return Fail("import-slurm-conf", ErrnoStatus("cannot write " + output, errno));
  }
  if (!imported->not_carried.empty()) {
    std::fprintf(stderr, "muster import-slurm-conf: %zu setting(s) not carried over:\n",
                 imported->not_carried.size());
    for (const std::string& n : imported->not_carried) std::fprintf(stderr, "  %s\n", n.c_str());
  }
  return kExitOk;
}

}  // namespace muster::cli
