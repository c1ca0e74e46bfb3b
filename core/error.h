// Typed exceptions for every layer, and the macros that throw them with context.
// Library code throws; only main() exits. Each message says what went wrong and where
// (the op, the shapes, the rank...), and the throwing macro appends file:line.
#pragma once

#include <cerrno>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace ringlet::core {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class ValueError : public Error {  // an argument or a setting out of range
 public:
  using Error::Error;
};
class ShapeError : public Error {  // incompatible shapes
 public:
  using Error::Error;
};
class DTypeError : public Error {  // unsupported or mismatched dtypes
 public:
  using Error::Error;
};
class DeviceError : public Error {  // wrong device, or a device that is not available
 public:
  using Error::Error;
};
class OutOfMemoryError : public Error {  // host or device memory exhausted
 public:
  using Error::Error;
};
class NotBuiltError : public Error {  // a feature this build left out (e.g. CUDA)
 public:
  using Error::Error;
};
class TimeoutError : public Error {  // a deadline passed
 public:
  using Error::Error;
};
class AutogradError : public Error {  // misuse of the autograd graph
 public:
  using Error::Error;
};
class PeerError : public Error {  // a peer died or broke the protocol (transport layer)
 public:
  using Error::Error;
};
class HandshakeError : public Error {  // a connection refused by the other side's handshake
 public:
  using Error::Error;
};
class CollectiveError : public Error {  // a collective failed (collectives layer)
 public:
  using Error::Error;
};
class CaptureError : public Error {  // work a device graph capture cannot hold
 public:
  using Error::Error;
};

// The message of a stored exception ("an unknown error" for one that is no std::exception).
inline std::string error_text(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an unknown error";
  }
}

// The system's words for an errno value (by default the calling thread's current errno).
inline std::string errno_text(int error = errno) { return std::generic_category().message(error); }

// Concatenates anything with operator<< into one string: str("shape ", 3, "x", 4).
template <class... Args>
std::string str(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// The items with `separator` between them, for messages: join({"a.weight", "b"}) is
// "a.weight, b".
inline std::string join(const std::vector<std::string>& items,
                        const std::string& separator = ", ") {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : separator) + items[i];
  return out;
}

}  // namespace ringlet::core

// " [file:line]" under RINGLET_LOG=debug (for the developer), else nothing: the message alone
// has to say what went wrong and where, in the user's terms.
namespace ringlet::core {
std::string error_location(const char* file, int line);
}

#define RINGLET_THROW(Type, ...) \
  throw ::ringlet::core::Type(   \
      ::ringlet::core::str(__VA_ARGS__, ::ringlet::core::error_location(__FILE__, __LINE__)))

#define RINGLET_CHECK(cond, Type, ...)  \
  do {                                  \
    if (!(cond)) {                      \
      RINGLET_THROW(Type, __VA_ARGS__); \
    }                                   \
  } while (0)
