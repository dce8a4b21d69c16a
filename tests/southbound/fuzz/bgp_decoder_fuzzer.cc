// libFuzzer target for the BGP message decoder: any byte string is framed,
// decoded with both AS sizes, and decoded UPDATEs are re-encoded and decoded
// again. Crashes, sanitizer reports and re-decode failures are findings.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "southbound/bgp/codec.h"

using loom::southbound::bgp::ByteView;
using loom::southbound::bgp::CodecOptions;
using loom::southbound::bgp::DecodeError;
using loom::southbound::bgp::DecodeMessage;
using loom::southbound::bgp::EncodeUpdate;
using loom::southbound::bgp::HeaderStatus;
using loom::southbound::bgp::Message;
using loom::southbound::bgp::MessageType;
using loom::southbound::bgp::ParseHeader;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteView in(data, size);
  size_t len = 0;
  MessageType type;
  DecodeError error;
  (void)ParseHeader(in, &len, &type, &error);
  for (bool four : {true, false}) {
    CodecOptions options{four, true};
    Message m;
    if (!DecodeMessage(in, options, &m, &error)) continue;
    if (m.type != MessageType::kUpdate || m.update.treat_as_withdraw) continue;
    for (const auto& bytes : EncodeUpdate(m.update, options)) {
      Message again;
      if (!DecodeMessage(bytes, options, &again, &error)) abort();
    }
  }
  return 0;
}
