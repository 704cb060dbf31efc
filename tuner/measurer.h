// The measurer never trusts a candidate (DESIGN.md, decision 10): every candidate runs in a
// worker child process (`tunec tune-worker`) under a time limit. A crash or a hang of generated
// code becomes an error or timeout result; the worker is restarted and the job goes on.
#pragma once

#include "support/error.h"
#include "tuner/measure_protocol.h"

#include <string>
#include <sys/types.h>
#include <vector>

namespace tunec::tuner {

class Measurer {
public:
  /// `workerArgv`: the worker command (e.g. {"/path/tunec", "tune-worker"}).
  Measurer(std::vector<std::string> workerArgv, double timeoutSeconds);
  ~Measurer();
  Measurer(const Measurer&) = delete;
  Measurer& operator=(const Measurer&) = delete;

  /// Measures one candidate (starting the worker if needed), within `timeoutScale` times the
  /// time limit.
  MeasureResult measure(const MeasureRequest& request, double timeoutScale = 1);
  /// Stops the worker (it is started again by the next measure).
  void stop();

private:
  Status start();
  std::vector<std::string> argv_;
  double timeout_;
  pid_t pid_ = -1;
  int toWorker_ = -1, fromWorker_ = -1;
  std::string buffer_;
};

} // namespace tunec::tuner
