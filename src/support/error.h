// Errors as values: user-caused failures travel as Error/Expected; broken invariants assert.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace tunec {

/// A failure the user can act on: what went wrong, where, and how to fix it (lowercase, no
/// final period, e.g. "model.onnx: node 'conv1' (Conv): unsupported attribute 'foo'").
class Error {
public:
  explicit Error(std::string message) : message_(std::move(message)) {}
  const std::string& message() const { return message_; }
  /// Returns a copy with `context` prepended ("context: message").
  Error withContext(const std::string& context) const { return Error(context + ": " + message_); }

private:
  std::string message_;
};

/// Builds an Error from streamed parts: `return makeError("bad shape ", shape);`.
template <typename... Parts> Error makeError(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return Error(os.str());
}

/// Success, or an Error.
class [[nodiscard]] Status {
public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {} // NOLINT: implicit by design
  static Status ok() { return {}; }
  bool isOk() const { return !error_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Error& error() const { return *error_; }

private:
  std::optional<Error> error_;
};

/// A value of type T, or an Error.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : state_(std::move(value)) {}     // NOLINT: implicit by design
  Expected(Error error) : state_(std::move(error)) {} // NOLINT: implicit by design
  bool isOk() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return isOk(); }
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<Error>(state_); }
  Status status() const { return isOk() ? Status() : Status(error()); }

private:
  std::variant<T, Error> state_;
};

[[noreturn]] void assertionFailed(const char* file, int line, const char* condition,
                                  const std::string& message);

} // namespace tunec

/// Internal invariant: aborts with the message when it does not hold (never for user input).
#define TUNEC_ASSERT(cond, ...)                                                                    \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::ostringstream tunecAssertOs_;                                                           \
      tunecAssertOs_ << "" __VA_ARGS__;                                                            \
      ::tunec::assertionFailed(__FILE__, __LINE__, #cond, tunecAssertOs_.str());                   \
    }                                                                                              \
  } while (false)

#define TUNEC_CONCAT_INNER_(a, b) a##b
#define TUNEC_CONCAT_(a, b) TUNEC_CONCAT_INNER_(a, b)

/// Returns the error of a Status-returning expression from the enclosing function.
#define TUNEC_TRY(expr)                                                                            \
  do {                                                                                             \
    if (auto tunecStatus_ = (expr); !tunecStatus_.isOk()) return tunecStatus_.error();             \
  } while (false)

/// `TUNEC_ASSIGN_OR_RETURN(auto x, f());` unwraps an Expected or returns its error.
#define TUNEC_ASSIGN_OR_RETURN(decl, expr)                                                         \
  auto TUNEC_CONCAT_(tunecExpected_, __LINE__) = (expr);                                           \
  if (!TUNEC_CONCAT_(tunecExpected_, __LINE__).isOk())                                             \
    return TUNEC_CONCAT_(tunecExpected_, __LINE__).error();                                        \
  decl = std::move(TUNEC_CONCAT_(tunecExpected_, __LINE__)).value()
