// A gloo rendezvous Store backed by the launcher's HTTP key-value server:
// PUT /<scope>/<key> stores bytes, GET returns them or 404 until set.
//
// Every request is signed with the job's secret (HOROVOD_GLOO_RENDEZVOUS_SECRET,
// set by tfhvdrun) and every reply's signature is checked; the headers and the
// signed text are described in tf_hvd/job/auth.py. A refused request (403) or
// a reply that is not signed by the job's secret ends the rendezvous at once with
// an error saying so; an unreachable server is retried until the timeout.
//
// The HTTP client (http/http_client.h) is Boost.Beast over Boost.Asio, header-only:
// HTTP/1.1, one connection per request, connect time-out 10 s, the write and each
// read 30 s, replies up to 64 MiB.
#ifndef TFHVD_COMMON_GLOO_HTTP_STORE_H_
#define TFHVD_COMMON_GLOO_HTTP_STORE_H_

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "gloo/rendezvous/store.h"

namespace tfhvd {

class HttpStore : public gloo::rendezvous::Store {
 public:
  // secret: the job's HOROVOD_GLOO_RENDEZVOUS_SECRET (empty: requests go out
  // unsigned and the launcher's server refuses them with a clear error);
  // job_size: HOROVOD_SIZE, to name the ranks that did not check in.
  HttpStore(std::string host, int port, std::string scope,
            std::chrono::milliseconds timeout, std::string secret, int job_size);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // The variable that carries the secret (named in error messages).
  static constexpr const char* kSecretEnv = "HOROVOD_GLOO_RENDEZVOUS_SECRET";

 private:
  struct Reply {
    int code = -1;            // HTTP status; -1 if there was no usable reply
    std::vector<char> body;
    std::string problem;      // why code is -1 (connection refused, timeout, ...)
  };
  // One signed HTTP request. Throws gloo::IoException when the server refuses
  // it (403) or the reply is not signed with the job's secret.
  Reply Request(const std::string& method, const std::string& key,
                const std::vector<char>& payload);
  std::string Path(const std::string& key) const;
  std::string Where() const;
  // For a timed-out wait on "<prefix>/<rank>": which ranks have published
  // "<prefix>/<r>" (r < job_size_) and which have not.
  std::string DescribeMissingRanks(const std::string& key);

  std::string host_;
  int port_;
  std::string scope_;
  std::chrono::milliseconds timeout_;
  std::string secret_;
  int job_size_;
  std::string nonce_prefix_;
  std::atomic<uint64_t> nonce_counter_{0};
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GLOO_HTTP_STORE_H_
