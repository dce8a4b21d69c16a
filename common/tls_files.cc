#include "common/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

namespace loom {

namespace {

constexpr size_t kMaxPemBytes = 1 << 20;

bool ReadSmallFile(const std::string& path, std::string* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  if (out->size() > kMaxPemBytes) {
    *error = path + " is over 1 MiB: not a PEM file";
    return false;
  }
  if (out->empty()) {
    *error = path + " is empty";
    return false;
  }
  return true;
}

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return std::string(" (") + buf + ")";
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

// The first certificate of `pem`; null when none parses.
std::unique_ptr<X509, X509Free> FirstCertificate(const std::string& pem, int* count) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::unique_ptr<X509, X509Free> first;
  *count = 0;
  while (bio) {
    X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (x == nullptr) break;
    ++*count;
    if (!first) {
      first.reset(x);
    } else {
      X509_free(x);
    }
  }
  ERR_clear_error();  // The end of the input reads as an error.
  return first;
}

}  // namespace

std::string CheckPemCertificates(const std::string& field, const std::string& path) {
  std::string pem, error;
  if (!ReadSmallFile(path, &pem, &error)) return field + ": " + error;
  int count = 0;
  if (!FirstCertificate(pem, &count)) {
    return field + ": " + path + " holds no PEM certificate (-----BEGIN CERTIFICATE-----)";
  }
  return "";
}

std::string CheckPemKeyPair(const std::string& cert_field, const std::string& cert_path,
                            const std::string& key_field, const std::string& key_path) {
  if (std::string e = CheckPemCertificates(cert_field, cert_path); !e.empty()) return e;
  std::string cert_pem, key_pem, error;
  if (!ReadSmallFile(cert_path, &cert_pem, &error)) return cert_field + ": " + error;
  if (!ReadSmallFile(key_path, &key_pem, &error)) return key_field + ": " + error;
  int count = 0;
  auto cert = FirstCertificate(cert_pem, &count);
  std::unique_ptr<BIO, BioFree> bio(
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  std::unique_ptr<EVP_PKEY, PkeyFree> key(
      bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) {
    return key_field + ": " + key_path +
           " holds no unencrypted PEM private key (-----BEGIN PRIVATE KEY-----)" + OpenSslError();
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return key_field + ": the key in " + key_path + " does not match the certificate in " +
           cert_path + " (" + cert_field + ")";
  }
  return "";
}

std::string CheckCertificateCurrent(const std::string& field, const std::string& path) {
  std::string pem, error;
  if (!ReadSmallFile(path, &pem, &error)) return field + ": " + error;
  int count = 0;
  auto first = FirstCertificate(pem, &count);
  if (!first) return field + ": " + path + " holds no PEM certificate";
  if (X509_cmp_current_time(X509_get0_notAfter(first.get())) <= 0) {
    return field + ": the certificate in " + path + " has expired";
  }
  if (X509_cmp_current_time(X509_get0_notBefore(first.get())) > 0) {
    return field + ": the certificate in " + path + " is not valid yet";
  }
  return "";
}

std::string CheckTlsClientFiles(const TlsClientConfig& tls, const std::string& prefix) {
  if (!tls.enabled) return "";
  if (!tls.ca_path.empty()) {
    if (std::string e = CheckPemCertificates(prefix + "ca_path", tls.ca_path); !e.empty()) {
      return e;
    }
  }
  if (tls.cert_path.empty() != tls.key_path.empty()) {
    return prefix + (tls.cert_path.empty() ? "cert_path" : "key_path") + ": required with " +
           prefix + (tls.cert_path.empty() ? "key_path" : "cert_path") +
           " (a client certificate needs its key)";
  }
  if (!tls.cert_path.empty()) {
    return CheckPemKeyPair(prefix + "cert_path", tls.cert_path, prefix + "key_path", tls.key_path);
  }
  return "";
}

}  // namespace loom
