// Text from models, files and databases on its way to a terminal: control characters escaped,
// so that a node name, an output name or a rejected record cannot move the cursor, retitle the
// window or hide the rest of a message.
#pragma once

#include <string>
#include <string_view>

namespace tunec {

/// `text` with its C0 control characters (but newline and tab), DEL and the C1 controls
/// (U+0080-U+009F, as UTF-8) written as \xHH or \u00HH; everything else, other UTF-8 included,
/// unchanged.
std::string forTerminal(std::string_view text);

} // namespace tunec
