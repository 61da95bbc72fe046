// muster share / sshare: the fair-share tree, the most under-served first, with each line's
// shares, usage (billing units, decayed) and its users' fair-share factor.
#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string_view>

#include "cli.h"
#include "format_spec.h"
#include "muster/common/config.h"
#include "muster/common/strings.h"
#include "muster/common/version.h"
#include "output.h"

namespace muster::cli {
namespace {

void PrintShareUsage(const std::string& prog) {
  std::printf(
      "Usage: %s [-a] [-l] [-A ACCOUNTS] [-u USERS] [-U] [-m] [-n] [-p|-P] [-o FIELDS] [-e]\n"
      "       [-M CLUSTER] [-v]\n",
      prog.c_str());
}

void PrintShareHelp(const std::string& prog) {
  PrintShareUsage(prog);
  std::printf(
      "The fair-share tree: accounts (indented by depth) and their users, in the order Fair\n"
      "Tree ranks them. Without -a or -u, the accounts and your own lines.\n"
      "  -a, --all            every user's lines\n"
      "  -l, --long           with LevelFS (shares over usage among siblings)\n"
      "  -A, --accounts=LIST  only these accounts\n"
      "  -u, --users=LIST     only these users' lines (with their accounts')\n"
      "  -U, --Users          only users' lines, not their accounts'\n"
      "  -m, --partition      with the Partition column (empty: associations are not per\n"
      "                       partition here)\n"
      "  -n, --noheader       -p, --parsable ('|' after each field), -P, --parsable2 ('|'\n"
      "                       between fields)\n"
      "  -o, --format=LIST    fields by name or its start (NAME%%WIDTH sets a width); -e lists\n"
      "                       them\n");
}

std::string Fixed(double v) {
  if (std::isinf(v)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}

struct Field {
  const char* name;
  int width;
  bool left;
  std::function<std::string(const v1::ShareRow&)> value;
  const char* missing = nullptr;  // a Slurm field Muster does not have: why
};

// sshare's fields in Slurm's order (a name's start picks the first it begins).
const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = {
      {"Account", 20, true,
       [](const v1::ShareRow& r) {
         return std::string(r.depth() + 1 + (r.user().empty() ? 0 : 1), ' ') + r.account();
       }},
      {"Cluster", 10, false, nullptr},  // the config's cluster_name, filled in by CmdShare
      {"EffectvUsage", 13, false, [](const v1::ShareRow& r) { return Fixed(r.effective_usage()); }},
      {"FairShare", 10, false,
       [](const v1::ShareRow& r) { return r.user().empty() ? "" : Fixed(r.fairshare()); }},
      {"LevelFS", 10, false, [](const v1::ShareRow& r) { return Fixed(r.level_fs()); }},
      {"ID", 6, false, nullptr, "associations have no numeric ids here"},
      {"NormShares", 11, false, [](const v1::ShareRow& r) { return Fixed(r.norm_shares()); }},
      {"NormUsage", 11, false, nullptr, "Fair Tree does not use it, so it is not computed"},
      // Associations are not per partition here: the column is empty, as Slurm's is then.
      {"Partition", 12, false, [](const v1::ShareRow&) { return std::string(); }},
      {"RawShares", 10, false,
       [](const v1::ShareRow& r) { return std::to_string(r.raw_shares()); }},
      {"RawUsage", 11, false,
       [](const v1::ShareRow& r) {
         return std::to_string(static_cast<uint64_t>(std::llround(r.raw_usage())));
       }},
      {"User", 10, false, [](const v1::ShareRow& r) { return r.user(); }},
      {"GrpTRESMins", 30, false, nullptr, "TRES-minute limits are not kept per association"},
      {"GrpTRESRaw", 30, false, nullptr, "TRES usage is kept in billing units only (RawUsage)"},
      {"TRESRunMins", 30, false, nullptr, "running TRES-minutes are not tracked"},
  };
  return fields;
}

}  // namespace

int CmdShare(int argc, char** argv) {
  const std::string prog = FrontEnd().empty() ? "muster share" : FrontEnd();
  bool all = false, longer = false, header = true, users_only = false, partition = false;
  bool parsable = false, trailing_bar = false;  // -P: '|' between fields; -p: after each too
  std::string format, clusters;
  v1::ListSharesRequest req;
  enum : int { kOptHelp = 256, kOptUsage };
  const struct option opts[] = {{"all", no_argument, nullptr, 'a'},
                                {"long", no_argument, nullptr, 'l'},
                                {"accounts", required_argument, nullptr, 'A'},
                                {"users", required_argument, nullptr, 'u'},
                                {"Users", no_argument, nullptr, 'U'},
                                {"partition", no_argument, nullptr, 'm'},
                                {"noheader", no_argument, nullptr, 'n'},
                                {"parsable2", no_argument, nullptr, 'P'},
                                {"parsable", no_argument, nullptr, 'p'},
                                {"format", required_argument, nullptr, 'o'},
                                {"helpformat", no_argument, nullptr, 'e'},
                                {"clusters", required_argument, nullptr, 'M'},
                                {"cluster", required_argument, nullptr, 'M'},
                                {"verbose", no_argument, nullptr, 'v'},
                                {"version", no_argument, nullptr, 'V'},
                                {"help", no_argument, nullptr, kOptHelp},
                                {"usage", no_argument, nullptr, kOptUsage},
                                {nullptr, 0, nullptr, 0}};
  optind = 0;
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":alA:u:UmnPpo:eM:vVh", opts, nullptr)) != -1;) {
    switch (c) {
      case 'a':
        all = true;
        break;
      case 'l':
        longer = true;
        break;
      case 'A':
        for (const auto& a : Split(optarg, ',', true)) req.add_accounts(a);
        break;
      case 'u':
        for (const auto& u : Split(optarg, ',', true)) req.add_users(u);
        break;
      case 'U':
        users_only = true;
        break;
      case 'm':
        partition = true;
        break;
      case 'n':
        header = false;
        break;
      case 'P':
        parsable = true;
        trailing_bar = false;
        break;
      case 'p':
        parsable = true;
        trailing_bar = true;
        break;
      case 'o':
        format = optarg;
        break;
      case 'M':
        clusters = optarg;
        break;
      case 'v':  // nothing more to tell than the listing
        break;
      case 'V':
        std::printf("slurm %s\nmuster %s\n", kSlurmCompatVersion, kVersion);
        return kExitOk;
      case 'e': {
        // The fields -o takes, four to a line.
        std::string line;
        int n = 0;
        for (const Field& f : Fields()) {
          if (f.missing) continue;
          line += std::string(f.name) + std::string(20 - std::strlen(f.name), ' ');
          if (++n % 4 == 0) {
            while (!line.empty() && line.back() == ' ') line.pop_back();
            std::printf("%s\n", line.c_str());
            line.clear();
          }
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        if (!line.empty()) std::printf("%s\n", line.c_str());
        return kExitOk;
      }
      case 'h':
      case kOptHelp:
        PrintShareHelp(prog);
        return kExitOk;
      case kOptUsage:
        PrintShareUsage(prog);
        return kExitOk;
      case ':':
        return Usage("share", "option '" + std::string(argv[optind - 1]) + "' needs a value");
      default:
        return Usage("share",
                     "unknown or incomplete option '" + std::string(argv[optind - 1]) + "'");
    }
  }
  if (optind < argc)
    return Usage("share", "unexpected argument '" + std::string(argv[optind]) + "'");
  if (!all && req.users().empty()) {
    // Your own lines, with every account's.
    req.add_users(CurrentUserName());
  }
  req.set_with_accounts(true);
  if (format.empty()) {
    format = partition ? "Account,User,Partition,RawShares,NormShares,RawUsage,EffectvUsage,"
                         "FairShare"
                       : "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare";
    if (longer) format += ",LevelFS";
  }
  struct Chosen {
    const Field* field;
    int width;
  };
  std::string supported;
  for (const Field& f : Fields()) {
    if (!f.missing) supported += std::string(supported.empty() ? "" : " ") + f.name;
  }
  // As sshare: a field by its name or the start of it (the first field it begins).
  std::string missing;
  auto find = [&](const std::string& name) -> std::optional<size_t> {
    for (size_t i = 0; i < Fields().size() && !name.empty(); ++i) {
      const std::string_view full = Fields()[i].name;
      if (name.size() <= full.size() && EqualsIgnoreCase(full.substr(0, name.size()), name)) {
        if (Fields()[i].missing && missing.empty()) {
          missing = std::string(full) + ": " + Fields()[i].missing;
        }
        return i;
      }
    }
    return std::nullopt;
  };
  if (format[0] == '%' || format.find(",%") != std::string::npos) {
    return Usage("share", "-o/--format takes field names (Account,User%12,...), not %-letters");
  }
  auto named = ParseNamedFields(format, find, supported);
  if (!named.ok()) return Usage("share", "-o/--format: " + named.status().message());
  if (!missing.empty()) {
    return Usage("share", "-o/--format: field " + missing + " (fields: " + supported + ")");
  }
  std::vector<Chosen> chosen;
  for (const NamedField& n : *named) {
    const Field& f = Fields()[n.index];
    chosen.push_back({&f, n.width ? static_cast<int>(n.width) : f.width});
  }
  auto controller = ConnectController(clusters);
  if (!controller.ok()) return Fail("share", controller.status());
  std::string cluster;
  if (std::any_of(chosen.begin(), chosen.end(), [](const Chosen& c) { return !c.field->value; })) {
    if (auto config = LoadConfig(ResolveConfigPath("")); config.ok()) {
      cluster = config->cluster_name;
    }
  }
  v1::ListSharesResponse resp;
  if (Status st = controller->Call(v1::METHOD_LIST_SHARES, req, &resp); !st.ok()) {
    return Fail("share", st);
  }
  auto print = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      if (parsable) {
        line += (i ? "|" : "") + cells[i];
        continue;
      }
      const size_t w = static_cast<size_t>(chosen[i].width);
      std::string cell = cells[i].substr(0, w);
      std::string pad(w - cell.size(), ' ');
      line += (i ? " " : "") + (chosen[i].field->left ? cell + pad : pad + cell);
    }
    if (trailing_bar) line += '|';
    std::printf("%s\n", line.c_str());
  };
  if (header) {
    std::vector<std::string> names, dashes;
    for (const Chosen& c : chosen) {
      names.push_back(c.field->name);
      dashes.push_back(std::string(static_cast<size_t>(c.width), '-'));
    }
    print(names);
    if (!parsable) print(dashes);
  }
  for (const v1::ShareRow& r : resp.rows()) {
    if (users_only && r.user().empty()) continue;
    std::vector<std::string> cells;
    for (const Chosen& c : chosen) cells.push_back(c.field->value ? c.field->value(r) : cluster);
    print(cells);
  }
  return kExitOk;
}

}  // namespace muster::cli
