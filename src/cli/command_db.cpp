// `tunec db` (export, import, merge, stats, best) and `tunec target`: sharing tuning records.
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/model_session.h"
#include "cli/record_checks.h"
#include "cli/target_flag.h"
#include "support/atomic_file.h"
#include "support/terminal_text.h"
#include "templates/template.h"
#include "tuning_db/database.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

namespace tunec::cli {

namespace {

const char* kDbUsage = R"(usage: tunec db <command> [--db FILE] [args]

Reads and shares the tuning records in a SQLite database (default: $TUNEC_DB, else
tuning.db in the working directory, as 'tunec tune' and 'tunec compile' use).

commands:
  export [--target KEY] [--best-only] [--out F]   one JSON record per line (docs/tuning-records.md)
  import FILE|-                                   validate and add records; bad lines are reported
  merge OUT.db IN.db...                           every record of the inputs into OUT
  verify                                          integrity, schema, every record's config
  stats                                           workloads, records, targets, best GFLOP/s
  best WORKLOAD-KEY [--compatible]                the best record for this machine

'tunec db <command> --help' describes a command's flags.
)";

CommandSpec spec(const std::string& name, const std::string& usage, const std::string& summary,
                 std::vector<FlagSpec> flags, int minPos, int maxPos) {
  flags.insert(flags.begin(),
               FlagSpec{"db", "FILE", "tuning database (default $TUNEC_DB, else tuning.db)"});
  return CommandSpec{"db " + name, usage, summary, std::move(flags), minPos, maxPos};
}

int runCommand(const CommandSpec& s, const std::vector<std::string>& argv,
               const std::function<int(const Arguments&)>& body) {
  auto args = Arguments::parse(s, argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(s).c_str(), stdout);
    return 0;
  }
  return body(*args);
}

} // namespace

int commandTarget(const std::vector<std::string>& argv) {
  CommandSpec s{"target",
                "tunec target [--json]",
                "Prints this machine's target description and key, as tuning records store them.\n"
                "The key is what the machine is (ISA features, cores, caches, model), the same\n"
                "under taskset, a cgroup cpuset or a container CPU limit. 'tunec target --json >\n"
                "FILE' writes a target file: 'tunec compile MODEL --target FILE' on any machine\n"
                "then builds for this one, with its records.",
                {{"json", "", "print the target file's JSON (with its key)"}},
                0,
                0};
  return runCommand(s, argv, [](const Arguments& args) {
    const Target& machine = thisMachine();
    db::TargetInfo t = db::TargetInfo::fromTarget(machine);
    if (args.has("json")) {
      nlohmann::json j = machine.toJson();
      j["key"] = t.key();
      std::printf("%s\n", j.dump(2).c_str());
      return 0;
    }
    std::printf("target key   %s\nmodel        %s\nllvm cpu     %s\nisa features %s\ncores        "
                "%d\ncaches       L1d %lld KiB, L2 %lld KiB, L3 %lld KiB\n",
                t.key().c_str(), t.model.c_str(), machine.llvmCpu.c_str(), t.isaKey().c_str(),
                t.cores, static_cast<long long>(t.l1d / 1024), static_cast<long long>(t.l2 / 1024),
                static_cast<long long>(t.l3 / 1024));
    return 0;
  });
}

int commandDb(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0] == "--help" || argv[0] == "-h") {
    std::fputs(kDbUsage, argv.empty() ? stderr : stdout);
    return argv.empty() ? 2 : 0;
  }
  std::string sub = argv[0];
  std::vector<std::string> rest(argv.begin() + 1, argv.end());
  // Commands that only read open the database read-only (it may sit on a read-only mount).
  auto openDb = [](const Arguments& args, bool write) {
    std::string path = args.get("db", defaultDatabasePath());
    return write ? db::TuningDatabase::open(path, true) : db::TuningDatabase::openReadOnly(path);
  };

  if (sub == "export") {
    auto s = spec(
        "export", "tunec db export [--db FILE] [--target KEY] [--best-only] [--out FILE]",
        "Writes one self-describing JSON record per line (stdout unless --out).",
        {{"target", "KEY", "only records of this target key ('tunec target')"},
         {"best-only", "", "only the best ok record per workload, target and template version"},
         {"out", "FILE", "write to FILE"}},
        0, 0);
    return runCommand(s, rest, [&](const Arguments& args) {
      auto db = openDb(args, false);
      if (!db) return fail(db.error().message());
      // --out is written whole or not at all (a temporary file renamed over it).
      auto write = [&](std::ostream& out) {
        return db->exportJsonl(out, args.get("target"), args.has("best-only"));
      };
      Status st = args.has("out") ? writeFileAtomically(args.get("out"), write, {db->path()})
                                  : write(std::cout);
      return st ? 0 : fail(st.error().message());
    });
  }
  if (sub == "import") {
    auto s = spec(
        "import", "tunec db import [--db FILE] RECORDS.jsonl|-",
        "Validates every line (JSON, record schema, config against its template's knob space),\n"
        "reports each rejected line with its number and reason, and imports the rest in one\n"
        "transaction. Importing the same file again adds nothing. Exit status 1 if any line was "
        "rejected.",
        {}, 1, 1);
    return runCommand(s, rest, [&](const Arguments& args) {
      auto db = openDb(args, true);
      if (!db) return fail(db.error().message());
      std::string path = args.positionals()[0];
      std::ifstream file;
      if (path != "-") {
        file.open(path);
        if (!file) return fail(path + ": cannot open file");
      }
      auto report = db->importJsonl(path == "-" ? std::cin : file, validateRecord);
      if (!report) return fail(report.error().message());
      for (const std::string& line : report->rejected)
        std::fprintf(stderr, "tunec: %s: rejected %s\n", forTerminal(path).c_str(),
                     forTerminal(line).c_str());
      std::printf(
          "imported %lld records into %s (%lld already present, %zu rejected, %lld lines)\n",
          static_cast<long long>(report->imported), db->path().c_str(),
          static_cast<long long>(report->duplicates), report->rejected.size(),
          static_cast<long long>(report->lines));
      return report->rejected.empty() ? 0 : 1;
    });
  }
  if (sub == "merge") {
    auto s = spec(
        "merge", "tunec db merge OUT.db IN.db... (or: tunec db merge IN.db... -o OUT.db)",
        "Adds every record of the inputs to OUT (created if missing; its own records stay),\n"
        "each checked as 'db import' checks a line: one record per workload, target, template\n"
        "version and config, with the fastest time measured; every config anyone measured is\n"
        "kept, so the best per workload and target is the best of all inputs. Merging the same\n"
        "inputs again changes nothing. Exit status 1 if any record was rejected (each is "
        "reported).",
        {{"o", "FILE", "the output database (then every positional is an input)"}}, 1, 1 << 20);
    return runCommand(s, rest, [&](const Arguments& args) {
      std::vector<std::string> inputs = args.positionals();
      std::string out = args.get("o");
      if (out.empty()) {
        if (inputs.size() < 2) return fail("tunec db merge: expected OUT.db IN.db...");
        out = inputs.front();
        inputs.erase(inputs.begin());
      }
      auto merged = db::mergeDatabases(out, inputs, validateRecord);
      if (!merged) return fail(merged.error().message());
      size_t rejected = 0;
      for (const db::MergeInput& in : *merged) {
        if (in.skipped) {
          std::printf("%s: skipped (it is the output)\n", in.path.c_str());
          continue;
        }
        for (const std::string& why : in.report.rejected)
          std::fprintf(stderr, "tunec: %s: rejected record %s\n", forTerminal(in.path).c_str(),
                       forTerminal(why).c_str());
        rejected += in.report.rejected.size();
        std::printf("%s: %lld records added or improved, %lld already there, %zu rejected\n",
                    in.path.c_str(), static_cast<long long>(in.report.imported),
                    static_cast<long long>(in.report.duplicates), in.report.rejected.size());
      }
      auto stats = db::TuningDatabase::openReadOnly(out);
      if (!stats) return fail(stats.error().message());
      auto st = stats->stats();
      if (!st) return fail(st.error().message());
      std::printf("%s: %lld workloads, %lld records, %lld targets\n", out.c_str(),
                  static_cast<long long>(st->workloads), static_cast<long long>(st->records),
                  static_cast<long long>(st->targets));
      return rejected == 0 ? 0 : 1;
    });
  }
  if (sub == "verify") {
    auto s = spec(
        "verify", "tunec db verify [--db FILE]",
        "Checks a tuning database through and through: SQLite's full integrity check and\n"
        "references, the schema against this tunec's, and every record: its JSON, its workload\n"
        "key, and its config against its template version's knob space. Prints each problem;\n"
        "exit status 1 if there is any. The database is not changed.",
        {}, 0, 0);
    return runCommand(s, rest, [&](const Arguments& args) {
      auto db = openDb(args, false);
      if (!db) return fail(db.error().message());
      auto report = db->verify(validateRecord);
      if (!report) return fail(report.error().message());
      for (const std::string& p : report->problems)
        std::printf("%s: %s\n", db->path().c_str(), p.c_str());
      std::printf("%s: %lld records, %lld workloads, %lld targets: %s\n", db->path().c_str(),
                  static_cast<long long>(report->records),
                  static_cast<long long>(report->workloads),
                  static_cast<long long>(report->targets),
                  report->problems.empty()
                      ? "ok"
                      : (std::to_string(report->problems.size()) + " problems").c_str());
      return report->problems.empty() ? 0 : 1;
    });
  }
  if (sub == "stats") {
    auto s =
        spec("stats", "tunec db stats [--db FILE]",
             "Counts workloads, records and targets, and the best GFLOP/s per workload.", {}, 0, 0);
    return runCommand(s, rest, [&](const Arguments& args) {
      auto db = openDb(args, false);
      if (!db) return fail(db.error().message());
      auto st = db->stats();
      if (!st) return fail(st.error().message());
      std::printf("%s: %lld workloads, %lld records, %lld targets\n", db->path().c_str(),
                  static_cast<long long>(st->workloads), static_cast<long long>(st->records),
                  static_cast<long long>(st->targets));
      for (const auto& w : st->perWorkload)
        std::printf("  %s  %-10s %6lld records  best %.1f GFLOP/s\n", w.key.c_str(),
                    w.templateName.c_str(), static_cast<long long>(w.records), w.bestGflops);
      return 0;
    });
  }
  if (sub == "best") {
    auto s =
        spec("best", "tunec db best [--db FILE] WORKLOAD-KEY [--compatible]",
             "Prints the best record of a workload for this machine's target; --compatible also\n"
             "accepts records of other machines with the same ISA features (and says so).",
             {{"compatible", "", "fall back to targets with the same ISA features"}}, 1, 1);
    return runCommand(s, rest, [&](const Arguments& args) {
      auto db = openDb(args, false);
      if (!db) return fail(db.error().message());
      db::TargetInfo target = db::TargetInfo::fromTarget(thisMachine());
      std::string key = args.positionals()[0];
      auto found = lookUpBest(*db, key, target, args.has("compatible"));
      if (!found) return fail(found.error().message());
      if (!found->anyRecords) return fail("no records of workload " + key + " in " + db->path());
      const std::optional<db::BestRecord>& best = found->best;
      if (!best)
        return fail("no ok record of workload " + key + " for this target (" + target.key() +
                    ") and template version " + std::to_string(found->templateVersion) +
                    (args.has("compatible") ? "" : "; try --compatible"));
      if (!best->exactTarget)
        std::fprintf(
            stderr, "tunec: note: record measured on another machine with the same ISA features\n");
      std::printf("%s\n", best->record.toJson()
                              .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                              .c_str());
      return 0;
    });
  }
  std::fprintf(stderr, "tunec: unknown db command '%s'; see 'tunec db --help'\n", sub.c_str());
  return 2;
}

} // namespace tunec::cli
