// Address helpers every module may use.
#ifndef LOOM_COMMON_NET_H_
#define LOOM_COMMON_NET_H_

#include <string>

namespace loom {

// True for 127.0.0.0/8, ::1 and "localhost"; `host` may be bracketed ("[::1]").
bool IsLoopbackHost(const std::string& host);

}  // namespace loom

#endif  // LOOM_COMMON_NET_H_
