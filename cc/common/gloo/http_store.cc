#include "cc/common/gloo/http_store.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "gloo/common/error.h"

namespace tfhvd {

namespace {

int Connect(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

bool SendAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t sent = send(fd, data, n, MSG_NOSIGNAL);
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

}  // namespace

HttpStore::HttpStore(std::string host, int port, std::string scope,
                     std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), scope_(std::move(scope)), timeout_(timeout) {}

std::string HttpStore::Path(const std::string& key) const {
  return "/" + PercentEncode(scope_) + "/" + PercentEncode(key);
}

int HttpStore::Request(const std::string& method, const std::string& key,
                       const std::vector<char>& payload, std::vector<char>* body) {
  int fd = Connect(host_, port_);
  if (fd < 0) return -1;
  std::string head = method + " " + Path(key) + " HTTP/1.1\r\nHost: " + host_ +
                     "\r\nConnection: close\r\nContent-Length: " +
                     std::to_string(payload.size()) + "\r\n\r\n";
  if (!SendAll(fd, head.data(), head.size()) ||
      !SendAll(fd, payload.data(), payload.size())) {
    close(fd);
    return -1;
  }
  std::string response;
  char buf[65536];
  for (;;) {
    ssize_t got = recv(fd, buf, sizeof(buf), 0);
    if (got < 0) { close(fd); return -1; }
    if (got == 0) break;
    response.append(buf, static_cast<size_t>(got));
  }
  close(fd);
  size_t header_end = response.find("\r\n\r\n");
  int code = -1;
  if (header_end == std::string::npos ||
      std::sscanf(response.c_str(), "HTTP/%*s %d", &code) != 1)
    return -1;
  body->assign(response.begin() + static_cast<long>(header_end) + 4, response.end());
  return code;
}

void HttpStore::set(const std::string& key, const std::vector<char>& data) {
  std::vector<char> body;
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    int code = Request("PUT", key, data, &body);
    if (code == 200) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw gloo::IoException("rendezvous server " + host_ + ":" + std::to_string(port_) +
                              " did not accept key '" + key + "' (HTTP status " +
                              std::to_string(code) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::vector<char> HttpStore::get(const std::string& key) {
  wait({key});
  std::vector<char> body;
  int code = Request("GET", key, {}, &body);
  if (code != 200) {
    throw gloo::IoException("rendezvous server lost key '" + key + "'");
  }
  return body;
}

void HttpStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void HttpStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  // Gloo's default per-call timeout is short; rendezvous waits for ranks that
  // may still be importing TensorFlow, so the longer of the two applies.
  auto limit = std::max(timeout, timeout_);
  auto deadline = std::chrono::steady_clock::now() + limit;
  auto backoff = std::chrono::milliseconds(5);
  std::vector<char> body;
  for (const auto& key : keys) {
    for (;;) {
      int code = Request("GET", key, {}, &body);
      if (code == 200) break;
      if (std::chrono::steady_clock::now() > deadline) {
        throw gloo::IoException(
            "timed out after " + std::to_string(limit.count() / 1000) +
            " s waiting for rendezvous key '" + key + "' at " + host_ + ":" +
            std::to_string(port_) + (code < 0 ? " (server unreachable)" : "") +
            "; some ranks did not start or call hvd.init() (raise --start-timeout / "
            "HOROVOD_GLOO_TIMEOUT_SECONDS if they are just slow)");
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
    }
  }
}

}  // namespace tfhvd
