// One HTTP/1.1 request on a connection of its own, for the rendezvous store
// (cc/common/gloo/http_store.h), on Boost.Beast over Boost.Asio, header-only. No Boost
// type appears here: Boost stays inside http_client.cc, whose symbols are hidden
// (BUILD says why).
//
// The target and the body go out exactly as given (no re-encoding; Content-Length, and
// Host and Connection: close added); the reply's body comes back exactly as sent (no
// Accept-Encoding is sent and nothing is decoded).
//
//   HttpRequest req{"GET", "/gloo/global/0", {{"X-Tfhvd-Nonce", nonce}}, ""};
//   HttpReply r = HttpExchange("10.0.0.1", 29500, req, HttpLimits());
//   if (!r.problem.empty()) ...   // "cannot connect: Connection refused", ...
//   else if (r.too_large) ...     // the body passed limits.max_body_bytes
//   else use(r.status, r.Header("X-Tfhvd-Signature"), r.body);
#ifndef TFHVD_COMMON_GLOO_HTTP_HTTP_CLIENT_H_
#define TFHVD_COMMON_GLOO_HTTP_HTTP_CLIENT_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

// http_client.cc is compiled with hidden visibility (BUILD); its interface stays visible to
// the other libraries of a dynamically linked test.
#define TFHVD_HTTP_CLIENT_API __attribute__((visibility("default")))

namespace tfhvd {

struct HttpRequest {
  std::string method;                                        // "GET", "PUT", ...
  std::string target;                                        // sent as is
  std::vector<std::pair<std::string, std::string>> headers;  // besides Host, Content-Length,
                                                             // Connection
  std::string body;
};

struct HttpLimits {
  int connect_timeout_s = 10;     // to connect (every address of the host, together)
  int io_timeout_s = 30;          // to send the request; and each read of the reply
  size_t max_body_bytes = size_t{64} << 20;
  size_t max_header_bytes = size_t{64} << 10;
};

struct TFHVD_HTTP_CLIENT_API HttpReply {
  // Why there is no reply, empty when there is one: "cannot connect: <strerror>",
  // "connection timed out", "sending the request failed", "no complete reply within
  // <io_timeout_s> s".
  std::string problem;
  bool too_large = false;  // the reply's body passed max_body_bytes (problem stays empty)
  int status = -1;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The first value of header `name` (any case), or "" when there is none.
  std::string Header(const std::string& name) const;
};

// Resolves `host`, connects, sends, reads the whole reply and closes. Never throws for
// network failures (they are `problem`).
TFHVD_HTTP_CLIENT_API HttpReply HttpExchange(const std::string& host, int port,
                                             const HttpRequest& request,
                                             const HttpLimits& limits);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GLOO_HTTP_HTTP_CLIENT_H_
