"""Redaction: a copy of an archive (and of its suite's tasks and reference trajectories) with the
credentials it holds replaced by stable placeholders, for sharing (docs/bundles.md, "Sharing
without secrets").

What counts as a secret:

- the values of credential headers (:data:`CREDENTIAL_HEADERS`, plus any the user names): each
  cookie's value in ``Cookie`` and ``Set-Cookie`` (names and attributes are kept), the credential
  of ``Authorization`` / ``Proxy-Authorization`` (the scheme is kept), the whole value otherwise;
- query parameters, form fields (urlencoded and multipart), JSON keys and a page's input fields
  whose name is secret (:func:`is_secret_name`, plus any the user names), in requests and in
  responses (a token endpoint's JSON or form answer, a page's CSRF field), and the query
  parameters of the URLs ``Location`` headers name;
- values typed into password fields in the reference trajectories (given by the caller: see
  :meth:`Redactor.collect_trajectory`);
- values the user names (``--secret-env``: :meth:`Redactor.add_given`), replaced wherever they occur.

What is collected is what the refusal to share names (:meth:`Redactor.findings`): one detector.
A body that would decode beyond the decoding limit cannot be searched and is refused.

Each secret becomes ``wfredacted-<16 hex>``, an HMAC-SHA-256 of the secret under a key drawn at
random for this redaction and never stored: the same secret gets the same placeholder everywhere in
one redaction (so a replayed login types the placeholder and the redacted POST body holds it), and
nothing in the output lets anyone recover the secret or link two redactions. A secret of at least
:data:`MIN_LITERAL` characters (a typed password; or any secret that looks generated: see
:func:`_literal`) is also replaced wherever else it occurs (in raw, URL-encoded,
JSON-escaped and HTML-escaped form): URLs, headers, request bodies, response bodies (their content
coding undone and redone), DOM snapshots, documents. Shorter ones are replaced only where they were
found, since a two-letter string occurs everywhere by chance.

Screenshots are images and are copied as they are. The archive's metadata gains ``redaction``: the
rules applied and how many secrets of each kind were replaced, never the secrets.
"""

from __future__ import annotations

import gzip
import hashlib
import hmac
import html
import json
import os
import re
import zlib
from pathlib import Path
from urllib.parse import quote, quote_plus, unquote_plus, urlsplit, urlunsplit

from .content import DecodedTooLarge, DecodeError, content_encoding, decode_content
from .errors import ArchiveError
from .publish import new_archive_atomically
from .records import ExchangeRecord
from .store import Archive, now

# Headers whose value is a credential (lower case). Cookie values are session identifiers: they are.
CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key",
                      "x-auth-token", "x-access-token", "x-amz-security-token", "x-goog-api-key", "x-csrf-token",
                      "x-xsrf-token", "private-token")
# Parameter / field / key names that are secret when equal to one of these (lower case) ...
SECRET_NAMES = ("token", "access_token", "refresh_token", "id_token", "auth_token", "api_key", "apikey", "key_secret",
                "password", "passwd", "pwd", "pw", "pass", "secret", "client_secret", "session", "sessionid",
                "session_id", "sid", "auth", "authorization", "signature", "sig", "authenticity_token",
                "__form_token", "code_verifier")
# ... or when they contain one of these (CSRF tokens included: a form's token is often the value of
# a cookie, and a page that repeats it is where a reader would find the cookie again)
SECRET_PARTS = ("password", "passwd", "secret", "api_key", "apikey", "access_token", "auth_token", "csrf", "xsrf")
# Response headers whose value is a URL: its secret parameters are replaced as a request URL's are.
URL_HEADERS = ("location", "content-location", "refresh")
PLACEHOLDER_PREFIX = "wfredacted-"
PLACEHOLDER_RE = re.compile(re.escape(PLACEHOLDER_PREFIX) + "[0-9a-f]{16}")  # (one placeholder)
MIN_LITERAL = 6
_SUPPLIED_FIELD = re.compile(r"pass|pwd|^pw$|secret", re.I)
_PASSWORD_TARGET = re.compile(r"pass(word|wd|phrase)?|pwd|\bpin\b|secret", re.I)


def _literal(secret: str, kind: str) -> bool:
    """Whether ``secret`` is also replaced wherever else it occurs: a typed password of at least
    :data:`MIN_LITERAL` characters; any other secret of that length only when it looks generated
    (16 characters or more, or letters mixed with digits or symbols), since a cookie value such as
    ``accepted`` is also an ordinary word in the pages."""
    if kind == "given":  # named by the user (--secret-env): wherever it occurs
        return True
    if len(secret) < MIN_LITERAL:
        return False
    if kind == "password" or len(secret) >= 16:
        return True
    classes = sum(bool(re.search(p, secret)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]", r"[^A-Za-z0-9]"))
    return classes >= 2 and not secret.isalpha()


def typed_value(step) -> str | None:
    """The text a step typed: a reference trajectory's ``type`` step (its ``value``), or a run
    trajectory's fill/type action (its ``typed`` text); None for any other step."""
    if not isinstance(step, dict):
        return None
    if step.get("action") in ("type", "fill"):
        value = step.get("value")
        return value.get("value") if isinstance(value, dict) else value
    parsed = step.get("parsed") if isinstance(step.get("parsed"), dict) else {}
    if parsed.get("kind") in ("fill", "type"):
        return step.get("typed") if step.get("typed") is not None else parsed.get("text")
    return None


def is_secret_name(name: str, extra: set[str] | frozenset = frozenset()) -> bool:
    """Whether a query parameter, form field or JSON key called ``name`` holds a secret: one of
    :data:`SECRET_NAMES`, a name containing one of :data:`SECRET_PARTS` (CSRF tokens among them:
    ``csrfmiddlewaretoken``, ``csrf_token``), or one the user named."""
    n = name.strip().lower()
    return n in extra or n in SECRET_NAMES or any(p in n for p in SECRET_PARTS)


class Redactor:
    """The secrets of one redaction and their placeholders. Collect first (``collect_*``), then
    rewrite (``text``, ``data``, ``headers``, ``url``, ``body``, ``json_value``)."""

    def __init__(self, *, params=(), headers=(), key: bytes | None = None):
        self._key = key or os.urandom(32)  # never stored: the placeholders cannot be reversed
        self.params = frozenset(p.strip().lower() for p in params)
        self.header_names = frozenset(CREDENTIAL_HEADERS) | frozenset(h.strip().lower() for h in headers)
        self._secrets: dict[str, str] = {}  # secret -> placeholder
        self._kind: dict[str, str] = {}     # secret -> the kind it was found as
        self._where: dict[str, str] = {}    # secret -> what and where it was first found (never the value)
        self.kinds: dict[str, int] = {}     # kind of secret -> how many distinct
        self._given: dict[str, str] = {}    # --secret-env value -> the variable's name
        self._hit: set[str] = set()         # the placeholders written so far
        self._instructions: list[str] = []  # the suite's task instructions (collect_instruction)
        self._told: dict[str, str] = {}     # an instruction as text() leaves it -> with its short passwords replaced
        self._short: list[bytes] = []        # the short passwords _told replaces (a cheap test before it)
        self._short_text: list[str] = []
        self._typed_other: set[str] = set()  # values typed into fields that are no password fields
        self._text_re = None
        self._bytes_re = None

    # ------------------------------------------------------------------------------ mapping
    def placeholder(self, secret: str) -> str:
        """The stable placeholder of ``secret`` (the same within this redaction)."""
        mac = hmac.new(self._key, secret.encode("utf-8"), hashlib.sha256).hexdigest()[:16]
        return PLACEHOLDER_PREFIX + mac

    def add(self, secret, kind: str, where: str = "") -> None:
        """Register a secret value (empty values and placeholders are not secrets); ``where`` says
        what it is and where it was found (for a refusal: never the value)."""
        if secret is None or isinstance(secret, bool):
            return
        secret = str(secret)
        if not secret or secret.startswith(PLACEHOLDER_PREFIX) or secret in self._secrets:
            return
        self._secrets[secret] = self.placeholder(secret)
        self._kind[secret] = kind
        self._where[secret] = where or f"a {kind} value"
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self._text_re = self._bytes_re = None

    @property
    def count(self) -> int:
        return len(self._secrets)

    def secrets(self) -> list[str]:
        """The secrets found (for checks in this process; never written anywhere)."""
        return list(self._secrets)

    def findings(self) -> list[tuple[str, str]]:
        """(kind, what and where) of each secret found, in the order found: what a refusal names."""
        return [(self._kind[s], self._where[s]) for s in self._secrets]

    def where_placed(self, placeholder: str) -> str | None:
        """What and where the secret behind ``placeholder`` was first found (never the value), or
        None when no secret of this redaction has it."""
        return next((self._where[s] for s, p in self._secrets.items() if p == placeholder), None)

    def placeholder_of(self, value: str) -> str | None:
        """The placeholder of ``value`` when it is a secret found, else None."""
        return self._secrets.get(value)

    def add_given(self, value: str, name: str) -> None:
        """A secret the user knows (``--secret-env NAME``): replaced wherever it occurs."""
        self.add(value, "given", f"the value of ${name} (--secret-env)")
        if self._kind.get(value) == "given":
            self._given.setdefault(value, name)

    def given_not_found(self) -> list[str]:
        """The names of the ``--secret-env`` variables whose value nothing rewritten so far held."""
        return [name for value, name in self._given.items() if self._secrets[value] not in self._hit]

    def replaced(self) -> tuple[int, dict[str, int]]:
        """How many distinct secrets, and how many of each kind, a redaction replaces: those found in
        what it read, and the ``--secret-env`` values only where something rewritten so far held them
        (a value the user named is looked for, not found)."""
        missing = len(self.given_not_found())
        kinds = dict(self.kinds)
        if missing:
            kinds["given"] -= missing
            if not kinds["given"]:
                del kinds["given"]
        return self.count - missing, dict(sorted(kinds.items()))

    def _put(self, placeholder: str) -> str:
        self._hit.add(placeholder)
        return placeholder

    def _sub(self, secret: str) -> str:
        if PLACEHOLDER_RE.fullmatch(secret):
            return secret  # redacted before (a second session recorded into the archive): kept as it is
        return self._put(self._secrets.get(secret) or self.placeholder(secret))

    def _variants(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for secret, ph in self._secrets.items():
            if not _literal(secret, self._kind.get(secret, "")):
                continue
            for v in (secret, quote_plus(secret), quote(secret, safe=""), quote(secret, safe="/:@"),
                      json.dumps(secret)[1:-1], html.escape(secret, quote=True), html.escape(secret, quote=False)):
                out.setdefault(v, ph)
        return out

    def _compile(self) -> None:
        variants = self._variants()
        self._map = variants
        self._bmap = {k.encode("utf-8"): v.encode("ascii") for k, v in variants.items()}
        if not variants:
            self._text_re = self._bytes_re = False
        else:
            alts = sorted(variants, key=len, reverse=True)  # the longest first: no half-replaced secret
            self._text_re = re.compile("|".join(re.escape(a) for a in alts))
            self._bytes_re = re.compile(b"|".join(re.escape(a.encode("utf-8")) for a in alts))
        self._told = self._instructions_told()

    def collect_instruction(self, instruction) -> None:
        """A task's instruction (a suite's ``tasks.jsonl``): the author may have written in it the
        password the task logs in with, which :meth:`text` leaves where it is shorter than
        :data:`MIN_LITERAL` (see :meth:`_instructions_told`)."""
        if isinstance(instruction, str) and instruction and instruction not in self._instructions:
            self._instructions.append(instruction)
            self._text_re = self._bytes_re = None

    def _instructions_told(self) -> dict[str, str]:
        """Each collected instruction, as :meth:`text` leaves it, -> the same with every typed
        password too short to be replaced everywhere replaced, as a word of its own, throughout an
        instruction that gives it as the password: quoted (``'pw1'``, ``"pw1"``, backticks), or
        within 40 characters after a word that names it (password, passcode, pass, pwd, pw, PIN,
        secret). An instruction that tells the agent which password to type must tell it the
        placeholder the redacted login holds (else the task cannot be done on the redacted
        archive, and the password is shared); an instruction that never gives it keeps the word
        ("the test site"), as the pages do, and a password that is also a value typed into another
        field (a user name: admin / admin) is left, since the agent must still type that as it is. Applied wherever the whole
        instruction occurs (task lines, trajectories, the prompts of cassettes), raw or
        JSON-escaped, so a run's prompts keep matching; the longest instructions first."""
        short = sorted((s for s, kind in self._kind.items()
                        if kind == "password" and not _literal(s, kind) and s not in self._typed_other),
                       key=len, reverse=True)
        self._short, self._short_text = [x.encode("utf-8") for x in short], short
        if not short or not self._instructions:
            return {}
        told: dict[str, str] = {}
        for instruction in self._instructions:
            base = self._text_re.sub(lambda m: self._map[m.group(0)], instruction) if self._text_re else instruction
            said = base
            for secret in short:  # (the longest first)
                word = re.escape(secret)
                if re.search(rf"['\"`\u2018\u201c]{word}['\"`\u2019\u201d]|\b(?:pass(?:word|code|phrase|wd)?|pwd|pw"
                             rf"|pin|secret)\b[^\n.]{{0,40}}?(?<!\w){word}(?!\w)", said, re.IGNORECASE):
                    said = re.sub(rf"(?<!\w){word}(?!\w)", self._secrets[secret], said)
            if said != base:
                for a, b in ((base, said), (json.dumps(base)[1:-1], json.dumps(said)[1:-1]),
                             (json.dumps(base, ensure_ascii=False)[1:-1], json.dumps(said, ensure_ascii=False)[1:-1])):
                    told.setdefault(a, b)
        return dict(sorted(told.items(), key=lambda kv: len(kv[0]), reverse=True))

    def cassette_text(self, s: str) -> str:
        """:meth:`text` for an LLM cassette's requests and answers: also every short typed password
        (see :meth:`_instructions_told`) where it stands quoted as a value of its own (an answer's
        ``fill('12', 'pw1')``, a tool call's ``{"text": "pw1"}``, raw or JSON-escaped, and the
        same in the action history of later prompts): a re-run from the cassette then types the
        placeholder the redacted login holds, as the redacted trajectory does."""
        s = self.text(s)
        if not s or not self._short_text or not any(x in s for x in self._short_text):
            return s
        for secret in self._short_text:
            s = re.sub(rf"(?<=['\"`]){re.escape(secret)}(?=\\*['\"`])", self._secrets[secret], s)
        return s

    def _tell(self, s: str) -> str:
        if not any(x in s for x in self._short_text):
            return s
        for a, b in self._told.items():
            s = s.replace(a, b)
        return s

    # ------------------------------------------------------------------------------ collecting
    def collect_headers(self, headers, where: str = "") -> None:
        """Credential header values of a request or response, and secret parameters of the URLs
        response headers name (``Location``)."""
        at = f" in {where}" if where else ""
        for name, value in headers or []:
            n = name.lower()
            if n in URL_HEADERS and value:
                self.collect_url(value.split(";", 1)[-1].strip() if n == "refresh" else value,
                                 f"the {name} header{at}")
            if n not in self.header_names or not value:
                continue
            if n == "cookie":
                for part in value.split(";"):
                    k, sep, v = part.strip().partition("=")
                    if sep:
                        self.add(v.strip(), "cookie", f"the value of cookie {k.strip()} (Cookie header){at}")
            elif n == "set-cookie":
                k, sep, v = value.split(";", 1)[0].partition("=")
                if sep:
                    self.add(v.strip(), "cookie", f"the value of cookie {k.strip()} (Set-Cookie header){at}")
            elif n in ("authorization", "proxy-authorization"):
                scheme, sep, cred = value.strip().partition(" ")
                what = f"the {scheme} credential of the {name} header" if sep else f"the {name} header value"
                self.add(cred.strip() if sep else scheme, "authorization", what + at)
            else:
                self.add(value.strip(), "header", f"the {name} header value{at}")

    def _pairs(self, query: str):
        for piece in query.split("&"):
            name, sep, value = piece.partition("=")
            if sep:
                yield unquote_plus(name), unquote_plus(value)

    def collect_url(self, url: str, where: str = "") -> None:
        """Secret query parameters of ``url``, and those of its fragment (an OAuth implicit grant
        redirects to ``...#access_token=...``)."""
        parts = urlsplit(url)
        for part, what in ((parts.query, "query parameter"), (parts.fragment, "fragment parameter")):
            for name, value in self._pairs(part):
                if is_secret_name(name, self.params):
                    self.add(value, "param", f"{what} {name} of {where or url}")

    def collect_body(self, content_type: str, body: bytes, where: str = "") -> None:
        """Secret form fields (urlencoded and multipart) and JSON keys of a request or response body."""
        if not body:
            return
        at = f" in {where}" if where else ""
        ct = (content_type or "").lower()
        if "multipart/form-data" in ct:
            for name, value, _ in _multipart_fields(body):
                if is_secret_name(name, self.params):
                    self.add(value, "param", f"multipart field {name}{at}")
            return
        if "html" in ct:
            for m in _INPUT.finditer(body):
                name, value, attr = _input_field(m.group(0))
                if name is not None and _secret_field(name, attr, self.params):
                    what = f"meta tag {name}" if attr == b"content" else f"form field {name} (a page's input)"
                    self.add(value, "param", f"{what}{at}")
            return
        text = body.decode("utf-8", "replace")
        if "json" in ct or text.lstrip().startswith(("{", "[")):
            try:
                self._collect_json(json.loads(text), at)
                return
            except ValueError:
                pass
        if "x-www-form-urlencoded" in ct or ("=" in text and "\n" not in text.strip()):
            for name, value in self._pairs(text.strip()):
                if is_secret_name(name, self.params):
                    self.add(value, "param", f"form field {name}{at}")

    def _collect_json(self, value, at: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if is_secret_name(str(k), self.params) and isinstance(v, (str, int, float)) and not isinstance(v, bool) \
                        and str(v).strip() != str(k).strip():
                    # (a value that is its own key is words, not a secret: a translation file's
                    # "GUI Authentication: Set User and Password", Syncthing's lang-en.json)
                    self.add(v, "param", f"JSON key {k}{at}")
                else:
                    self._collect_json(v, at)
        elif isinstance(value, list):
            for v in value:
                self._collect_json(v, at)

    def collect_supplied(self, headers, content_type: str, body: bytes, where: str = "") -> None:
        """What a person supplied in a request, whatever host it went to: the credential of its
        ``Authorization`` and ``Proxy-Authorization`` headers, and the values of the body's fields
        (urlencoded, multipart or JSON) that redaction replaces (:func:`is_secret_name`) and whose
        name says pass, pwd, pw or secret."""
        self.collect_headers([(k, v) for k, v in headers or [] if k.lower() in ("authorization", "proxy-authorization")],
                             where)
        if not body:
            return
        at = f" in {where}" if where else ""
        ct = (content_type or "").lower()
        if "multipart/form-data" in ct:
            fields = [(name, value) for name, value, _ in _multipart_fields(body)]
        else:
            text = body.decode("utf-8", "replace")
            try:
                fields = list(_json_pairs(json.loads(text)))
            except ValueError:
                fields = list(self._pairs(text.strip())) if "=" in text else []
        for name, value in fields:
            # (a field redaction replaces, `is_secret_name`, that names a password or a secret)
            if is_secret_name(str(name), self.params) and _SUPPLIED_FIELD.search(str(name)) \
                    and isinstance(value, (str, int, float)) and not isinstance(value, bool) and value != "":
                self.add(value, "password", f"the value of field {name}{at}")

    def collect_trajectory(self, trajectory: dict, where: str = "") -> None:
        """Values typed into password fields in a reference trajectory: a ``type`` step whose target
        is an ``input type=password`` (when the recorder notes the type) or whose name or CSS path
        says password / passwd / pwd / PIN / secret. Its ``instruction`` (``record session
        --instruction``) is collected too (:meth:`collect_instruction`)."""
        self.collect_instruction((trajectory or {}).get("instruction") if isinstance(trajectory, dict) else None)
        for step in (trajectory or {}).get("steps") or []:
            value = typed_value(step)
            if value is None:
                continue
            target = step.get("target") if isinstance(step.get("target"), dict) else {}
            typed = str(target.get("type") or target.get("input_type") or "").lower()
            said = " ".join(str(target.get(k) or "") for k in ("name", "css", "id"))
            if typed == "password" or _PASSWORD_TARGET.search(said):
                self.add(value, "password", f"a value typed into a password field{f' in {where}' if where else ''}")
            elif isinstance(value, str):
                self._typed_other.add(value)
                self._text_re = self._bytes_re = None

    # ------------------------------------------------------------------------------ rewriting
    def text(self, s: str) -> str:
        """``s`` with every (long enough) secret replaced, in its raw and encoded forms."""
        if self._text_re is None:
            self._compile()
        if not s:
            return s
        if self._text_re:
            s = self._text_re.sub(lambda m: self._put(self._map[m.group(0)]), s)
        return self._tell(s) if self._told else s

    def data(self, b: bytes) -> bytes:
        """``text`` for bytes."""
        if self._bytes_re is None:
            self._compile()
        if not b:
            return b
        if self._bytes_re:
            b = self._bytes_re.sub(lambda m: self._put(self._map[m.group(0).decode("utf-8")]).encode("ascii"), b)
        if self._told and any(x in b for x in self._short) and any(a.encode("utf-8") in b for a in self._told):
            b = self._tell(b.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
        return b

    def _query(self, query: str) -> str:
        out = []
        for piece in query.split("&"):
            name, sep, value = piece.partition("=")
            if sep and value and is_secret_name(unquote_plus(name), self.params):
                piece = f"{name}={self._sub(unquote_plus(value))}"
            out.append(piece)
        return "&".join(out)

    def url(self, url: str) -> str:
        """A URL with secret parameters and any secret in it replaced."""
        parts = urlsplit(url)
        if parts.query or "=" in parts.fragment:
            url = urlunsplit(parts._replace(query=self._query(parts.query), fragment=self._query(parts.fragment)))
        return self.text(url)

    def headers(self, headers):
        """A header list with credential values replaced (cookie names and attributes, and an
        Authorization scheme, kept), then any secret elsewhere in a value."""
        if headers is None:
            return None
        out = []
        for name, value in headers:
            n = name.lower()
            if n in self.header_names and value:
                if n == "cookie":
                    parts = []
                    for part in value.split(";"):
                        k, sep, v = part.strip().partition("=")
                        parts.append(f"{k}={self._sub(v.strip())}" if sep and v.strip() else part.strip())
                    value = "; ".join(parts)
                elif n == "set-cookie":
                    first, semi, rest = value.partition(";")
                    k, sep, v = first.partition("=")
                    if sep and v.strip():
                        value = f"{k}={self._sub(v.strip())}{semi}{rest}"
                elif n in ("authorization", "proxy-authorization"):
                    scheme, sep, cred = value.strip().partition(" ")
                    value = f"{scheme} {self._sub(cred.strip())}" if sep else self._sub(scheme)
                else:
                    value = self._sub(value.strip())
            elif n in URL_HEADERS and value:
                if n == "refresh":
                    head, sep, target = value.rpartition(";")
                    value = f"{head}{sep}{self.url(target)}" if sep else self.url(value)
                else:
                    value = self.url(value)
            out.append((name, self.text(value)))
        return out

    def body(self, content_type: str, body: bytes | None) -> bytes | None:
        """A request body with secret form fields and any secret in it replaced (read as
        :meth:`collect_body` reads it: what was collected there is replaced there)."""
        if not body:
            return body
        ct = (content_type or "").lower()
        if "multipart/form-data" in ct:
            return self.data(self._multipart(body))
        text = body.decode("utf-8", "replace")
        if "json" in ct or text.lstrip().startswith(("{", "[")):
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            else:
                fixed = self._json_fields(value)
                if fixed != value:  # (re-written compactly only then: the body key compares values)
                    body = json.dumps(fixed, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
                return self.data(body)
        if "x-www-form-urlencoded" in ct or ("=" in text and "\n" not in text.strip()):
            try:
                body = self._query(body.decode("utf-8")).encode("utf-8")
            except UnicodeDecodeError:
                pass
        return self.data(body)

    def _multipart(self, body: bytes) -> bytes:
        """A multipart body with the values of secret fields (files aside) replaced."""
        out, last = [], 0
        for name, value, (start, end) in _multipart_fields(body):
            if is_secret_name(name, self.params) and value in self._secrets:
                out += [body[last:start], self._put(self._secrets[value]).encode("ascii")]
                last = end
        return b"".join(out) + body[last:] if out else body

    def response_fields(self, content_type: str, body: bytes) -> bytes:
        """A (decoded) response body with the values of secret JSON keys and form fields replaced in
        place, its formatting kept (the same secret a request sent gets the same placeholder)."""
        ct = (content_type or "").lower()
        text = body.lstrip()[:1]
        if "json" in ct or text in (b"{", b"["):
            def json_sub(m):
                try:
                    value = json.loads(b'"' + m.group(3) + b'"')
                    name = json.loads(b'"' + m.group(1) + b'"')
                except ValueError:
                    return m.group(0)
                if is_secret_name(name, self.params) and value in self._secrets:
                    return m.group(0)[:m.start(3) - m.start(0)] + self._put(self._secrets[value]).encode("ascii") + b'"'
                return m.group(0)
            def number_sub(m):
                try:
                    name = json.loads(b'"' + m.group(1) + b'"')
                except ValueError:
                    return m.group(0)
                value = m.group(3).decode("ascii")
                if is_secret_name(name, self.params) and value in self._secrets:
                    return m.group(0)[:m.start(3) - m.start(0)] + b'"' + self._put(self._secrets[value]).encode("ascii") + b'"'
                return m.group(0)
            return _JSON_NUMBER.sub(number_sub, _JSON_PAIR.sub(json_sub, body))
        if "x-www-form-urlencoded" in ct:
            try:
                return self._query(body.decode("utf-8")).encode("utf-8")
            except UnicodeDecodeError:
                return body
        if "html" in ct:
            def input_sub(m):
                name, value, attr = _input_field(m.group(0))
                if name is None or not _secret_field(name, attr, self.params) or value not in self._secrets:
                    return m.group(0)
                start, end = _input_spans(m.group(0))[attr]
                return m.group(0)[:start] + html.escape(self._put(self._secrets[value])).encode() + m.group(0)[end:]
            return _INPUT.sub(input_sub, body)
        return body

    def _json_fields(self, value):
        """A JSON value with the values of secret keys replaced by their placeholders."""
        if isinstance(value, dict):
            return {k: (self._sub(str(v)) if is_secret_name(str(k), self.params) and str(v) in self._secrets
                        and isinstance(v, (str, int, float)) and not isinstance(v, bool) else self._json_fields(v))
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self._json_fields(v) for v in value]
        return value

    def json_value(self, value):
        """A JSON value with every string (and key) passed through :meth:`text`."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.json_value(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k): self.json_value(v) for k, v in value.items()}
        return value

    def rules(self) -> dict:
        """What this redaction looked for (for the archive's metadata): never the secrets."""
        return {"credential_headers": sorted(self.header_names), "secret_names": sorted(SECRET_NAMES),
                "secret_name_parts": sorted(SECRET_PARTS), "user_params": sorted(self.params),
                "password_fields": True, "min_literal": MIN_LITERAL,
                "placeholder": f"{PLACEHOLDER_PREFIX}<hmac-sha256 under a random key, not stored>"}


# A JSON member whose value is a string: "name" : "value" (bytes; escapes kept as they are).
_JSON_PAIR = re.compile(rb'"((?:[^"\\\r\n]|\\.){1,200})"(\s*:\s*)"((?:[^"\\]|\\.)*)"')
_JSON_NUMBER = re.compile(rb'"((?:[^"\\\r\n]|\\.){1,200})"(\s*:\s*)(-?[0-9]+(?:\.[0-9]+)?)(?=\s*[,}\]])')
_PART = re.compile(rb'Content-Disposition:[^\r\n]*?\bname="([^"]*)"([^\r\n]*)\r\n(?:[^\r\n]+\r\n)*\r\n', re.I)


# An <input> tag, or a <meta> (Rails' <meta name="csrf-token" content=...>): a quoted value may hold
# a ">" (possessive: linear on any input).
_INPUT = re.compile(rb"""<(?:input|meta)\b(?:=\s*"[^"]*"|=\s*'[^']*'|[^>])*+>""", re.I)
# One attribute, read from where the last ended as a browser's tokenizer reads it: quoted or unquoted.
_ATTR = re.compile(rb"""[\s/]*([^\s/>][^\s/>=]*)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s>]*))?""")


def _input_spans(tag: bytes) -> dict[bytes, tuple[int, int]]:
    """The span of each attribute's value (inside its quotes) of an ``<input>`` or ``<meta>`` tag,
    by lower-case name; the first of a repeated name, as a browser keeps it."""
    out: dict[bytes, tuple[int, int]] = {}
    pos = len(b"<meta") if tag[1:5].lower() == b"meta" else len(b"<input")
    while pos < len(tag):
        m = _ATTR.match(tag, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
        if m.group(2) is not None:
            start, end = m.span(2)
            if tag[start:start + 1] in (b'"', b"'"):
                start, end = start + 1, end - 1
            out.setdefault(m.group(1).lower(), (start, end))
    return out


def _secret_field(name: str, attr: bytes, params) -> bool:
    """Whether an input (``attr`` ``value``) or a meta tag (``content``) called ``name`` holds a
    secret. A meta tag that names the token's parameter or header (Rails' ``csrf-param``, Spring's
    ``_csrf_header``) holds a name, not a secret: replacing it everywhere would rename the field."""
    if attr == b"content" and re.search(r"(param|header|name)$", name.strip().lower()):
        return name.strip().lower() in params
    return is_secret_name(name, params)


def _input_field(tag: bytes) -> tuple[str | None, str | None, bytes | None]:
    """(name, value, the value's attribute) of an HTML ``<input>`` tag (``value``) or ``<meta>`` tag
    (``content``), the value unescaped; (None, None, None) when it has no name or no value."""
    attr = b"content" if tag[1:5].lower() == b"meta" else b"value"
    spans = _input_spans(tag)
    n, v = spans.get(b"name"), spans.get(attr)
    if n is None or v is None:
        return None, None, None
    try:
        return (html.unescape(tag[n[0]:n[1]].decode("utf-8")), html.unescape(tag[v[0]:v[1]].decode("utf-8")),
                attr)
    except UnicodeDecodeError:
        return None, None, None


def _json_pairs(value):
    """(key, value) of every key of a JSON value, nested ones too."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k, v
            yield from _json_pairs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _json_pairs(v)


def _multipart_fields(body: bytes):
    """(name, value, (start, end)) of each field of a multipart/form-data body that is not a file:
    the value runs from the blank line after the part's headers to the next ``\r\n--``."""
    for m in _PART.finditer(body):
        if b"filename=" in m.group(2).lower():
            continue
        start = m.end()
        end = body.find(b"\r\n--", start)
        if end < 0:
            continue
        try:
            yield m.group(1).decode("utf-8"), body[start:end].decode("utf-8"), (start, end)
        except UnicodeDecodeError:
            continue


# ==================================================================================== payloads
def _encode(data: bytes, enc: str) -> bytes:
    if enc in ("gzip", "x-gzip"):
        return gzip.compress(data, mtime=0)
    if enc == "deflate":
        return zlib.compress(data)
    if enc == "br":
        import brotli

        return brotli.compress(data)
    if enc == "zstd":
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    return data


def _payload(r: Redactor, payload: bytes, headers, where: str = "") -> bytes:
    """A response payload with secrets replaced (secret JSON keys and form fields by name, then every
    secret that is replaced wherever it occurs), its content coding undone and redone; kept as it
    was when nothing changed. A body that cannot be decoded is searched as it is stored; one that
    expands beyond the decoding limit cannot be searched and is refused (never passed over)."""
    if not payload:
        return payload
    ct = _header(headers, "content-type")
    enc = content_encoding(headers)
    if enc in ("", "identity"):
        return r.data(r.response_fields(ct, payload))
    try:
        plain = decode_content(payload, enc)
    except DecodedTooLarge as exc:
        raise ArchiveError(f"cannot redact {where or 'a response'}: its {exc}; it cannot be searched for "
                           f"secrets, so it is refused rather than passed over") from None
    except DecodeError:
        return r.data(payload)
    redacted = r.data(r.response_fields(ct, plain))
    return payload if redacted == plain else _encode(redacted, enc)


def response_body(payload: bytes, headers, where: str) -> bytes | None:
    """The decoded body of a response for collecting secrets (None when it cannot be decoded);
    refused (:class:`ArchiveError`) beyond the decoding limit, never passed over."""
    try:
        return decode_content(payload, content_encoding(headers))
    except DecodedTooLarge as exc:
        raise ArchiveError(f"cannot search {where} for secrets: its {exc}; refused rather than "
                           f"passed over") from None
    except DecodeError:
        return None


def _collectable(headers) -> bool:
    """Whether a response body may hold secret fields by name: JSON or a form (a token endpoint), or
    a page (the values of its inputs, such as a CSRF token a form will send)."""
    ct = _header(headers, "content-type").lower()
    return "json" in ct or "x-www-form-urlencoded" in ct or "html" in ct


def _with_length(headers, old: bytes | None, new: bytes | None):
    if headers is None or old == new:
        return headers
    return [(k, str(len(new or b"")) if k.lower() == "content-length" else v) for k, v in headers]


def _header(headers, name: str) -> str:
    for k, v in headers or []:
        if k.lower() == name:
            return v
    return ""


# ==================================================================================== archives
def collect_archive(arc: Archive, r: Redactor, *, skip=None) -> None:
    """Every secret the archive's exchanges show: credential headers, secret query parameters (of
    the URL and of ``Location`` headers), secret form fields and JSON keys of request bodies and of
    JSON and form responses. ``skip(url)``: of those exchanges (a refusal's reserved hosts), only
    what a person supplied is collected (:meth:`Redactor.collect_supplied`), not what the site
    issued (its cookies, tokens, form values)."""
    for row in arc.exchange_rows():
        ex = ExchangeRecord(arc, row)
        req = ex.request
        req_at, resp_at = f"the request of {ex.method} {ex.url}", f"the response of {ex.method} {ex.url}"
        if skip is not None and skip(ex.url):
            if req.captured or req.body_digest:
                r.collect_supplied(req.headers if req.captured else [], req.header("content-type") or "",
                                   req.body() if req.body_digest else b"", req_at)
            continue
        r.collect_url(ex.url, req_at)
        if req.captured:
            r.collect_headers(req.headers, req_at)
        r.collect_headers(ex.headers, resp_at)
        if req.body_digest:
            r.collect_body(req.header("content-type") or "", req.body(), f"the request body of {ex.method} {ex.url}")
        if ex.response.payload_size and _collectable(ex.headers):
            where = f"the response body of {ex.method} {ex.url}"
            body = response_body(ex.response.payload(verify=True), ex.headers, where)
            if body:
                r.collect_body(_header(ex.headers, "content-type"), body, where)
    for doc in arc.documents(prefix="trajectories/"):  # a recorded session's reference trajectory
        value = arc.get_document(doc.name)
        if not _is_trajectory(doc.name, value):
            continue
        r.collect_trajectory(value, f"document {doc.name}")  # (typed by a person: whatever the host)


def _is_trajectory(name: str, value) -> bool:
    return name.startswith("trajectories/") and isinstance(value, dict) and isinstance(value.get("steps"), list)


def redact_archive(src, out, r: Redactor, *, progress=None) -> dict:
    """Write ``out``, a redacted copy of archive ``src``, with the secrets ``r`` holds (collect them
    first: :func:`collect_archive`, :meth:`Redactor.collect_trajectory`). Atomic: nothing is left
    at ``out`` when it fails. Returns a summary (counts, never secrets)."""
    counts = {"exchanges": 0, "changed": 0, "pages": 0, "documents": 0}
    with Archive.open(src) as arc:
        meta = arc.meta()
        given = {k: meta.get(k) or "" for k in ("creator", "description", "license")}
        with new_archive_atomically(out, replay_rules=meta.get("replay_rules") or {}, **given) as new:
            with new.transaction():
                for row in arc.conn.execute("SELECT * FROM sessions ORDER BY id"):
                    info = r.json_value(json.loads(row["info"]) if row["info"] else {})
                    new.conn.execute("INSERT INTO sessions(id, kind, source, tool, started_at, ended_at, info) "
                                     "VALUES (?,?,?,?,?,?,?)", (row["id"], row["kind"], r.url(row["source"] or ""),
                                                                row["tool"], row["started_at"], row["ended_at"],
                                                                json.dumps(info, sort_keys=True)))
                for row in arc.exchange_rows():
                    ex = ExchangeRecord(arc, row).to_exchange()
                    before = (ex.url, ex.req_headers, ex.req_body, ex.resp_headers, ex.payload)
                    ct = _header(ex.req_headers, "content-type")
                    req_body = r.body(ct, ex.req_body)
                    payload = _payload(r, ex.payload, ex.resp_headers, f"the response of {ex.method} {ex.url}")
                    ex.url = r.url(ex.url)
                    ex.req_headers = _with_length(r.headers(ex.req_headers), ex.req_body, req_body)
                    ex.resp_headers = _with_length(r.headers(ex.resp_headers), ex.payload, payload)
                    ex.req_body, ex.payload = req_body, payload
                    ex.extra = r.json_value(ex.extra)
                    counts["exchanges"] += 1
                    counts["changed"] += before != (ex.url, ex.req_headers, ex.req_body, ex.resp_headers, ex.payload)
                    new.add_exchange(ex)
                    if progress:
                        progress(1)
                for page in arc.pages():
                    dom = page.dom()
                    new.add_page(session_id=page.session_id, url=r.url(page.url), captured_at=page.captured_at,
                                 title=r.text(page.title), screenshot=page.screenshot(),
                                 dom=r.data(dom) if dom else None, extra=r.json_value(page.extra) or None)
                    counts["pages"] += 1
                for doc in arc.documents():
                    value = arc.get_document(doc.name)
                    value = redact_trajectory(r, value) if _is_trajectory(doc.name, value) else r.json_value(value)
                    new.put_document(r.text(doc.name), value)
                    counts["documents"] += 1
                for alias, digest in arc.conn.execute("SELECT alias, digest FROM digest_aliases"):
                    if new.has_blob(digest):
                        new.add_alias(alias, digest)
                count, kinds = r.replaced()
                new.write_meta("redaction", {"redacted_at": now(), "rules": r.rules(), "secrets": count,
                                            "by_kind": kinds, "source_tool": meta.get("tool")})
    return dict(counts, secrets=count, by_kind=kinds, given_not_found=r.given_not_found())


# ==================================================================================== suites
def _reference_files(suite_dir: Path) -> list[Path]:
    return sorted(p for p in (suite_dir / "references").rglob("*.json") if p.is_file()) \
        if (suite_dir / "references").is_dir() else []


def collect_suite(suite_dir, r: Redactor) -> None:
    """The values typed into password fields in a suite's reference trajectories, and its tasks'
    instructions (:meth:`Redactor.collect_instruction`)."""
    tasks = Path(suite_dir) / "tasks.jsonl"
    if tasks.is_file():
        for line in tasks.read_text(encoding="utf-8").splitlines():
            try:
                task = json.loads(line) if line.strip() else None
            except ValueError:
                continue  # (the suite's loader says what is wrong with a line; redaction reads what it can)
            if isinstance(task, dict):
                r.collect_instruction(task.get("instruction"))
    for p in _reference_files(Path(suite_dir)):
        try:
            r.collect_trajectory(json.loads(p.read_text(encoding="utf-8")))
        except ValueError:
            raise ArchiveError(f"{p}: not a readable reference trajectory") from None


def redact_trajectory(r: Redactor, trajectory: dict) -> dict:
    """A trajectory (reference or run) with its password values, and any secret elsewhere, replaced:
    the reference agent then types the placeholder the redacted archive's POST body holds."""
    out = r.json_value(trajectory)
    for step in out.get("steps") or [] if isinstance(out, dict) else []:
        value = typed_value(step)
        ph = r.placeholder_of(value) if isinstance(value, str) else None
        if ph is None:
            continue  # (a long secret was replaced by json_value already)
        if step.get("action") in ("type", "fill"):
            step["value"] = ph
        else:  # a run's action string, its parsed text and typed text
            step["typed"] = ph if step.get("typed") is not None else step.get("typed")
            if isinstance(step.get("parsed"), dict) and step["parsed"].get("text") == value:
                step["parsed"]["text"] = ph
            if isinstance(step.get("action"), str):
                action = step["action"].replace(repr(value), repr(ph))
                step["action"] = action.replace(json.dumps(value), json.dumps(ph))
    return out


def redact_suite(suite_dir, suite_out, r: Redactor, *, archive_out=None, archive_digest: str | None = None) -> int:
    """Write ``suite_out``, a copy of suite folder ``suite_dir`` with its tasks, references and manifest
    passed through ``r``; its manifest names ``archive_out`` (relative to the new suite) and its
    digest. Written beside ``suite_out`` and renamed into place. Returns the files written."""
    import shutil

    src, dest = Path(suite_dir), Path(suite_out)
    if dest.exists():
        raise ArchiveError(f"{dest}: already exists")
    if not (src / "tasks.jsonl").is_file():
        raise ArchiveError(f"{src}: not a suite folder (no tasks.jsonl)")
    tmp = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    n = 0
    try:
        for f in sorted(p for p in src.rglob("*") if p.is_file() and not p.is_symlink()):
            rel = f.relative_to(src)
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if f.suffix == ".jsonl":
                lines = []
                for line in f.read_text(encoding="utf-8").splitlines():
                    lines.append(json.dumps(r.json_value(json.loads(line)), ensure_ascii=False, sort_keys=True)
                                 if line.strip() else line)
                target.write_text("\n".join(lines) + "\n", encoding="utf-8")
            elif f.suffix == ".json":
                value = json.loads(f.read_text(encoding="utf-8"))
                if rel.parts[0] == "references":
                    value = redact_trajectory(r, value)
                else:
                    value = r.json_value(value)
                if rel.as_posix() == "manifest.json" and isinstance(value, dict) and archive_out is not None:
                    value["archive"] = os.path.relpath(Path(archive_out).resolve(), dest.resolve())
                    if archive_digest and "archive_digest" in value:  # (a suite that names none stays so)
                        value["archive_digest"] = archive_digest
                target.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            else:
                target.write_bytes(r.data(f.read_bytes()))
            n += 1
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return n


def archive_redaction(arc_path) -> dict | None:
    """The ``redaction`` metadata of an archive (None when it was not redacted)."""
    with Archive.open(arc_path) as arc:
        return arc.meta().get("redaction")


def check_output_free(path) -> None:
    """Refuse, in one line, an output path that exists."""
    if Path(path).exists():
        raise ArchiveError(f"{path}: already exists")


def redact_in_place(path, r: Redactor) -> dict:
    """Replace archive ``path`` by its redacted copy (``record ... --redact``): the copy is written
    beside it and renamed over it only when complete, so a failure leaves the archive as it was.
    The archive must not be open elsewhere."""
    from .store import archive_files

    final = Path(path)
    tmp = final.with_name(f".{final.name}.redacting-{os.getpid()}")
    for f in archive_files(tmp):
        f.unlink(missing_ok=True)
    try:
        summary = redact_archive(final, tmp, r)
        for f in archive_files(final)[1:]:  # the old file's SQLite side files must not meet the new one
            f.unlink(missing_ok=True)
        os.replace(tmp, final)
    finally:
        for f in archive_files(tmp):
            f.unlink(missing_ok=True)
    return summary
