// A gloo rendezvous Store backed by the launcher's HTTP key-value server:
// PUT /<scope>/<key> stores bytes, GET returns them or 404 until set.
#ifndef TFHVD_COMMON_GLOO_HTTP_STORE_H_
#define TFHVD_COMMON_GLOO_HTTP_STORE_H_

#include <chrono>
#include <string>
#include <vector>

#include "gloo/rendezvous/store.h"

namespace tfhvd {

class HttpStore : public gloo::rendezvous::Store {
 public:
  HttpStore(std::string host, int port, std::string scope,
            std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  // One HTTP request; returns the status code (or -1 if the server could not
  // be reached) and fills *body with the response body.
  int Request(const std::string& method, const std::string& key,
              const std::vector<char>& payload, std::vector<char>* body);
  std::string Path(const std::string& key) const;

  std::string host_;
  int port_;
  std::string scope_;
  std::chrono::milliseconds timeout_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GLOO_HTTP_STORE_H_
