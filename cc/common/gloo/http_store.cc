#include "cc/common/gloo/http_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>

#include "cc/common/gloo/hmac_sha256.h"
#include "gloo/common/error.h"

namespace tfhvd {

namespace {

constexpr int kConnectTimeoutMs = 10000;
constexpr int kIoTimeoutS = 30;
// Replies carry Gloo addresses (a few hundred bytes per rank); anything larger
// than this is not from our server.
constexpr size_t kMaxReplyBytes = size_t{64} << 20;

constexpr char kRequestDomain[] = "tf_hvd-rendezvous-v1\n";
constexpr char kResponseDomain[] = "tf_hvd-rendezvous-v1-response\n";

std::string ErrnoText(int err) { return std::strerror(err); }

// Connects with a time limit; returns the socket or -1 with *problem set.
int Connect(const std::string& host, int port, std::string* problem) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (gai != 0) {
    *problem = std::string("cannot resolve host: ") + gai_strerror(gai);
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      *problem = ErrnoText(errno);
      continue;
    }
    int flags = fcntl(fd, F_GETFL, 0);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int ready;
      do {
        ready = poll(&p, 1, kConnectTimeoutMs);
      } while (ready < 0 && errno == EINTR);
      int err = 0;
      socklen_t len = sizeof(err);
      if (ready == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
        rc = 0;
      } else {
        *problem = ready == 0 ? "connection timed out" : ErrnoText(err != 0 ? err : errno);
      }
    } else if (rc != 0) {
      *problem = ErrnoText(errno);
    }
    if (rc == 0) {
      fcntl(fd, F_SETFL, flags);
      timeval tv{kIoTimeoutS, 0};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      break;
    }
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

bool SendAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t sent = send(fd, data, n, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    data += sent;
    n -= static_cast<size_t>(sent);
  }
  return true;
}

std::string PercentEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Value of header `name` (lowercase) in the header block, or "" if absent.
std::string HeaderValue(const std::string& head, const std::string& name) {
  size_t pos = head.find("\r\n");
  while (pos != std::string::npos && pos < head.size()) {
    size_t start = pos + 2;
    size_t end = head.find("\r\n", start);
    if (end == std::string::npos) end = head.size();
    std::string line = head.substr(start, end - start);
    size_t colon = line.find(':');
    if (colon != std::string::npos && Lower(line.substr(0, colon)) == name) {
      size_t v = colon + 1;
      while (v < line.size() && (line[v] == ' ' || line[v] == '\t')) ++v;
      size_t e = line.size();
      while (e > v && (line[e - 1] == ' ' || line[e - 1] == '\t')) --e;
      return line.substr(v, e - v);
    }
    pos = end;
  }
  return "";
}

std::string RandomHex(size_t bytes) {
  std::vector<uint8_t> buf(bytes);
  bool ok = false;
  FILE* f = std::fopen("/dev/urandom", "rbe");
  if (f != nullptr) {
    ok = std::fread(buf.data(), 1, buf.size(), f) == buf.size();
    std::fclose(f);
  }
  if (!ok) {
    std::random_device rd;
    for (auto& b : buf) b = static_cast<uint8_t>(rd());
  }
  return ToHex(buf.data(), buf.size());
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
  const std::string path = Path(key);
  const std::string timestamp = std::to_string(static_cast<long long>(std::time(nullptr)));
  const std::string nonce = nonce_prefix_ + "-" + std::to_string(nonce_counter_++);
  std::string head = method + " " + path + " HTTP/1.1\r\nHost: " + host_ +
                     "\r\nConnection: close\r\nContent-Length: " +
                     std::to_string(payload.size()) + "\r\n";
  if (!secret_.empty()) {
    HmacSha256 mac(secret_);
    mac.Update(std::string(kRequestDomain) + method + "\n" + path + "\n" + timestamp + "\n" +
               nonce + "\n");
    mac.Update(payload.data(), payload.size());
    head += "X-Tfhvd-Timestamp: " + timestamp + "\r\nX-Tfhvd-Nonce: " + nonce +
            "\r\nX-Tfhvd-Signature: " + ToHex(mac.Final()) + "\r\n";
  }
  head += "\r\n";

  int fd = Connect(host_, port_, &reply.problem);
  if (fd < 0) return reply;
  if (!SendAll(fd, head.data(), head.size()) ||
      !SendAll(fd, payload.data(), payload.size())) {
    reply.problem = "sending the request failed: " + ErrnoText(errno);
    close(fd);
    return reply;
  }
  std::string response;
  char buf[65536];
  for (;;) {
    ssize_t got = recv(fd, buf, sizeof(buf), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      reply.problem = errno == EAGAIN || errno == EWOULDBLOCK
                          ? "no reply within " + std::to_string(kIoTimeoutS) + " s"
                          : "receiving the reply failed: " + ErrnoText(errno);
      close(fd);
      return reply;
    }
    if (got == 0) break;
    response.append(buf, static_cast<size_t>(got));
    if (response.size() > kMaxReplyBytes) {
      close(fd);
      throw gloo::IoException(Where() + " sent a reply larger than " +
                              std::to_string(kMaxReplyBytes) + " bytes for key '" + key +
                              "'; it is not tf_hvd's rendezvous server");
    }
  }
  close(fd);
  size_t header_end = response.find("\r\n\r\n");
  int code = -1;
  if (header_end == std::string::npos ||
      std::sscanf(response.c_str(), "HTTP/%*s %d", &code) != 1) {
    reply.problem = "malformed reply";
    return reply;
  }
  std::string headers = response.substr(0, header_end);
  reply.body.assign(response.begin() + static_cast<long>(header_end) + 4, response.end());
  std::string length = HeaderValue(headers, "content-length");
  if (AllDigits(length)) {
    size_t n = std::strtoull(length.c_str(), nullptr, 10);
    if (reply.body.size() < n) {
      reply.problem = "connection closed in the middle of the reply";
      reply.body.clear();
      return reply;
    }
    reply.body.resize(n);
  }
  if (code == 403) {
    std::string why(reply.body.begin(), reply.body.end());
    while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
    throw gloo::IoException(
        Where() + " refused the request for key '" + key + "' (HTTP 403: " + why + "). " +
        (secret_.empty() ? std::string(kSecretEnv) + " is not set in this process: "
                                                     "start the ranks with tfhvdrun"
                         : std::string("This process's ") + kSecretEnv +
                               " is not the job's secret, or this host's clock is off"));
  }
  if (!secret_.empty()) {
    HmacSha256 mac(secret_);
    char status[8];
    std::snprintf(status, sizeof(status), "%03d", code);
    mac.Update(std::string(kResponseDomain) + status + "\n" + nonce + "\n");
    mac.Update(reply.body.data(), reply.body.size());
    if (!ConstantTimeEquals(ToHex(mac.Final()), HeaderValue(headers, "x-tfhvd-signature"))) {
      throw gloo::IoException(
          Where() + " sent a reply for key '" + key +
          "' that is not signed with the job's secret: another program may be answering "
          "on the rendezvous port, or the job's launcher is gone");
    }
  }
  reply.code = code;
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
  // (--start-timeout / HOROVOD_GLOO_TIMEOUT_SECONDS) alone.
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
              "the server (raise --start-timeout / HOROVOD_GLOO_TIMEOUT_SECONDS if they "
              "are just slow)");
        }
        throw gloo::IoException(
            "timed out after " + seconds + " s waiting for rendezvous key '" + key +
            "' at the " + Where() +
            "; some ranks did not start or call hvd.init() (raise --start-timeout / "
            "HOROVOD_GLOO_TIMEOUT_SECONDS if they are just slow)");
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
    }
  }
}

}  // namespace tfhvd
