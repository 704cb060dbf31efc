// The worker process: pipes, a poll-based time limit, restart after a crash or hang.
#include "tuner/measurer.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tunec::tuner {

Measurer::Measurer(std::vector<std::string> workerArgv, double timeoutSeconds)
    : argv_(std::move(workerArgv)), timeout_(timeoutSeconds) {
  std::signal(SIGPIPE, SIG_IGN); // a dead worker must not kill the tuner
}

Measurer::~Measurer() {
  stop();
}

Status Measurer::start() {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
    return makeError("cannot create pipes for the measurement worker: ", std::strerror(errno));
  std::vector<char*> args;
  for (std::string& a : argv_) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return makeError("cannot start the measurement worker: ", std::strerror(errno));
  if (pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    if (!std::getenv("TUNEC_TUNER_DEBUG")) {
      int null = open("/dev/null", O_WRONLY);
      if (null >= 0) dup2(null, STDERR_FILENO);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  pid_ = pid;
  toWorker_ = in[1];
  fromWorker_ = out[0];
  buffer_.clear();
  return {};
}

void Measurer::stop() {
  if (pid_ < 0) return;
  close(toWorker_);
  close(fromWorker_);
  kill(pid_, SIGKILL);
  int status;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

MeasureResult Measurer::measure(const MeasureRequest& request, double timeoutScale) {
  MeasureResult result;
  if (pid_ < 0) {
    if (Status s = start(); !s) {
      result.status = db::MeasureStatus::Error;
      result.error = s.error().message();
      return result;
    }
  }
  std::string line = request.toJson().dump() + "\n";
  for (size_t off = 0; off < line.size();) {
    ssize_t n = write(toWorker_, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  double limit = timeout_ * timeoutScale;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
  while (true) {
    if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
      std::string reply = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      try {
        return MeasureResult::fromJson(nlohmann::json::parse(reply));
      } catch (const std::exception& e) {
        result.status = db::MeasureStatus::Error;
        result.error = std::string("unreadable worker reply: ") + e.what();
        stop();
        return result;
      }
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      stop();
      result.status = db::MeasureStatus::Timeout;
      result.error = "no result within " + std::to_string(static_cast<int>(limit)) +
                     " s; the candidate was killed";
      return result;
    }
    pollfd p{fromWorker_, POLLIN, 0};
    int ready = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    char chunk[4096];
    ssize_t n = read(fromWorker_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break; // the worker died
    buffer_.append(chunk, static_cast<size_t>(n));
  }
  // The worker exited: report how.
  int status = 0;
  close(toWorker_);
  close(fromWorker_);
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  result.status = db::MeasureStatus::Error;
  if (WIFSIGNALED(status))
    result.error = std::string("the candidate crashed the worker (signal ") +
                   std::to_string(WTERMSIG(status)) + ", " + strsignal(WTERMSIG(status)) + ")";
  else
    result.error = "the worker exited with status " + std::to_string(WEXITSTATUS(status)) +
                   (WEXITSTATUS(status) == 127 ? " (cannot run " + argv_[0] + ")" : "");
  return result;
}

} // namespace tunec::tuner
