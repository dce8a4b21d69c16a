#include "api/loomctl/credentials.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cstdlib>

#include "common/file.h"
#include "common/net.h"

namespace loom::loomctl {

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// A client file (config, PEM, token): at most 1 MiB.
bool ReadFile(const std::string& path, std::string* out) {
  std::string error;
  return loom::ReadFileCapped(path, size_t{1} << 20, "file", out, &error);
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

// The host of "host:port" ("[v6]:port") is a loopback address.
bool IsLoopback(const std::string& server) {
  return loom::IsLoopbackHost(server.substr(0, server.rfind(':')));
}

// Fills what is still empty in `out` from the config file's context.
bool FromConfigFile(const std::string& context_name, Connection* out, std::string* error) {
  std::string path = Env("LOOMCONFIG");
  const bool explicit_path = !path.empty();
  if (path.empty()) {
    const std::string home = Env("HOME");
    if (home.empty()) return true;
    path = home + "/.config/loom/config.json";
  }
  std::string text;
  if (!ReadFile(path, &text)) {
    if (explicit_path) {
      *error = "LOOMCONFIG: cannot read " + path;
      return false;
    }
    return true;  // no file: nothing to take
  }
  google::protobuf::Struct doc;
  if (!google::protobuf::util::JsonStringToMessage(text, &doc).ok()) {
    *error = path + ": not valid JSON";
    return false;
  }
  const auto& f = doc.fields();
  std::string want = context_name;
  if (want.empty() && f.count("currentContext")) want = f.at("currentContext").string_value();
  if (!f.count("contexts")) return true;
  const google::protobuf::Struct* ctx = nullptr;
  for (const auto& v : f.at("contexts").list_value().values()) {
    const auto& c = v.struct_value().fields();
    if (want.empty() || (c.count("name") && c.at("name").string_value() == want)) {
      ctx = &v.struct_value();
      break;
    }
  }
  if (ctx == nullptr) {
    if (!want.empty()) {
      *error = path + ": no context named \"" + want + "\"";
      return false;
    }
    return true;
  }
  const std::string dir = path.substr(0, path.rfind('/') + 1);
  auto take = [&](const char* key, std::string* into, bool is_path) {
    if (!into->empty() || !ctx->fields().count(key)) return;
    std::string v = ctx->fields().at(key).string_value();
    if (is_path && !v.empty() && v[0] != '/') v = dir + v;
    *into = v;
  };
  take("server", &out->server, false);
  take("ca", &out->ca, true);
  take("cert", &out->cert, true);
  take("key", &out->key, true);
  take("tokenFile", &out->token_file, true);
  take("serverName", &out->server_name, false);
  if (ctx->fields().count("tls") && ctx->fields().at("tls").bool_value()) out->tls = true;
  return true;
}

}  // namespace

bool ResolveConnection(const loom::Flags& flags, Connection* out, std::string* error) {
  auto pick = [&](const char* flag, const char* env) {
    return flags.Has(flag) ? flags.Get(flag) : Env(env);
  };
  out->server = pick("server", "LOOM_SERVER");
  out->ca = pick("ca", "LOOM_CA");
  out->cert = pick("cert", "LOOM_CERT");
  out->key = pick("key", "LOOM_KEY");
  out->token_file = pick("token-file", "LOOM_TOKEN_FILE");
  out->server_name = pick("server-name", "LOOM_SERVER_NAME");
  // --token-file beats $LOOM_TOKEN, which beats $LOOM_TOKEN_FILE and the config file.
  if (!flags.Has("token-file")) {
    out->token = Env("LOOM_TOKEN");
    if (!out->token.empty()) out->token_file.clear();
  }
  if (!FromConfigFile(pick("context", "LOOM_CONTEXT"), out, error)) return false;
  if (out->server.empty()) out->server = "127.0.0.1:50061";
  if (out->cert.empty() != out->key.empty()) {
    *error = "--cert and --key go together (client certificate and its key)";
    return false;
  }
  if (out->token.empty() && !out->token_file.empty()) {
    if (!ReadFile(out->token_file, &out->token)) {
      *error = "--token-file: cannot read " + out->token_file;
      return false;
    }
    out->token = Trim(out->token);
    if (out->token.empty()) {
      *error = "--token-file: " + out->token_file + " is empty";
      return false;
    }
  }
  if (!out->ca.empty() || !out->cert.empty()) out->tls = true;
  return true;
}

std::shared_ptr<grpc::Channel> MakeChannel(const Connection& c, std::string* error) {
  grpc::ChannelArguments args;
  if (!c.tls) {
    if (!c.token.empty() && !IsLoopback(c.server)) {
      *error = "refusing to send a bearer token in plaintext to " + c.server +
               " (use TLS: --ca, or a loopback address)";
      return nullptr;
    }
    return grpc::CreateCustomChannel(c.server, grpc::InsecureChannelCredentials(), args);
  }
  grpc::SslCredentialsOptions opts;
  auto read = [&](const std::string& path, const char* flag, std::string* into) {
    if (path.empty()) return true;
    if (!ReadFile(path, into)) {
      *error = std::string(flag) + ": cannot read " + path;
      return false;
    }
    return true;
  };
  if (!read(c.ca, "--ca", &opts.pem_root_certs) || !read(c.cert, "--cert", &opts.pem_cert_chain) ||
      !read(c.key, "--key", &opts.pem_private_key)) {
    return nullptr;
  }
  if (!c.server_name.empty()) args.SetSslTargetNameOverride(c.server_name);
  return grpc::CreateCustomChannel(c.server, grpc::SslCredentials(opts), args);
}

void AddCredentials(grpc::ClientContext* ctx, const Connection& c) {
  if (!c.token.empty()) ctx->AddMetadata("authorization", "Bearer " + c.token);
}

}  // namespace loom::loomctl
