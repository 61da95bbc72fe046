// muster share / sshare: the fair-share tree, the most under-served first, with each line's
// shares, usage (billing units, decayed) and its users' fair-share factor.
#include <getopt.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <functional>

#include "cli.h"
#include "format_spec.h"
#include "muster/common/strings.h"
#include "output.h"

namespace muster::cli {
namespace {

void PrintShareHelp(const std::string& prog) {
  std::printf(
      "Usage: %s [-a] [-l] [-A ACCOUNTS] [-u USERS] [-n] [-P] [-o FIELDS]\n"
      "The fair-share tree: accounts (indented by depth) and their users, in the order Fair\n"
      "Tree ranks them. Without -a or -u, the accounts and your own lines.\n"
      "  -a, --all            every user's lines\n"
      "  -l, --long           with LevelFS (shares over usage among siblings)\n"
      "  -A, --accounts=LIST  only these accounts\n"
      "  -u, --users=LIST     only these users' lines (with their accounts')\n"
      "  -n, --noheader       -P, --parsable2 ('|' between fields)\n"
      "  -o, --format=LIST    Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare,\n"
      "                       LevelFS (NAME%%WIDTH sets a width)\n",
      prog.c_str());
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
};

const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = {
      {"Account", 20, true,
       [](const v1::ShareRow& r) {
         return std::string(r.depth() + 1 + (r.user().empty() ? 0 : 1), ' ') + r.account();
       }},
      {"User", 10, false, [](const v1::ShareRow& r) { return r.user(); }},
      {"RawShares", 10, false,
       [](const v1::ShareRow& r) { return std::to_string(r.raw_shares()); }},
      {"NormShares", 11, false, [](const v1::ShareRow& r) { return Fixed(r.norm_shares()); }},
      {"RawUsage", 11, false,
       [](const v1::ShareRow& r) {
         return std::to_string(static_cast<uint64_t>(std::llround(r.raw_usage())));
       }},
      {"EffectvUsage", 13, false, [](const v1::ShareRow& r) { return Fixed(r.effective_usage()); }},
      {"FairShare", 10, false,
       [](const v1::ShareRow& r) { return r.user().empty() ? "" : Fixed(r.fairshare()); }},
      {"LevelFS", 10, false, [](const v1::ShareRow& r) { return Fixed(r.level_fs()); }},
  };
  return fields;
}

}  // namespace

int CmdShare(int argc, char** argv) {
  const std::string prog = FrontEnd().empty() ? "muster share" : FrontEnd();
  bool all = false, longer = false, header = true, parsable = false;
  std::string format;
  v1::ListSharesRequest req;
  const struct option opts[] = {{"all", no_argument, nullptr, 'a'},
                                {"long", no_argument, nullptr, 'l'},
                                {"accounts", required_argument, nullptr, 'A'},
                                {"users", required_argument, nullptr, 'u'},
                                {"noheader", no_argument, nullptr, 'n'},
                                {"parsable2", no_argument, nullptr, 'P'},
                                {"parsable", no_argument, nullptr, 'p'},
                                {"format", required_argument, nullptr, 'o'},
                                {"help", no_argument, nullptr, 'h'},
                                {nullptr, 0, nullptr, 0}};
  optind = 0;
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":alA:u:nPpo:h", opts, nullptr)) != -1;) {
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
      case 'n':
        header = false;
        break;
      case 'P':
      case 'p':
        parsable = true;
        break;
      case 'o':
        format = optarg;
        break;
      case 'h':
        PrintShareHelp(prog);
        return kExitOk;
      default:
        return Usage("share", "unknown or incomplete option");
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
    format = "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare";
    if (longer) format += ",LevelFS";
  }
  struct Chosen {
    const Field* field;
    int width;
  };
  std::string supported;
  for (const Field& f : Fields()) supported += std::string(supported.empty() ? "" : " ") + f.name;
  auto find = [](const std::string& name) -> std::optional<size_t> {
    for (size_t i = 0; i < Fields().size(); ++i) {
      if (EqualsIgnoreCase(Fields()[i].name, name)) return i;
    }
    return std::nullopt;
  };
  auto named = ParseNamedFields(format, find, supported);
  if (!named.ok()) return Usage("share", named.status().message());
  std::vector<Chosen> chosen;
  for (const NamedField& n : *named) {
    const Field& f = Fields()[n.index];
    chosen.push_back({&f, n.width ? static_cast<int>(n.width) : f.width});
  }
  auto controller = ConnectController();
  if (!controller.ok()) return Fail("share", controller.status());
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
    std::vector<std::string> cells;
    for (const Chosen& c : chosen) cells.push_back(c.field->value(r));
    print(cells);
  }
  return kExitOk;
}

}  // namespace muster::cli
