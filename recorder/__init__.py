"""Capturing live traffic into an archive (mitmproxy addon, crawls, sessions). Built in a later issue."""
