// Configuration-time checks of TLS files (PEM CA bundles, certificates and
// keys) for gNMI targets and the metrics port: readable, parseable, the key
// matching the certificate. Errors name the field ("gnmi.tls.ca_path: ...").
// Thread: any (pure functions over the files).
#ifndef LOOM_COMMON_TLS_FILES_H_
#define LOOM_COMMON_TLS_FILES_H_

#include <string>

#include "common/tls_channel.h"

namespace loom {

// "" when `path` holds at least one PEM certificate; else why not, prefixed
// with `field` ("gnmi.tls.ca_path: cannot read /x: No such file or directory").
std::string CheckPemCertificates(const std::string& field, const std::string& path);
// "" when `key_path` holds a PEM private key that matches the first
// certificate of `cert_path` (both checked as above).
std::string CheckPemKeyPair(const std::string& cert_field, const std::string& cert_path,
                            const std::string& key_field, const std::string& key_path);

// "" when the first certificate of `path` is valid now (a certificate a server is
// about to serve: loomd's own API). Not part of the checks above, which also serve
// test targets that present expired certificates on purpose.
std::string CheckCertificateCurrent(const std::string& field, const std::string& path);

// Every file `tls` names (fields prefixed `prefix`, e.g. "gnmi.tls."), and
// the pairs: cert_path and key_path come together. "" when usable.
std::string CheckTlsClientFiles(const TlsClientConfig& tls, const std::string& prefix);

}  // namespace loom

#endif  // LOOM_COMMON_TLS_FILES_H_
