// StagingDir leaves nothing behind (issue 50, item 5): a terminating signal removes the live
// staging directory and its files before the process dies of the signal, and a directory a
// killed process left for the same output is removed by the next staging, while a live
// process's and another output's are kept.
#include "support/atomic_file.h"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;

fs::path freshDir(const std::string& tag) {
  fs::path dir =
      fs::temp_directory_path() / ("tunec_atomic_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<std::string> stagingEntries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(".tunec-", 0) == 0)
      out.push_back(e.path().filename().string());
  return out;
}

TEST(StagingDir, ATerminatingSignalRemovesItBeforeTheProcessDies) {
  for (int sig : {SIGTERM, SIGINT}) {
    const fs::path dir = freshDir("signal" + std::to_string(sig));
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      // As a CLI process has it: a background job's ignored signal made default again; a
      // handler an earlier staging of this test process installed (inherited) kept.
      struct sigaction current {};
      if (::sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN)
        ::signal(sig, SIG_DFL);
      auto staging = tunec::StagingDir::beside((dir / "model.so").string());
      if (!staging) ::_exit(3);
      std::ofstream(staging->file("model.o")) << "partial object";
      std::ofstream(staging->file("model.so")) << "partial library";
      ::raise(sig);
      ::_exit(4); // not reached: the signal ends the process
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << status;
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_TRUE(stagingEntries(dir).empty()) << stagingEntries(dir).front();
    fs::remove_all(dir);
  }
}

TEST(StagingDir, ADirectoryAKilledProcessLeftIsRemovedByTheNextStaging) {
  const fs::path dir = freshDir("stale");
  // A process that has ended: its pid names no process once reaped.
  const pid_t gone = ::fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
  auto leave = [&](const std::string& name, long pid) {
    fs::create_directories(dir / name);
    std::ofstream(dir / name / ".pid") << pid << "\n";
    std::ofstream(dir / name / "model.o") << "left behind";
  };
  leave(".tunec-model.so-AAAAAA", gone);       // the same output, its process gone: removed
  leave(".tunec-model.so-BBBBBB", ::getpid()); // the same output, a live process: kept
  leave(".tunec-other.so-CCCCCC", gone);       // another output: kept
  {
    auto staging = tunec::StagingDir::beside((dir / "model.so").string());
    ASSERT_TRUE(staging.isOk()) << staging.error().message();
    EXPECT_EQ(fs::path(staging->path()).filename().string().rfind(".tunec-model.so-", 0), 0u);
  }
  EXPECT_FALSE(fs::exists(dir / ".tunec-model.so-AAAAAA"));
  EXPECT_TRUE(fs::exists(dir / ".tunec-model.so-BBBBBB"));
  EXPECT_TRUE(fs::exists(dir / ".tunec-other.so-CCCCCC"));
  EXPECT_EQ(stagingEntries(dir).size(), 2u) << "the staging of this test is gone too";
  fs::remove_all(dir);
}

} // namespace
