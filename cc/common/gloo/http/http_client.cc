#include "cc/common/gloo/http/http_client.h"

// Boost.Beast over Boost.Asio, header-only (no Boost library is linked); deprecated
// Asio interfaces are left out. Only this file includes them.
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

#include <cctype>
#include <chrono>
#include <cstdint>

namespace tfhvd {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;

// Starts one asynchronous operation (start(handler)) and runs `io` until it has ended:
// a blocking call whose time is bounded by the stream's expiry (when that passes, the
// socket is closed and the operation ends with beast::error::timeout).
template <typename Start>
beast::error_code RunToEnd(asio::io_context& io, Start&& start) {
  beast::error_code outcome = asio::error::would_block;
  start([&outcome](beast::error_code ec, auto&&...) { outcome = ec; });
  io.restart();
  io.run();
  return outcome;
}

std::string HostHeader(const std::string& host, int port) {
  std::string name = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return port == 80 ? name : name + ":" + std::to_string(port);
}

bool SameName(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

void Exchange(const std::string& host, int port, const HttpRequest& request,
              const HttpLimits& limits, HttpReply* reply) {
  http::request<http::string_body> req;
  req.version(11);
  req.method_string(request.method);
  req.target(request.target);
  req.set(http::field::host, HostHeader(host, port));
  req.set(http::field::connection, "close");  // one connection per request
  for (const auto& h : request.headers) req.set(h.first, h.second);
  req.body() = request.body;
  req.prepare_payload();  // Content-Length: always for PUT, and whenever there is a body

  asio::io_context io;
  beast::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (ec) {
    reply->problem = "cannot connect: " + ec.message();
    return;
  }
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(limits.connect_timeout_s));
  ec = RunToEnd(io, [&](auto handler) { stream.async_connect(endpoints, handler); });
  if (ec == beast::error::timeout) {
    reply->problem = "connection timed out";
    return;
  }
  if (ec) {
    reply->problem = "cannot connect: " + ec.message();  // strerror's: "Connection refused"
    return;
  }
  stream.expires_after(std::chrono::seconds(limits.io_timeout_s));
  ec = RunToEnd(io, [&](auto handler) { http::async_write(stream, req, handler); });
  if (ec) {
    reply->problem = "sending the request failed";
    return;
  }
  // The reply, read as it arrives: each read may wait io_timeout_s for more bytes.
  http::response_parser<http::string_body> parser;
  parser.header_limit(static_cast<uint32_t>(limits.max_header_bytes));
  parser.body_limit(limits.max_body_bytes);
  beast::flat_buffer buffer;
  while (!parser.is_done()) {
    stream.expires_after(std::chrono::seconds(limits.io_timeout_s));
    ec = RunToEnd(io, [&](auto handler) {
      http::async_read_some(stream, buffer, parser, handler);
    });
    if (ec == http::error::body_limit) {
      reply->too_large = true;
      return;
    }
    if (ec) {
      reply->problem = "no complete reply within " + std::to_string(limits.io_timeout_s) + " s";
      return;
    }
  }
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);  // errors do not matter
  http::response<http::string_body> res = parser.release();
  reply->status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    reply->headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  reply->body = std::move(res.body());
}

}  // namespace

std::string HttpReply::Header(const std::string& name) const {
  for (const auto& h : headers) {
    if (SameName(h.first, name)) return h.second;
  }
  return "";
}

HttpReply HttpExchange(const std::string& host, int port, const HttpRequest& request,
                       const HttpLimits& limits) {
  HttpReply reply;
  try {
    Exchange(host, port, request, limits, &reply);
  } catch (const boost::system::system_error& e) {  // no socket or event queue to be had
    reply = HttpReply();
    reply.problem = "cannot connect: " + e.code().message();
  }
  return reply;
}

}  // namespace tfhvd
