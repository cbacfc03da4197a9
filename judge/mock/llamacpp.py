"""The ``llamacpp`` and ``llamacpp-python`` mock profiles, recorded from the real servers.

The other profiles were written from documentation; these two were not. ``record``
sends one request of each kind below to a real server (llama.cpp's ``llama-server`` or
llama-cpp-python's, started by :mod:`drscore.judge.local_llama` with a tiny model) and
writes down what came back: the status, the headers that matter to a client, the body's
shape (field names and types), and for errors the body itself with the request's numbers
turned into placeholders (``{window}``, ``{prompt}``, ``{cap}``, ``{total}``). The mock
answers from that file (``recordings/NAME.json``), and a test records the real servers
afresh and compares (tests/judge/mock/test_llamacpp_profiles.py), so the profile cannot
drift from the server it stands for.

    python -m drscore.judge.mock.llamacpp record [--out DIR]    (scripts/record-llama-profiles)

Request kinds: ``models`` (GET /v1/models), ``props`` (GET /props), ``json_schema``
(OpenAI's structured outputs), ``json_object`` (the JSON mode with a schema), ``plain``
(no response format, a small cap), ``completion_cap`` (only ``max_completion_tokens``),
``over_window`` (a prompt longer than the window), ``clamped`` (a prompt that fits with a
cap that does not), ``bad_temperature``, ``malformed_json``, ``unknown_model``,
``empty_messages``.
"""
from __future__ import annotations

import argparse
import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import aiohttp
import orjson

RECORDINGS = Path(__file__).resolve().parent / "recordings"
NAMES = {"llama-server": "llamacpp", "llama-cpp-python": "llamacpp-python"}
# The window the recorder serves with, and the caps it sends: numbers distinct enough to
# be told apart in an error message.
WINDOW = 2048
CAP = 7
CLAMP_CAP = 1500
# Headers a client reads (their presence, and the value where it names the server).
_HEADERS_VALUE = ("content-type", "server")
_HEADERS_PRESENT = ("openai-processing-ms", "retry-after", "x-ratelimit-limit-requests",
                    "x-ratelimit-remaining-requests", "access-control-allow-origin")
_SCHEMA = {"type": "object", "properties": {"reason": {"type": "string", "maxLength": 20},
                                           "score": {"type": "integer", "minimum": 0, "maximum": 4}},
           "required": ["reason", "score"], "additionalProperties": False}


# A traceback in an error body names files on the recording machine.
_paths = re.compile(r'File (\\?)"[^"\\]*\\?"')


def shape(value: Any) -> Any:
    """The structure of a JSON value: field names kept, values replaced by their type."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if value is None:
        return "null"
    return "str"


def template(raw: str, numbers: dict[str, int]) -> str:
    """``raw`` with each number of ``numbers`` (standing alone) as ``{name}``."""
    for name, n in sorted(numbers.items(), key=lambda kv: -len(str(kv[1]))):
        raw = re.sub(rf"(?<![\d.]){n}(?![\d.])", "{" + name + "}", raw)
    return raw


def fill(text: str, **numbers: int) -> str:
    """A recorded template with the request's numbers put back."""
    for name, n in numbers.items():
        text = text.replace("{" + name + "}", str(n))
    return text


def _words(n: int) -> str:
    return " ".join(["the report"] * (n // 2))


def _requests(model: str) -> dict[str, tuple[str, str, Any]]:
    """Kind -> (method, path, body) of each recorded request."""
    small = [{"role": "system", "content": "You are a judge."}, {"role": "user", "content": "Rate the report."}]
    base = {"model": model, "messages": small, "temperature": 0.0, "max_tokens": CAP}
    # The tiny model ends at once without a grammar; with its end-of-text token banned
    # (logit_bias, which both servers take) it writes until a cap or the window stops it.
    endless = {**base, "logit_bias": {"2": -100}}
    schema_rf = {"type": "json_schema", "json_schema": {"name": "V", "schema": _SCHEMA, "strict": True}}
    return {
        "models": ("GET", "/v1/models", None),
        "props": ("GET", "/props", None),
        "json_schema": ("POST", "/v1/chat/completions", {**base, "max_tokens": 60, "response_format": schema_rf}),
        "json_object": ("POST", "/v1/chat/completions",
                        {**base, "max_tokens": 60, "response_format": {"type": "json_object", "schema": _SCHEMA}}),
        "plain": ("POST", "/v1/chat/completions", endless),
        "completion_cap": ("POST", "/v1/chat/completions",
                           {**{k: v for k, v in endless.items() if k != "max_tokens"}, "max_completion_tokens": CAP}),
        "over_window": ("POST", "/v1/chat/completions",
                        {**base, "messages": [{"role": "user", "content": _words(WINDOW * 2)}]}),
        "clamped": ("POST", "/v1/chat/completions",
                    {**endless, "max_tokens": CLAMP_CAP,
                     "messages": [{"role": "user", "content": _words(WINDOW - 200)}]}),
        "bad_temperature": ("POST", "/v1/chat/completions", {**base, "temperature": "hot"}),
        "malformed_json": ("POST", "/v1/chat/completions", b'{"model": "x", "messages": ['),
        "unknown_model": ("POST", "/v1/chat/completions", {**base, "model": "no-such-model"}),
        "empty_messages": ("POST", "/v1/chat/completions", {**base, "messages": []}),
    }


async def _tokens(session: aiohttp.ClientSession, root: str, text: str) -> int | None:
    """The server's own count of ``text`` (llama-server's /tokenize; llama-cpp-python's
    /extras/tokenize), so an error's prompt size can be templated."""
    for path, body in (("/tokenize", {"content": text}), ("/extras/tokenize", {"input": text})):
        try:
            async with session.post(root + path, json=body) as r:
                if r.status == 200:
                    obj = await r.json()
                    return len(obj["tokens"])
        except (aiohttp.ClientError, KeyError, TypeError, ValueError):
            continue
    return None


async def record(root: str, model: str, *, server: str) -> dict[str, Any]:
    """Send every request kind to the server at ``root`` (no ``/v1``) and return the recording."""
    out: dict[str, Any] = {"server": server, "window": WINDOW, "kinds": {}}
    # A connection of its own per request: one the server closed after an error must not
    # be taken for the next request's answer.
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300),
                                     connector=aiohttp.TCPConnector(force_close=True)) as session:
        for kind, (method, path, body) in _requests(model).items():
            data = body if isinstance(body, bytes) else (orjson.dumps(body) if body is not None else None)
            try:
                async with session.request(method, root + path, data=data,
                                           headers={"Content-Type": "application/json"}) as r:
                    raw = await r.read()
                    status, headers = r.status, r.headers
            except aiohttp.ClientError as e:  # the server dropped the connection: that is its answer
                out["kinds"][kind] = {"status": 0, "dropped": type(e).__name__, "headers": {}, "shape": "none"}
                continue
            entry: dict[str, Any] = {"status": status, "headers": {
                **{h: headers[h] for h in _HEADERS_VALUE if h in headers},
                **{h: "present" for h in _HEADERS_PRESENT if h in headers}}}
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                obj = None
            entry["shape"] = shape(obj) if obj is not None else "text"
            if kind in ("plain", "completion_cap", "clamped", "json_schema", "json_object") and status == 200:
                usage = obj.get("usage") or {}
                entry["finish_reason"] = obj["choices"][0].get("finish_reason")
                sent_cap = (body or {}).get("max_tokens") or (body or {}).get("max_completion_tokens")
                entry["cap_honoured"] = usage.get("completion_tokens", 0) <= sent_cap
                if kind == "clamped":  # where the answer stopped: at the window, or at the cap?
                    entry["stopped_at_window"] = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0) \
                        >= WINDOW - 8
            if kind == "models" and obj is not None:
                entry["owned_by"] = obj["data"][0].get("owned_by")
                meta = obj["data"][0].get("meta")
                entry["states_window"] = isinstance(meta, dict) and meta.get("n_ctx") == WINDOW
            if status >= 400:
                numbers = {"window": WINDOW, "cap": CAP}
                if kind == "over_window":
                    text = raw.decode("utf-8", "replace")
                    found = [int(x) for x in re.findall(r"\d+", text)]
                    # OpenAI's wording states prompt + cap = total; llama-server the prompt alone,
                    # the server's own count of the content (give or take the template's tokens)
                    pair = next((n for n in found if n + CAP in found), None)
                    if pair is not None:
                        numbers["prompt"], numbers["total"] = pair, pair + CAP
                    else:
                        prompt = await _tokens(session, root, body["messages"][0]["content"])
                        near = [n for n in found if prompt is not None and abs(n - prompt) <= 64 and n != WINDOW]
                        if near:
                            numbers["prompt"] = near[0]
                entry["body"] = _paths.sub(r'File \1"{path}\1"', template(raw.decode("utf-8", "replace"), numbers))
            out["kinds"][kind] = entry
    return out


def recording(name: str) -> dict[str, Any]:
    """The committed recording of profile ``name`` (``llamacpp`` or ``llamacpp-python``)."""
    return orjson.loads((RECORDINGS / f"{name}.json").read_bytes())


def comparable(rec: dict[str, Any]) -> dict[str, Any]:
    """What a fresh recording must match: everything but values that vary by machine or
    run (the pydantic documentation link carries its version)."""
    out = orjson.loads(orjson.dumps(rec))
    for entry in out["kinds"].values():
        if "body" in entry:
            entry["body"] = re.sub(r"errors\.pydantic\.dev/[\d.]+/", "errors.pydantic.dev/V/", entry["body"])
    return out


async def record_all(out_dir: Path) -> list[Path]:
    """Start each real server with a tiny model and write its recording into ``out_dir``."""
    import tempfile

    from drscore.judge.local_llama import LocalLlama, LocalLlamaCppPython, write_tiny_gguf

    from drscore import prompts

    texts = [p.read_text(encoding="utf-8") for p in sorted(Path(prompts.__file__).parent.glob("*.md"))]
    written = []
    with tempfile.TemporaryDirectory(prefix="drscore-record-") as tmp:
        model = write_tiny_gguf(Path(tmp) / "tiny.gguf", texts, context=WINDOW * 4)
        for cls in (LocalLlama, LocalLlamaCppPython):
            with cls(model, context=WINDOW, slots=1, alias="tiny") as server:
                rec = await record(server.root, "tiny", server=cls.kind)
            path = out_dir / f"{NAMES[cls.kind]}.json"
            path.write_bytes(orjson.dumps(rec, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m drscore.judge.mock.llamacpp")
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record both real servers into the profiles' files")
    rec.add_argument("--out", type=Path, default=RECORDINGS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for path in asyncio.run(record_all(args.out)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())


# --- the mock's side: answering as the recording says --------------------------------------

SLOTS = 4  # what the mock's llama-server says it has (/props total_slots)


class Recorded:
    """One recorded profile, read once: the behaviours the mock derives from it."""

    def __init__(self, name: str) -> None:
        self.name = name
        rec = recording(name)
        self.kinds: dict[str, Any] = rec["kinds"]
        k = self.kinds
        self.server = rec["server"]
        self.json_schema_ok = k["json_schema"]["status"] == 200
        self.completion_cap_ignored = k["completion_cap"]["status"] == 200 and not k["completion_cap"]["cap_honoured"]
        self.clamps = k["clamped"]["status"] == 200 and k["clamped"].get("finish_reason") == "length"
        self.models_owner = k["models"].get("owned_by")
        self.states_window = bool(k["models"].get("states_window"))
        self.has_props = k["props"]["status"] == 200
        self.serial = self.server == "llama-cpp-python"  # one lock around its model (its source)

    def error(self, kind: str, **numbers: int) -> tuple[int, bytes]:
        entry = self.kinds[kind]
        return entry["status"], fill(entry["body"], **numbers).encode("utf-8")

    def headers(self, kind: str) -> dict[str, str]:
        """The recorded headers a client reads (values that vary, such as timings, as "0")."""
        out = {}
        for name, value in self.kinds[kind]["headers"].items():
            if name == "content-type":
                continue
            out[name] = "0" if value == "present" else value
        return out

    def refusal(self, payload: Any) -> tuple[int, bytes] | None:
        """The recorded error for a body this server refuses before answering, or None."""
        if not isinstance(payload, dict):
            return None
        rf = payload.get("response_format")
        if isinstance(rf, dict) and rf.get("type") == "json_schema" and not self.json_schema_ok:
            return self.error("json_schema")
        temperature = payload.get("temperature")
        if temperature is not None and not isinstance(temperature, (int, float)):
            return self.error("bad_temperature")
        return None

    def ignored_fields(self, payload: dict[str, Any]) -> dict[str, Any]:
        if self.completion_cap_ignored and "max_completion_tokens" in payload:
            return {k: v for k, v in payload.items() if k != "max_completion_tokens"}
        return payload

    def models(self, model: str, window: int) -> tuple[dict[str, Any], dict[str, str]]:
        entry: dict[str, Any] = {"id": model, "object": "model", "created": 0, "owned_by": self.models_owner}
        if self.states_window:
            entry["meta"] = {"n_ctx": window, "n_ctx_train": window, "n_vocab": 0, "n_params": 0}
        return {"object": "list", "data": [entry]}, self.headers("models")


_LOADED: dict[str, Recorded] = {}


def recorded(name: str) -> Recorded | None:
    """The recorded profile ``name``, or None for the profiles written from documentation."""
    if name not in NAMES.values():
        return None
    if name not in _LOADED:
        _LOADED[name] = Recorded(name)
    return _LOADED[name]
