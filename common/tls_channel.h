// Channel credentials for a gRPC target (gNMI targets): plaintext or TLS (server
// verification against a CA file or gRPC's default roots, optional client
// certificate for mutual TLS, optional server name override). Shared by the
// telemetry collector and the gNMI Set drivers (library loom_tls). The PEM files are checked at
// configuration time by loom::CheckTlsClientFiles (common/tls_files.h).
//
// gRPC 1.51 choice: grpc::experimental::TlsCredentials with a
// FileWatcherCertificateProvider, not grpc::SslCredentials. SslCredentials
// takes the PEM text once, so a rotated certificate would need a new channel;
// the Set drivers keep their channels for the life of loomd
// (channel_keeper.h). The file watcher re-reads the CA, certificate and key
// every kTlsRefreshSeconds and new handshakes use what it read (a file
// pair that does not parse keeps the previous one). The server name override
// is the channel argument GRPC_SSL_TARGET_NAME_OVERRIDE_ARG, which gRPC 1.51's
// TLS credentials honour (TlsCredentials::create_security_connector) as its
// SSL credentials do.
// Thread: any (pure functions).
#ifndef LOOM_COMMON_TLS_CHANNEL_H_
#define LOOM_COMMON_TLS_CHANNEL_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <grpcpp/support/channel_arguments.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "common/text.h"

namespace loom {

// How often the certificate files are re-read (seconds).
inline constexpr unsigned kTlsRefreshSeconds = 10;

struct TlsClientConfig {
  bool enabled = false;     // false = plaintext gRPC.
  std::string ca_path;      // PEM CA bundle; "" = gRPC's default roots.
  std::string cert_path;    // PEM client certificate (chain); "" = none.
  std::string key_path;     // PEM key of cert_path.
  std::string server_name;  // Name the server certificate must carry; "" = the address' host.

  bool operator==(const TlsClientConfig& o) const {
    return enabled == o.enabled && ca_path == o.ca_path && cert_path == o.cert_path &&
           key_path == o.key_path && server_name == o.server_name;
  }
  bool operator!=(const TlsClientConfig& o) const { return !(*this == o); }

  // "TLS (CA /etc/loom/ca.pem, client certificate, server name x)" or "plaintext".
  std::string Describe() const {
    if (!enabled) return "plaintext";
    std::string s = "TLS (CA " + (ca_path.empty() ? std::string("default roots") : ca_path);
    if (!cert_path.empty()) s += ", client certificate " + cert_path;
    if (!server_name.empty()) s += ", server name " + server_name;
    return s + ")";
  }
};

// Credentials for a channel to a target configured with `tls`; adds the
// server name override to `args`. Files are not read here (the provider
// reads them on its own thread); a file that cannot be read fails the
// handshakes, which the callers report as connection errors.
inline std::shared_ptr<grpc::ChannelCredentials> TlsChannelCredentials(
    const TlsClientConfig& tls, grpc::ChannelArguments* args) {
  if (!tls.enabled) return grpc::InsecureChannelCredentials();
  grpc::experimental::TlsChannelCredentialsOptions options;
  const bool identity = !tls.cert_path.empty() && !tls.key_path.empty();
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider;
  if (identity) {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        tls.key_path, tls.cert_path, tls.ca_path, kTlsRefreshSeconds);
  } else if (!tls.ca_path.empty()) {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        tls.ca_path, kTlsRefreshSeconds);
  }
  if (provider) options.set_certificate_provider(provider);
  if (!tls.ca_path.empty()) options.watch_root_certs();  // else: gRPC's default roots
  if (identity) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  if (!tls.server_name.empty() && args != nullptr) {
    args->SetSslTargetNameOverride(tls.server_name);
  }
  return grpc::experimental::TlsCredentials(options);
}

// A finished call's status for the drivers' errors. For the codes that are about
// the connection or the caller (UNAVAILABLE, DEADLINE_EXCEEDED, UNAUTHENTICATED,
// PERMISSION_DENIED) the code's name leads the message, and a failed connection
// says how it was made ("[connection over TLS (CA ..., server name ...)]"), as the
// telemetry collector's errors do; a device's own refusals keep its message.
inline Status ChannelStatus(const grpc::Status& s, const TlsClientConfig& tls) {
  if (s.ok()) return Status::Ok();
  const auto code = static_cast<StatusCode>(s.error_code());
  std::string m = s.error_message();
  switch (code) {
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      m = std::string(StatusCodeName(static_cast<int>(code))) + ": " + m + " [connection over " +
          tls.Describe() + "]";
      break;
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied:
      m = std::string(StatusCodeName(static_cast<int>(code))) + ": " + m;
      break;
    default:
      break;
  }
  return Status(code, std::move(m));
}

}  // namespace loom

#endif  // LOOM_COMMON_TLS_CHANNEL_H_
