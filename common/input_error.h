// Bad input: a case, a policy string or a command-line argument that cannot be used. The message is one line
// that names what is wrong; the CLI turns it into exit code 2.
#pragma once
#include <stdexcept>
#include <string>

namespace ckpt {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ckpt
