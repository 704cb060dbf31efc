// forTerminal: text from models and databases on its way to the terminal.
#include "support/terminal_text.h"

#include <gtest/gtest.h>

namespace tunec {
namespace {

TEST(TerminalText, ControlCharactersAreEscapedAndEverythingElseKept) {
  // An ANSI colour, a window-title sequence (OSC ... BEL), a carriage return that would hide
  // the start of the line, backspace and DEL.
  EXPECT_EQ(forTerminal("a\x1b[31mred\x1b]0;title\x07\r\b\x7f"),
            "a\\x1b[31mred\\x1b]0;title\\x07\\x0d\\x08\\x7f");
  EXPECT_EQ(forTerminal("two\nlines\tand a tab"), "two\nlines\tand a tab");
  // C1 controls as UTF-8 (U+009B, the one-byte CSI) are escaped; other UTF-8 stays.
  EXPECT_EQ(forTerminal("csi\xc2\x9b"
                        "31m, caf\xc3\xa9, \xe2\x86\x92"),
            "csi\\u009b31m, caf\xc3\xa9, \xe2\x86\x92");
  EXPECT_EQ(forTerminal(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(forTerminal(""), "");
  EXPECT_EQ(forTerminal("\xc2"), "\xc2"); // a truncated sequence is not a control
}

} // namespace
} // namespace tunec
