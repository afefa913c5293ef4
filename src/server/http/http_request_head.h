// The request side of an HTTP connection without the socket: how every connection configures
// Beast's parser, and the checks and error descriptions applied to what the parser read. The
// connection (http_connection.cc) and the request fuzzer (tests/fuzz) both run these.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/http/http_message.h"
#include "server/http/http_wire.h"

namespace inflight::server::http {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Header and body limits from `limits`; a fresh parser per request.
void ConfigureRequestParser(RequestParser& parser, const HttpLimits& limits);

// The checks of a head Beast accepted (CheckRequestHead, then Expect): nullopt when the body may
// be read. `*send_continue` is set when the client waits for 100 Continue before its body.
std::optional<HttpReply> CheckParsedHead(const RequestParser& parser, const HttpLimits& limits,
                                         bool* send_continue);

// What DescribeParseError needs to see of a head the parser refused with `ec`: the fields Beast
// already took in front of `unparsed`, the bytes still in the read buffer.
std::string RefusedHead(const boost::system::error_code& ec, const RequestParser& parser,
                        std::string_view unparsed);

// The handler's view of a parsed request (the parser's message is moved out).
HttpRequest TakeRequest(RequestParser& parser);

}  // namespace inflight::server::http
