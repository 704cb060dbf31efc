// Enums as records and files spell them: each enum names its spellings once, in a
// specialization of Spellings, and every reader and writer goes through spell / parseSpelling.
#pragma once

#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tunec {

/// The spellings of an enum in records and files: a specialization holds a static array
/// `values` of {enumerator, spelling} pairs. The one place an enum's names are written.
template <typename E> struct Spellings;

template <typename E> std::string_view spell(E e) {
  for (const auto& [value, name] : Spellings<E>::values)
    if (value == e) return name;
  return "?";
}

template <typename E> std::optional<E> parseSpelling(std::string_view name) {
  for (const auto& [value, spelling] : Spellings<E>::values)
    if (spelling == name) return value;
  return std::nullopt;
}

/// "a, b or c": the spellings for an error message.
template <typename E> std::string spellingList() {
  std::string out;
  size_t n = std::size(Spellings<E>::values);
  for (size_t i = 0; i < n; ++i)
    out += std::string(i == 0       ? ""
                       : i + 1 == n ? " or "
                                    : ", ") +
           std::string(Spellings<E>::values[i].second);
  return out;
}

} // namespace tunec
