#include "cc/common/gloo/http_store.h"

// Boost.Beast over Boost.Asio, header-only (no Boost library is linked). This is the
// only file that includes them; deprecated Asio interfaces are left out.
#define BOOST_ASIO_NO_DEPRECATED
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "cc/common/gloo/signing.h"
#include "gloo/common/error.h"

namespace tfhvd {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;

constexpr int kConnectTimeoutS = 10;
constexpr int kIoTimeoutS = 30;
// Replies carry Gloo addresses (a few hundred bytes per rank); anything larger
// than this is not from our server.
constexpr size_t kMaxReplyBytes = size_t{64} << 20;
// Our server's reply headers are a few hundred bytes.
constexpr uint32_t kMaxReplyHeaderBytes = 64 << 10;

std::string PercentEncode(const std::string& s) {
  static const char kDigits[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kDigits[c >> 4], kDigits[c & 15]};
    }
  }
  return out;
}

// Starts one asynchronous operation (start(handler)) and runs `io` until it has
// ended: a blocking call whose time is bounded by the stream's expiry (when it
// passes, the socket is closed and the operation ends with beast::error::timeout).
template <typename Start>
beast::error_code RunToEnd(asio::io_context& io, Start&& start) {
  beast::error_code outcome = asio::error::would_block;
  start([&outcome](beast::error_code ec, auto&&...) { outcome = ec; });
  io.restart();
  io.run();
  return outcome;
}

struct Outcome {
  std::string problem;     // why there is no complete reply; empty when there is one
  bool too_large = false;  // the reply's body passed kMaxReplyBytes
};

// One request on a connection of its own, the reply parsed into *parser.
Outcome Exchange(const std::string& host, int port, http::request<http::string_body>& req,
                 http::response_parser<http::string_body>* parser) {
  Outcome outcome;
  asio::io_context io;
  beast::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (ec) {
    outcome.problem = "cannot connect: " + ec.message();
    return outcome;
  }
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(kConnectTimeoutS));
  ec = RunToEnd(io, [&](auto handler) { stream.async_connect(endpoints, handler); });
  if (ec == beast::error::timeout) {
    outcome.problem = "connection timed out";
    return outcome;
  }
  if (ec) {
    outcome.problem = "cannot connect: " + ec.message();  // strerror's: "Connection refused"
    return outcome;
  }
  stream.expires_after(std::chrono::seconds(kIoTimeoutS));
  ec = RunToEnd(io, [&](auto handler) { http::async_write(stream, req, handler); });
  if (ec) {
    outcome.problem = "sending the request failed";
    return outcome;
  }
  // The reply, read as it arrives: each read may wait kIoTimeoutS for more bytes.
  beast::flat_buffer buffer;
  while (!parser->is_done()) {
    stream.expires_after(std::chrono::seconds(kIoTimeoutS));
    ec = RunToEnd(io, [&](auto handler) {
      http::async_read_some(stream, buffer, *parser, handler);
    });
    if (ec == http::error::body_limit) {
      outcome.too_large = true;
      return outcome;
    }
    if (ec) {
      outcome.problem = "no complete reply within " + std::to_string(kIoTimeoutS) + " s";
      return outcome;
    }
  }
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);  // errors do not matter
  return outcome;
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return c >= '0' && c <= '9'; });
}

std::string JoinRanks(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  return out + "]";
}

}  // namespace

HttpStore::HttpStore(std::string host, int port, std::string scope,
                     std::chrono::milliseconds timeout, std::string secret, int job_size)
    : host_(std::move(host)),
      port_(port),
      scope_(std::move(scope)),
      timeout_(timeout),
      secret_(std::move(secret)),
      job_size_(job_size),
      nonce_prefix_(RandomHex(16)) {}

std::string HttpStore::Path(const std::string& key) const {
  return "/" + PercentEncode(scope_) + "/" + PercentEncode(key);
}

std::string HttpStore::Where() const {
  return "rendezvous server " + host_ + ":" + std::to_string(port_);
}

std::string HttpStore::HostHeader() const {
  std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return port_ == 80 ? host : host + ":" + std::to_string(port_);
}

HttpStore::Reply HttpStore::Request(const std::string& method, const std::string& key,
                                    const std::vector<char>& payload) {
  Reply reply;
  // HTTP/1.1, one connection per request (Connection: close). The target is sent
  // exactly as signed (no re-encoding) and the body exactly as received (never
  // decompressed: no Accept-Encoding is sent, and nothing here decodes one).
  http::request<http::string_body> req;
  req.version(11);
  req.method_string(method);
  const std::string path = Path(key);
  req.target(path);
  req.set(http::field::host, HostHeader());
  req.set(http::field::connection, "close");
  req.body().assign(payload.begin(), payload.end());
  const std::string nonce = nonce_prefix_ + "-" + std::to_string(nonce_counter_++);
  if (!secret_.empty()) {
    const std::string timestamp = std::to_string(static_cast<long long>(std::time(nullptr)));
    req.set("X-Tfhvd-Timestamp", timestamp);
    req.set("X-Tfhvd-Nonce", nonce);
    req.set("X-Tfhvd-Signature", RendezvousRequestSignature(secret_, method, path, timestamp,
                                                            nonce, req.body()));
  }
  req.prepare_payload();  // Content-Length (always for PUT, and whenever there is a body)

  http::response_parser<http::string_body> parser;
  parser.header_limit(kMaxReplyHeaderBytes);
  parser.body_limit(kMaxReplyBytes);
  Outcome outcome;
  try {
    outcome = Exchange(host_, port_, req, &parser);
  } catch (const boost::system::system_error& e) {  // no socket or event queue to be had
    outcome.problem = "cannot connect: " + e.code().message();
  }
  if (outcome.too_large) {
    throw gloo::IoException(Where() + " sent a reply larger than " +
                            std::to_string(kMaxReplyBytes) + " bytes for key '" + key +
                            "'; it is not tf_hvd's rendezvous server");
  }
  if (!outcome.problem.empty()) {
    reply.problem = outcome.problem;
    return reply;
  }
  const http::response<http::string_body>& res = parser.get();
  const std::string& body = res.body();
  const int code = static_cast<int>(res.result_int());
  if (code == 403) {
    std::string why = body;
    while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
    throw gloo::IoException(
        Where() + " refused the request for key '" + key + "' (HTTP 403: " + why + "). " +
        (secret_.empty() ? std::string(kSecretEnv) + " is not set in this process: "
                                                     "start the ranks with tfhvdrun"
                         : std::string("This process's ") + kSecretEnv +
                               " is not the job's secret, or this host's clock is off"));
  }
  if (!secret_.empty()) {
    auto signature = res.find("X-Tfhvd-Signature");
    if (signature == res.end() ||
        !ConstantTimeEquals(RendezvousResponseSignature(secret_, code, nonce, body),
                            std::string(signature->value()))) {
      throw gloo::IoException(
          Where() + " sent a reply for key '" + key +
          "' that is not signed with the job's secret: another program may be answering "
          "on the rendezvous port, or the job's launcher is gone");
    }
  }
  reply.code = code;
  reply.body.assign(body.begin(), body.end());
  return reply;
}

void HttpStore::set(const std::string& key, const std::vector<char>& data) {
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    Reply r = Request("PUT", key, data);
    if (r.code == 200) return;
    bool retry = r.code < 0 || r.code >= 500;
    if (retry && r.code < 0 && std::chrono::steady_clock::now() > deadline) {
      throw gloo::IoException("timed out after " + std::to_string(timeout_.count() / 1000) +
                              " s: cannot reach the " + Where() + " (" + r.problem +
                              "); the launcher (tfhvdrun) may have exited");
    }
    if (!retry || std::chrono::steady_clock::now() > deadline) {
      std::string detail = r.code < 0 ? r.problem
                                      : "HTTP status " + std::to_string(r.code) + ": " +
                                            std::string(r.body.begin(), r.body.end());
      while (!detail.empty() && detail.back() == '\n') detail.pop_back();
      throw gloo::IoException(Where() + " did not accept key '" + key + "' (" + detail +
                              ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::vector<char> HttpStore::get(const std::string& key) {
  wait({key});
  Reply r = Request("GET", key, {});
  if (r.code != 200) {
    throw gloo::IoException(Where() + " lost key '" + key + "' (" +
                            (r.code < 0 ? r.problem : "HTTP " + std::to_string(r.code)) +
                            ")");
  }
  return r.body;
}

void HttpStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

std::string HttpStore::DescribeMissingRanks(const std::string& key) {
  // Gloo's full-mesh rendezvous publishes "<prefix>/rank_<r>" (host names) and
  // "<prefix>/<r>" (pair addresses) for every rank r.
  size_t slash = key.rfind('/');
  if (slash == std::string::npos) return "";
  std::string prefix = key.substr(0, slash + 1);
  std::string last = key.substr(slash + 1);
  if (last.compare(0, 5, "rank_") == 0) {
    prefix += "rank_";
    last = last.substr(5);
  }
  if (!AllDigits(last)) return "";
  int size = job_size_;
  if (size <= 0 || size > (1 << 16)) return "";
  std::vector<int> present, missing;
  for (int r = 0; r < size; ++r) {
    Reply reply;
    try {
      reply = Request("GET", prefix + std::to_string(r), {});
    } catch (const std::exception&) {
      return "";
    }
    if (reply.code < 0) return "";
    (reply.code == 200 ? present : missing).push_back(r);
  }
  if (missing.empty()) return "";
  return "rank(s) " + JoinRanks(missing) + " of " + std::to_string(size) +
         " did not check in (ranks " + JoinRanks(present) + " did)";
}

void HttpStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  // Gloo passes its context's timeout (the one for collectives, which may be
  // long); waiting for ranks to check in is governed by the start timeout
  // (--start-timeout / HOROVOD_START_TIMEOUT) alone.
  (void)timeout;
  auto limit = timeout_;
  auto deadline = std::chrono::steady_clock::now() + limit;
  auto backoff = std::chrono::milliseconds(5);
  for (const auto& key : keys) {
    for (;;) {
      Reply r = Request("GET", key, {});
      if (r.code == 200) break;
      if (r.code >= 0 && r.code != 404 && r.code < 500) {
        throw gloo::IoException(Where() + " answered HTTP " + std::to_string(r.code) +
                                " for key '" + key + "'");
      }
      if (std::chrono::steady_clock::now() > deadline) {
        std::string seconds = std::to_string(limit.count() / 1000);
        if (r.code < 0) {
          throw gloo::IoException("timed out after " + seconds + " s: cannot reach the " +
                                  Where() + " (" + r.problem +
                                  "); the launcher (tfhvdrun) may have exited");
        }
        std::string missing = DescribeMissingRanks(key);
        if (!missing.empty()) {
          throw gloo::IoException(
              "timed out after " + seconds + " s waiting for the other ranks at the " +
              Where() + ": " + missing +
              "; they did not start, exited or hung before hvd.init(), or cannot reach "
              "the server (raise --start-timeout / HOROVOD_START_TIMEOUT if they "
              "are just slow)");
        }
        throw gloo::IoException(
            "timed out after " + seconds + " s waiting for rendezvous key '" + key +
            "' at the " + Where() +
            "; some ranks did not start or call hvd.init() (raise --start-timeout / "
            "HOROVOD_START_TIMEOUT if they are just slow)");
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
    }
  }
}

}  // namespace tfhvd
