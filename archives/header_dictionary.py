"""The built-in zstd dictionary for HTTP header lists.

Header lists are stored as compact JSON (``[["Name","value"],...]``) compressed with zstd against
a raw-content dictionary. Most of a header list is the same names and values over and over, so
the dictionary lets a ~600-byte header list shrink to a fraction while each row still decompresses
on its own. Every archive stores the dictionary it uses as a blob (named in the ``header_dictionary``
metadata field), so a reader needs only the archive file, SQLite and zstd.

Changing this text changes nothing for existing archives (they carry their own copy); it only
affects archives created afterwards.
"""

from __future__ import annotations

import json

_COMMON: list[list[str]] = [
    ["Host", "www.example.com"], ["Connection", "keep-alive"], ["Connection", "close"],
    ["Upgrade-Insecure-Requests", "1"],
    ["User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
                   "Chrome/120.0.0.0 Safari/537.36"],
    ["User-Agent", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
                   "HeadlessChrome/120.0.0.0 Safari/537.36"],
    ["Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,"
               "application/signed-exchange;v=b3;q=0.7"],
    ["Accept", "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"],
    ["Accept", "text/css,*/*;q=0.1"], ["Accept", "application/json, text/plain, */*"], ["Accept", "*/*"],
    ["Accept-Encoding", "gzip, deflate, br, zstd"], ["Accept-Encoding", "gzip, deflate"],
    ["Accept-Language", "en-US,en;q=0.9"],
    ["Sec-Fetch-Site", "same-origin"], ["Sec-Fetch-Mode", "navigate"], ["Sec-Fetch-Mode", "no-cors"],
    ["Sec-Fetch-Mode", "cors"], ["Sec-Fetch-Dest", "document"], ["Sec-Fetch-Dest", "image"],
    ["Sec-Fetch-Dest", "script"], ["Sec-Fetch-Dest", "style"], ["Sec-Fetch-Dest", "empty"],
    ["Sec-Fetch-User", "?1"], ["sec-ch-ua", "\"Chromium\";v=\"120\", \"Not(A:Brand\";v=\"24\""],
    ["sec-ch-ua-mobile", "?0"], ["sec-ch-ua-platform", "\"Linux\""],
    ["Referer", "https://www.example.com/"], ["Origin", "https://www.example.com"],
    ["Cookie", "session="], ["If-None-Match", "W/\""], ["If-Modified-Since", "Mon, 01 Jan 2024 00:00:00 GMT"],
    ["Cache-Control", "max-age=0"], ["Pragma", "no-cache"], ["Content-Type", "application/x-www-form-urlencoded"],
    ["Content-Type", "application/json"], ["Content-Type", "multipart/form-data; boundary="],
    ["Date", "Mon, 01 Jan 2024 00:00:00 GMT"], ["Server", "nginx"], ["Server", "Apache"],
    ["Server", "cloudflare"], ["Content-Type", "text/html; charset=utf-8"], ["Content-Type", "text/html; charset=UTF-8"],
    ["Content-Type", "text/css"], ["Content-Type", "application/javascript"], ["Content-Type", "text/javascript"],
    ["Content-Type", "image/png"], ["Content-Type", "image/jpeg"], ["Content-Type", "image/svg+xml"],
    ["Content-Type", "image/webp"], ["Content-Type", "image/gif"], ["Content-Type", "font/woff2"],
    ["Content-Type", "application/json; charset=utf-8"], ["Content-Type", "text/plain; charset=utf-8"],
    ["Content-Length", "0"], ["Transfer-Encoding", "chunked"], ["Content-Encoding", "gzip"],
    ["Content-Encoding", "br"], ["Vary", "Accept-Encoding"], ["Vary", "Origin"],
    ["Cache-Control", "public, max-age=31536000, immutable"], ["Cache-Control", "no-cache, no-store, must-revalidate"],
    ["Cache-Control", "private, max-age=0"], ["Expires", "Thu, 01 Jan 1970 00:00:00 GMT"],
    ["Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT"], ["ETag", "\""], ["ETag", "W/\""],
    ["Accept-Ranges", "bytes"], ["Age", "0"], ["Via", "1.1 varnish"], ["X-Cache", "HIT"], ["X-Cache", "MISS"],
    ["X-Varnish", ""], ["X-Content-Type-Options", "nosniff"], ["X-Frame-Options", "SAMEORIGIN"],
    ["X-XSS-Protection", "1; mode=block"], ["Referrer-Policy", "strict-origin-when-cross-origin"],
    ["Strict-Transport-Security", "max-age=31536000; includeSubDomains; preload"],
    ["Content-Security-Policy", "default-src 'self'"], ["Access-Control-Allow-Origin", "*"],
    ["Set-Cookie", "session=; Path=/; HttpOnly; SameSite=Lax"], ["Location", "https://www.example.com/"],
    ["Keep-Alive", "timeout=5, max=100"], ["Content-Disposition", "inline"],
]

RAW = json.dumps(_COMMON, separators=(",", ":")).encode("utf-8")
