#include "cc/common/gloo/http_store.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "cc/common/gloo/http/http_client.h"
#include "cc/common/gloo/signing.h"
#include "gloo/common/error.h"

namespace tfhvd {

namespace {

// Connect 10 s, send and each read 30 s; replies carry Gloo addresses (a few hundred
// bytes per rank): anything larger than 64 MiB is not from our server.
const HttpLimits kLimits{};

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

HttpStore::Reply HttpStore::Request(const std::string& method, const std::string& key,
                                    const std::vector<char>& payload) {
  Reply reply;
  // The path goes out exactly as signed, the body comes back exactly as sent
  // (http_client.h); HTTP/1.1, one connection per request.
  HttpRequest req;
  req.method = method;
  req.target = Path(key);
  req.body.assign(payload.begin(), payload.end());
  const std::string nonce = nonce_prefix_ + "-" + std::to_string(nonce_counter_++);
  if (!secret_.empty()) {
    const std::string timestamp = std::to_string(static_cast<long long>(std::time(nullptr)));
    req.headers = {{"X-Tfhvd-Timestamp", timestamp},
                   {"X-Tfhvd-Nonce", nonce},
                   {"X-Tfhvd-Signature",
                    RendezvousRequestSignature(secret_, method, req.target, timestamp, nonce,
                                               req.body)}};
  }
  HttpReply res = HttpExchange(host_, port_, req, kLimits);
  if (res.too_large) {
    throw gloo::IoException(Where() + " sent a reply larger than " +
                            std::to_string(kLimits.max_body_bytes) + " bytes for key '" + key +
                            "'; it is not tf_hvd's rendezvous server");
  }
  if (!res.problem.empty()) {
    reply.problem = res.problem;
    return reply;
  }
  const std::string& body = res.body;
  const int code = res.status;
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
  if (!secret_.empty() &&
      !ConstantTimeEquals(RendezvousResponseSignature(secret_, code, nonce, body),
                          res.Header("X-Tfhvd-Signature"))) {
    throw gloo::IoException(
        Where() + " sent a reply for key '" + key +
        "' that is not signed with the job's secret: another program may be answering "
        "on the rendezvous port, or the job's launcher is gone");
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
