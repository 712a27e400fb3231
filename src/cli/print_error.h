/// The one line a command prints when it stops on an error.
#pragma once

#include <iostream>
#include <string>
#include <string_view>

namespace tessera {

/// "tessera: error: " and the message on stderr, its line breaks written as "\n" so that a file
/// name or a workload holding one cannot make a refusal longer than one line.
inline void print_error(std::string_view message) {
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r'))
    message.remove_suffix(1);
  std::string line = "tessera: error: ";
  for (char c : message) {
    if (c == '\n')
      line += "\\n";
    else if (c == '\r')
      line += "\\r";
    else
      line += c;
  }
  std::cerr << line << "\n";
}

}  // namespace tessera
