// How loomctl reaches loomd: address, TLS material and bearer token, from flags,
// then environment variables, then a context of the client config file
// ($LOOMCONFIG, else ~/.config/loom/config.json; kubeconfig-like):
//
//   {"currentContext": "prod",
//    "contexts": [{"name": "prod", "server": "loom.example.net:50061",
//                  "ca": "/etc/loom/ca.pem", "cert": "me.pem", "key": "me-key.pem",
//                  "tokenFile": "/run/secrets/loom-token", "serverName": "loomd"}]}
//
// Relative paths in the file are relative to the file.
#ifndef LOOM_API_LOOMCTL_CREDENTIALS_H_
#define LOOM_API_LOOMCTL_CREDENTIALS_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/flags.h"

namespace loom::loomctl {

struct Connection {
  std::string server;
  std::string ca, cert, key;  // paths; TLS when ca or cert is set (or tls)
  bool tls = false;
  std::string server_name;  // TLS name to verify instead of the host
  std::string token;        // bearer token (read from token_file)
  std::string token_file;
};

// Resolves the connection from flags (server, ca, cert, key, token-file,
// server-name, context), environment (LOOM_SERVER, LOOM_CA, LOOM_CERT, LOOM_KEY,
// LOOM_TOKEN, LOOM_TOKEN_FILE, LOOM_SERVER_NAME, LOOM_CONTEXT) and the config
// file. False with `error` naming the flag, variable or file that is wrong.
bool ResolveConnection(const loom::Flags& flags, Connection* out, std::string* error);

// The channel: TLS (grpc::SslCredentials) or plaintext. A bearer token over
// plaintext is refused unless the server is on loopback.
std::shared_ptr<grpc::Channel> MakeChannel(const Connection& c, std::string* error);

// Adds the bearer token (if any) to a call.
void AddCredentials(grpc::ClientContext* ctx, const Connection& c);

}  // namespace loom::loomctl

#endif  // LOOM_API_LOOMCTL_CREDENTIALS_H_
