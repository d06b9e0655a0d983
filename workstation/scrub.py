"""Secrets never leave the process: what counts as a secret, and the masks, in one module.

Every boundary where text leaves for a model or the disk calls into here (the
request the agent sends, tool arguments and results, session records,
episodic events, LTM values, compaction summaries, exports and archives, the
streaming terminal, litellm's own log records).

What is a secret:
* values registered at run time (`register`: every API key the model client
  reads from the environment);
* the values of environment variables whose *name* looks secret
  (`*_KEY`, `*_TOKEN`, `*_SECRET`, `*PASSWORD*`, `*_CREDENTIALS`, ...), read
  afresh at each call so a variable set later is covered too;
* text in a well-known key format, found by the detectors of Yelp's
  detect-secrets (GitHub, GitLab, AWS, Slack, Stripe, OpenAI, PyPI, npm, JWT,
  private-key blocks, passwords in URLs, ...). Its high-entropy and keyword
  detectors are left out on purpose: they fire on content hashes and on code
  such as `password = "..."`, which must reach the model as written. Keys of
  model providers that detect-secrets does not know are in `_PROVIDER_KEYS`.

Two strengths:
* `mask(text)`: known values (as written, and their hex, URL-encoded and base64 copies) and key
  formats; safe for code and file content.
* `redact(text)`: `mask` plus credential-looking assignments (`api_key=...`,
  `Authorization: Bearer ...`) and a key's head echoed half-masked by a
  provider; for error messages, command output and log records, never code.

Commands the agent runs never get the secrets to print in the first place: `command_env` is the
environment they inherit, without the variables whose names look secret.

detect-secrets costs ~0.5 s to import: it is loaded only for text the prefilter (`may_hold_key`) says may
hold a key; `warm()` loads it from a background thread at start. The prefilter itself is built from the
detectors once and kept in the user cache, keyed by their source files, so a short command masking a
query (`workstation find NAME`) never imports them.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import re
import threading
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import quote, quote_plus

import re2

from .paths import user_cache_dir
from .textmemo import TextMemo

MASK = "***"
MIN_SECRET_LEN = 8  # shorter values ("true", "dev") would mask ordinary words everywhere

# Names of environment variables whose values are secrets.
SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|SECRET_KEY|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?|PAT|AUTH)$"
    r"|PASSWORD|SECRET", re.I)
# Names that match the pattern above but hold no secret.
_NOT_SECRET_NAMES = frozenset({"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "PYTHONHASHSEED", "KEYTIMEOUT"})

# Names of environment variables a command never inherits unless the user's config passes them
# (`agent.command_env_pass`): SECRET_NAME, these words anywhere in a name, and these as a name's
# "_"-separated part (AWS_ACCESS_KEY_ID, SSH_AUTH_SOCK, AWS_SESSION_TOKEN).
_COMMAND_SECRET_WORDS = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|API_?KEY|COOKIE", re.I)
_COMMAND_SECRET_PARTS = frozenset({"KEY", "KEYS", "AUTH", "AUTHORIZATION", "SESSION", "SESSIONID", "PAT", "PASS",
                                   "PRIVATE", "CREDS", "SIGNATURE"})
# Key variables of model providers and other well-known tools whose names the patterns above may miss.
PROVIDER_KEY_VARS = frozenset({
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_AD_TOKEN", "MISTRAL_API_KEY", "COHERE_API_KEY",
    "CO_API_KEY", "GROQ_API_KEY", "XAI_API_KEY", "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY",
    "TOGETHERAI_API_KEY", "TOGETHER_API_KEY", "FIREWORKS_API_KEY", "FIREWORKS_AI_API_KEY",
    "PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY", "REPLICATE_API_KEY", "REPLICATE_API_TOKEN", "HF_TOKEN",
    "HUGGINGFACE_API_KEY", "WATSONX_APIKEY", "DATABRICKS_TOKEN", "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "CLAUDE_CODE_OAUTH_TOKEN",
    "GITHUB_TOKEN", "GH_TOKEN", "GITLAB_TOKEN", "NPM_TOKEN", "PYPI_TOKEN", "VOYAGE_API_KEY",
})


def command_secret_name(name: str) -> bool:
    """Whether a command is kept from inheriting the environment variable `name` (see `command_env`)."""
    upper = name.upper()
    if upper in PROVIDER_KEY_VARS or SECRET_NAME.search(name) or _COMMAND_SECRET_WORDS.search(name):
        return True
    return any(part in _COMMAND_SECRET_PARTS for part in re.split(r"[^A-Z0-9]+", upper))


def command_env(environ: Mapping[str, str], *, passed: Iterable[str] = (),
                withheld: Iterable[str] = ()) -> dict[str, str]:
    """The environment a command the agent runs gets: `environ` without the variables whose names look
    secret (`command_secret_name`) or are in `withheld` (the configured model's `api_key_env`), except
    those the user's own config passes (`passed`: `agent.command_env_pass`). PATH, HOME, LANG, TERM
    and the rest stay."""
    keep, drop = frozenset(passed), frozenset(withheld)
    return {name: value for name, value in environ.items()
            if name in keep or not (name in drop or command_secret_name(name))}


# Values under keys ending in these (after "_", "-" or nothing) are secrets at any depth of a structure:
# api_key, X-API-Key, Authorization, access_token, db-password... Each name is literal characters, each
# maybe followed by "?" (memory.episodic searches JSON text for them reversed, so keep them that simple).
SECRET_FIELD_NAMES = ("api_?key", "api-?key", "private_key", "secret", "password", "passwd", "authorization",
                      "token")
SECRET_FIELD = re.compile(rf"(?:^|[_-])(?:{'|'.join(SECRET_FIELD_NAMES)})$", re.IGNORECASE)
REDACTED_FIELD = "[redacted]"

# Model providers' key formats that detect-secrets (1.5) has no detector for.
_PROVIDER_KEYS = re.compile(
    r"\b(?:sk-ant-[A-Za-z0-9_\-]{20,}|sk-(?:proj-|or-v1-|svcacct-)?[A-Za-z0-9_\-]{32,}"
    r"|gsk_[A-Za-z0-9]{20,}|xai-[A-Za-z0-9]{20,}|hf_[A-Za-z0-9]{30,}|pplx-[A-Za-z0-9]{20,}"
    r"|r8_[A-Za-z0-9]{20,}|AIza[0-9A-Za-z_\-]{35}|ya29\.[0-9A-Za-z_\-]{20,})")

# detect-secrets detectors used (class names in detect_secrets.plugins); see the module docstring.
_DETECTORS = (
    "aws.AWSKeyDetector", "artifactory.ArtifactoryDetector", "azure_storage_key.AzureStorageKeyDetector",
    "basic_auth.BasicAuthDetector", "discord.DiscordBotTokenDetector", "github_token.GitHubTokenDetector",
    "gitlab_token.GitLabTokenDetector", "jwt.JwtTokenDetector", "mailchimp.MailchimpDetector",
    "npm.NpmDetector", "openai.OpenAIDetector", "pypi_token.PypiTokenDetector",
    "sendgrid.SendGridDetector", "slack.SlackDetector", "square_oauth.SquareOAuthDetector",
    "stripe.StripeDetector", "telegram_token.TelegramBotTokenDetector", "twilio.TwilioKeyDetector",
)
_PRIVATE_KEY_BLOCK = re.compile(
    r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY( BLOCK|)-----.*?(?:-----END \1PRIVATE KEY\2-----|\Z)", re.S)
_PRIVATE_KEY_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK|)-----")
_SECRETISH_RUN = re.compile(r"[A-Za-z0-9_\-+/=.~]{8,}")

# redact() only: things that look like credentials in prose, logs and error messages
_ASSIGNMENTS = [
    (re.compile(r"(?i)\b(Bearer)\s+[A-Za-z0-9._~+/=\-]{6,}"), r"\1 " + MASK),
    (re.compile(r"\b(sk-(?:ant-|proj-|or-)?)[A-Za-z0-9_\-*]{6,}"), r"\1" + MASK),  # even a short or cut key
    (re.compile(r"(?i)(api key provided:?\s*)\S+"), r"\1" + MASK),
    (re.compile(r"(?i)([\"']?(?:x-api-key|api[_-]?key|access[_-]?token|auth[_-]?token|secret|password|"
                r"authorization)[\"']?\s*[:=]\s*[\"']?)(?!\*\*\*|(?:Bearer|Basic|Token)\s)"
                r"([^\s\"',;}&]{4,})"), r"\1" + MASK),
]

_registered: set[str] = set()
_env_values: frozenset[str] = frozenset()
_env_seen: dict | None = None
_lock = threading.Lock()
_detectors: list[re.Pattern[str]] | None = None


def register(value: str | None) -> None:
    """Remember a secret value (an API key just read): masked everywhere from now on."""
    if value and len(value) >= MIN_SECRET_LEN:
        with _lock:
            _registered.add(value)


def secret_env_names(environ: Iterable[str] | None = None) -> list[str]:
    """Names of the environment variables whose values are treated as secrets."""
    names = os.environ if environ is None else environ
    return sorted(n for n in names if n.upper() not in _NOT_SECRET_NAMES and SECRET_NAME.search(n))


def known() -> list[str]:
    """Every secret value known now, longest first (so no part of a longer one is left behind).

    Hot paths (the episodic writer) call this per event: the secret-named variables are looked up
    again only when the environment changed since the last call (a dict comparison)."""
    global _env_values, _env_seen
    raw = getattr(os.environ, "_data", None)  # CPython's bytes mapping; compared, never changed
    if raw is None or raw != _env_seen:
        found = set()
        for name in secret_env_names():
            value = os.environ.get(name, "")
            if len(value) >= MIN_SECRET_LEN:
                found.add(value)
        _env_values, _env_seen = frozenset(found), (dict(raw) if raw is not None else None)
    with _lock:
        values = _registered | _env_values
    return sorted(values, key=len, reverse=True)


def mask_values(text: str) -> str:
    """Only the known secret values masked, as written and encoded (`encoded_forms`): the cheap part of
    `mask`, for hot paths whose text has been through `mask` at its boundary already."""
    for secret in known():
        for form in encoded_forms(secret):
            if form in text:
                text = text.replace(form, MASK)
    return text


MIN_ENCODED_LEN = 10  # a shorter piece of an encoded value (base64 of a short key's middle) is left alone


@lru_cache(maxsize=256)
def encoded_forms(secret: str) -> tuple[str, ...]:
    """`secret` as written and as a command could print it encoded: hex (either case), URL-encoded, and
    base64 (standard and URL-safe) at each of the three byte offsets it may sit at in a longer encoded
    text, each cut to the characters that depend on the secret alone. Longest first. Base64 wrapped over
    lines (`base64` without `-w0`) is not found."""
    raw = secret.encode("utf-8", "surrogatepass")
    forms = {secret, raw.hex(), raw.hex().upper(), quote(secret, safe=""), quote_plus(secret, safe="")}
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + raw).decode("ascii")
        first = -(-8 * offset // 6)  # the first character made of the secret's bits only
        last = (8 * (offset + len(raw))) // 6  # one past the last such character
        piece = encoded[first:last]
        forms.update((piece, piece.replace("+", "-").replace("/", "_")))
    return tuple(sorted((f for f in forms if f == secret or len(f) >= MIN_ENCODED_LEN), key=len, reverse=True))


def _load_detectors() -> list[re.Pattern[str]]:
    global _detectors
    if _detectors is None:
        with _lock:
            if _detectors is None:
                patterns: list[re.Pattern[str]] = []
                for dotted in _DETECTORS:
                    module, cls = dotted.rsplit(".", 1)
                    detector = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls)
                    patterns.extend(detector.denylist)
                _detectors = patterns
    return _detectors


def warm() -> None:
    """Load the detectors now (from a background thread: ~0.5 s of imports)."""
    _load_detectors()


def _spans(text: str) -> list[tuple[int, int]]:
    """Where well-known key formats are in `text`: the secret part of each detector's match."""
    spans = [m.span() for m in _PRIVATE_KEY_BLOCK.finditer(text)]
    spans += [m.span() for m in _PROVIDER_KEYS.finditer(text)]
    for pattern in _load_detectors():
        for match in pattern.finditer(text):
            groups = [i for i in range(1, pattern.groups + 1)
                      if len(match.group(i) or "") >= 6 and match.span(i) != match.span()]
            if groups:  # the detector captured the secret itself (a URL's password, an AWS secret key)
                spans += [match.span(i) for i in groups]
                continue
            start = match.start()
            runs = list(_SECRETISH_RUN.finditer(match.group(0)))
            if runs:  # the longest key-like run of the match: delimiters and prefixes stay as written
                run = max(runs, key=lambda r: r.end() - r.start())
                spans.append((start + run.start(), start + run.end()))
    return spans


_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/=.~")


def _whole_token(text: str, start: int, end: int) -> tuple[int, int]:
    """A detector's span grown to the whole key-like token around it (a JWT's signature, a key's tail
    past the length a pattern asks for)."""
    while start > 0 and text[start - 1] in _KEY_CHARS:
        start -= 1
    while end < len(text) and text[end] in _KEY_CHARS:
        end += 1
    return start, end


def _mask_spans(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    out, last = [], 0
    for start, end in sorted(_whole_token(text, *span) for span in spans):
        if end <= last:
            continue
        start = max(start, last)
        out.append(text[last:start])
        out.append(MASK)
        last = end
    out.append(text[last:])
    return "".join(out)


def mask(text: str) -> str:
    """Known secret values and well-known key formats masked; everything else exactly as it was."""
    if not text:
        return text
    return _masked.get(str(text), _mask, extra=tuple(known()))


def _mask(text: str) -> str:
    text = mask_values(text)
    if not may_hold_key(text):
        return text
    return _mask_spans(text, _spans(text))


_prefilter_pattern = None
_prefilter_text: str | None = None


def prefilter_source() -> str:
    """The RE2 pattern `may_hold_key` runs: an alternation of the detectors' patterns loosened into a superset
    (lookaheads dropped, upper bounds opened). Building it imports the detectors (~0.1 s); a process handed it
    (`use_prefilter`) needs them only when some text is a candidate."""
    global _prefilter_text
    if _prefilter_text is None:
        parts = []
        for pattern in [*_load_detectors(), _PROVIDER_KEYS]:
            loose = re.sub(r"\{(\d+),\d+\}", r"{\1,}", pattern.pattern.replace("(?!\\w)", ""))
            parts.append(f"(?i:{loose})" if pattern.flags & re.IGNORECASE else f"(?:{loose})")
        parts.append("-----BEGIN [A-Z0-9 ]*PRIVATE KEY")
        _prefilter_text = "|".join(parts)
    return _prefilter_text


PREFILTER_FILE = "key-prefilter.json"  # in the user cache: {"key": _detectors_key(), "source": prefilter_source()}


def _detectors_key() -> str | None:
    """A digest of what `prefilter_source()` is made of: this recipe and the source files of the detectors
    (read, not imported: ~1 ms). None when detect-secrets cannot be found that way (a zip, a frozen app)."""
    spec = importlib.util.find_spec("detect_secrets")  # a top-level package: found, not imported
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.join(list(spec.submodule_search_locations)[0], "plugins")
    digest = hashlib.sha256(repr((_DETECTORS, _PROVIDER_KEYS.pattern, prefilter_source.__code__.co_code,
                                     prefilter_source.__code__.co_consts)).encode())
    try:
        for module in sorted({dotted.rsplit(".", 1)[0] for dotted in _DETECTORS}):
            with open(os.path.join(folder, f"{module}.py"), "rb") as source:
                digest.update(source.read())
    except OSError:
        return None
    return digest.hexdigest()


def _cached_prefilter_source(rebuild: bool = False) -> str:
    """`prefilter_source()` as the user cache holds it when the detectors are the ones it was built from,
    else (or with `rebuild`) built now, importing them, and kept for the next process."""
    key = _detectors_key()
    if key is None:
        return prefilter_source()
    path = user_cache_dir() / PREFILTER_FILE
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        if not rebuild and isinstance(saved, dict) and saved.get("key") == key and isinstance(saved.get("source"), str):
            return saved["source"]
    except (OSError, ValueError):
        pass  # none yet, or unreadable: built below and written again
    source = prefilter_source()
    try:  # atomically: a process reading it meanwhile sees the old file or the new one
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_name(f".{PREFILTER_FILE}.{os.getpid()}.{threading.get_ident()}")
        staged.write_text(json.dumps({"key": key, "source": source}), encoding="utf-8")
        os.replace(staged, path)
    except OSError:
        pass  # a read-only home: every process builds it, as before the cache
    return source


def use_prefilter(source: str) -> Any:
    """Compile `source`, another process's `prefilter_source()`, as this process's `may_hold_key` pattern (the
    index's worker processes: each would import the detectors for it otherwise)."""
    global _prefilter_pattern
    options = re2.Options()
    options.log_errors = False
    options.max_mem = 64 << 20
    _prefilter_pattern = re2.compile(source, options)  # a detector RE2 cannot read fails here
    return _prefilter_pattern


def may_hold_key(text: str) -> bool:
    """Whether `text` may hold a key format the detectors find: one pass of RE2 (linear time, ~400 MB/s)
    over `prefilter_source()`, a superset of their patterns, so the Python detectors (~5 MB/s) run only on
    text that has a candidate."""
    pattern = _prefilter_pattern
    if pattern is None:
        try:
            pattern = use_prefilter(_cached_prefilter_source())
        except re2.error:  # a cache file RE2 cannot read (damaged): built again from the detectors
            pattern = use_prefilter(_cached_prefilter_source(rebuild=True))
    try:
        return pattern.search(text) is not None
    except UnicodeEncodeError:  # a lone surrogate, which RE2's UTF-8 cannot hold: let the detectors look
        return True


_masked = TextMemo()


def redact(text: str) -> str:
    """`mask`, plus credential-looking assignments and a known key's head echoed half-masked."""
    if not text:
        return text
    text = str(text)
    for secret in known():
        if len(secret) >= 12 and secret[:8] in text:
            # a provider echoing the key half-masked ("sk-abcdef12*****7890") still leaks its head
            text = re.sub(re.escape(secret[:8]) + r"\S*", MASK, text)
    text = mask(text)
    for pattern, repl in _ASSIGNMENTS:
        text = pattern.sub(repl, text)
    return text


# A string literal given to a name: `API_KEY = "…"`, `password="…"` (a default), `DB_PASSWORD: str = "…"`,
# `const authToken: string = '…'`, `githubToken := "…"`, `"token": "…"`.
_ASSIGNED = re.compile(r"""(?P<name>[A-Za-z_][A-Za-z0-9_]*)["']?\s*(?::\s*[A-Za-z_][\w\[\]., |]*?\s*)?"""
                       r"""(?::=|=|:)\s*(?P<q>["'`])(?P<value>[^"'`\n]{4,}?)(?P=q)""")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")


def _assigned(match: re.Match) -> str:
    name = _CAMEL.sub(r"\1_\2", match["name"])
    if name.upper() in _NOT_SECRET_NAMES or not SECRET_NAME.search(name):
        return match[0]
    start, end = match.span("value")
    whole = match[0]
    return whole[: start - match.start()] + MASK + whole[end - match.start():]


def assigns_secret(text: str) -> bool:
    """Whether `mask_assigned` would mask a literal in `text` (without `mask`'s detectors)."""
    return any(_assigned(m) != m[0] for m in _ASSIGNED.finditer(text))


def mask_assigned(text: str) -> str:
    """`mask`, plus string literals given to secret-looking names (SECRET_NAME, camelCase too) masked, the
    names kept: for what the knowledge map keeps of code (signatures, purposes), which the model reads as
    a summary, never to edit from. The file tools give code as written (`mask` alone)."""
    return _ASSIGNED.sub(_assigned, mask(text)) if text else text


# .env-style files: what they hold is configuration with secrets in it. The file tools give one to the
# model only when the user named it in this turn, the map never holds one, and when one is read or
# written its values are registered as secrets, so no log, event or export keeps them.
_ENV_FILE = re.compile(r"(?:^|/)(?:\.env(?:\.[^/]+)?|[^/]+\.env|\.envrc)$")
_SHARED_ENV = (".example", ".sample", ".template", ".dist", ".defaults")  # committed on purpose: placeholders
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?[A-Za-z_][A-Za-z0-9_.-]*\s*[=:]\s*(.*?)\s*$", re.M)


def is_env_file(path: str) -> bool:
    """Whether `path` (workspace-relative, '/' separators) names an .env-style file."""
    return bool(_ENV_FILE.search(path)) and not path.endswith(_SHARED_ENV)


def env_files_named(text: str) -> frozenset[str]:
    """The .env-style paths a user's message names (`.env`, `config/.env.local`, `./deploy.env`)."""
    words = re.split(r"[\s`'\",;:()\[\]<>]+", text or "")
    return frozenset(w.rstrip(".!?").removeprefix("./") for w in words if is_env_file(w.rstrip(".!?")))


def register_env_values(text: str) -> int:
    """Register every value (past MIN_SECRET_LEN) of an .env-style text as a secret; returns how many."""
    found = 0
    for match in _ENV_LINE.finditer(text or ""):
        value = match.group(1)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if len(value) >= MIN_SECRET_LEN:
            register(value)
            found += 1
    return found


class StreamMasker:
    """`mask` for a reply that arrives in fragments (the terminal shows it as it streams): text is
    passed on once nothing after it can still complete a secret, so a key split over fragments is
    masked whole. What is held back: the run after the last whitespace (keys hold none), and a
    private-key block until its END line. `flush()` passes on the rest when the reply ends."""

    HOLD_MAX = 8192  # a run longer than this without whitespace is passed on, all but its tail

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit = emit
        self._held = ""

    def __call__(self, fragment: str) -> None:
        self._held += fragment
        cut = self._safe_cut(self._held)
        if cut > 0:
            out, self._held = self._held[:cut], self._held[cut:]
            self.emit(mask(out))

    def flush(self) -> None:
        if self._held:
            out, self._held = self._held, ""
            self.emit(mask(out))

    def _safe_cut(self, text: str) -> int:
        begin = text.rfind("-----BEGIN")
        if begin >= 0:
            head = text[begin:begin + 100].split("\n", 1)
            maybe_key = len(head) == 1 or "PRIVATE KEY" in head[0]  # its BEGIN line may still be arriving
            if maybe_key and not _PRIVATE_KEY_END.search(text, begin):
                return begin  # an open private-key block is held until it closes
        cut = max(text.rfind(c) for c in " \n\t\r") + 1
        if cut == 0 and len(text) > self.HOLD_MAX:
            cut = len(text) - 512
        return cut


def mask_data(value: Any, _depth: int = 0) -> Any:
    """`mask` applied to every string in a JSON-like value (keys included), for records, events and
    LTM values. Nesting beyond 200 levels is not walked further: such a value is refused elsewhere."""
    if isinstance(value, str):
        return mask(value)
    if _depth > 200:
        return value
    if isinstance(value, dict):
        return {mask(str(k)) if isinstance(k, str) else k: mask_data(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_data(v, _depth + 1) for v in value]
    return value


def data_may_hold_key(value: Any) -> bool:
    """`may_hold_key` over every string `mask_data` would mask in `value` (keys included), in one pass:
    whether masking it whole is worth doing."""
    strings: list[str] = []
    _gather(value, strings, 0)
    return may_hold_key("\n".join(strings))


def _gather(value: Any, out: list[str], depth: int) -> None:
    if isinstance(value, str):
        out.append(value)
    elif depth > 200:  # as deep as mask_data goes
        return
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                out.append(key)
            _gather(item, out, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _gather(item, out, depth + 1)


def redact_fields(value: Any) -> Any:
    """A copy of `value` whose values under secret-looking keys (SECRET_FIELD) are "[redacted]"."""
    if isinstance(value, dict):
        return {key: REDACTED_FIELD if type(key) is str and SECRET_FIELD.search(key) else redact_fields(item)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_fields(item) for item in value]
    return value


class RedactingFilter(logging.Filter):
    """A logging filter that redacts a record's rendered message and exception text."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not format: nothing of ours to redact in it
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
