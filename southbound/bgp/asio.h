// Boost.Asio for the BGP speaker. Boost 1.74's Asio uses std::exchange
// without including <utility>, which breaks under C++20 unless <utility>
// comes first; every BGP file includes Asio through this header.
#ifndef LOOM_SOUTHBOUND_BGP_ASIO_H_
#define LOOM_SOUTHBOUND_BGP_ASIO_H_

// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on

#endif  // LOOM_SOUTHBOUND_BGP_ASIO_H_
