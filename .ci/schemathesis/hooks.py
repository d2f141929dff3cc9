"""schemathesis hooks for the catalog's contract run: they teach the generators two
grammars a JSON Schema `pattern` states but their generators cannot produce, and keep
the run's admin signed in.

- `entity-tags` (the format of `If-Match` and `If-None-Match`): `*` or a comma-separated
  list of entity tags. For header values, schemathesis's coverage phase only generates
  letters and digits, which can never form a tag, and falls back to sending `0`, which
  the server rightly refuses; this strategy generates tags by the RFC 9110 grammar.
- A list `cursor` is an opaque token the server mints (base64url, bound to the list, its
  sort and its filters, and checked): no generator can produce a valid one, so a
  "schema-valid" generated cursor is always refused with 400, as the API promises.
  Positive test cases therefore leave out a `cursor` the server did not mint (one from a
  real `nextCursor`, through the document's links, stays). Negative cases keep their
  generated cursors, and the server must still refuse them.
- A change feed `since` token names the catalog that minted it: positive cases leave out
  generated ones, and long-polls there wait 1 s (a generated `wait` could hold each case
  a minute). A request for an event stream goes without that `Accept`: a stream never ends.
- An `Idempotency-Key` that the run already sent with another body is rightly refused
  with 422 (the server keeps every key for 24 hours), and generators repeat values (the
  examples phase sends the documented example with every POST): a well-formed key is
  replaced by a fresh one in every case; a malformed one is kept, for the server to refuse.
- A header the contract does not name is no error: HTTP gives a server no way to refuse
  fields it does not know, so a "negative" case whose only flaw is an unknown header
  (`x-schemathesis-unknown-property`) is left out.
- A webhook endpoint's `url` is where the server would send messages: in positive cases
  it is replaced by one under `.invalid` (RFC 6761: never resolves), so the run makes no
  request to whatever host a generator wrote. Negative cases keep theirs, to be refused.
- tus `Upload-Metadata` keys must be unique, which its pattern cannot say: in positive
  cases a key given again is left out (with its value). Negative cases keep theirs.
- The run signs in as the only admin, with its only key (`.ci/contract.sh`). A request
  that would delete or demote that user, or revoke that key, goes to an id no user or
  key has instead: after it, every request would be refused and test nothing.
"""

import base64
import binascii
import os
import re
import uuid

import schemathesis
from hypothesis import strategies as st

_tag = st.from_regex(r'\A(W/)?"[!#-~]{0,12}"\Z')
_numbered = st.integers(min_value=0, max_value=20).map(lambda version: f'"{version}"')
schemathesis.openapi.format(
    "entity-tags",
    st.one_of(st.just("*"), st.lists(st.one_of(_numbered, _tag), min_size=1, max_size=3).map(", ".join)),
)


_WELL_FORMED_KEY = re.compile(r'"[!#-~]+"|[!#-~]+')


_WEBHOOK_BODIES = {("POST", "/v1/webhooks"), ("PATCH", "/v1/webhooks/{id}")}


def _unique_metadata(text):
    """`Upload-Metadata` with each key's first pair only."""
    seen, kept = set(), []
    for pair in text.split(","):
        key = pair.strip().split(" ")[0]
        if key not in seen:
            seen.add(key)
            kept.append(pair)
    return ",".join(kept)


@schemathesis.hook
def map_case(context, case):
    meta = case.meta
    metadata = (case.headers or {}).get("Upload-Metadata")
    if isinstance(metadata, str) and meta is not None and meta.generation.mode.is_positive:
        case.headers["Upload-Metadata"] = _unique_metadata(metadata)
    if (
        (case.operation.method.upper(), case.operation.path) in _WEBHOOK_BODIES
        and meta is not None
        and meta.generation.mode.is_positive
        and isinstance(case.body, dict)
        and isinstance(case.body.get("url"), str)
    ):
        case.body = {**case.body, "url": f"https://receiver.invalid/{uuid.uuid4()}"}
    key = (case.headers or {}).get("Idempotency-Key")
    if isinstance(key, str) and _WELL_FORMED_KEY.fullmatch(key) and len(key) <= 255:
        case.headers["Idempotency-Key"] = str(uuid.uuid4())  # in place: the case's other headers stay as generated
    if (case.headers or {}).get("Accept", "").find("event-stream") >= 0:
        del case.headers["Accept"]  # an event stream never ends: the API tests check streams
    if meta is not None and meta.generation.mode.is_positive and case.query and case.operation.path in ("/v1/changes", "/v1/me/changes"):
        # A sync token is minted by the server and names its catalog: a generated one is
        # rightly refused (400, or 410 for a well-formed one from no catalog). Long-polls
        # wait one second, not up to a minute.
        case.query.pop("since", None)
        if "wait" in case.query:
            case.query["wait"] = 1
    if meta is None or not case.query or "cursor" not in case.query:
        return case
    if meta.generation.mode.is_positive and not _minted(case.query["cursor"]):
        case.query = {name: value for name, value in case.query.items() if name != "cursor"}
    return case


def _minted(cursor):
    """Whether `cursor` has the shape of the server's cursors: base64url of `1␟…`."""
    if not isinstance(cursor, str):
        return False
    try:
        plain = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        return False
    return plain.startswith(b"1\x1f")


# The admin's user and key ids, from .ci/contract.sh, by the operations that would lock it out.
_OWN = {
    ("PATCH", "/v1/users/{id}"): "CATALOG_CI_USER_ID",
    ("DELETE", "/v1/users/{id}"): "CATALOG_CI_USER_ID",
    ("DELETE", "/v1/api-keys/{id}"): "CATALOG_CI_KEY_ID",
}


@schemathesis.hook
def before_call(context, case, kwargs):
    variable = _OWN.get((case.operation.method.upper(), case.operation.path))
    own = os.environ.get(variable) if variable else None
    if own and case.path_parameters and str(case.path_parameters.get("id", "")).lower() == own.lower():
        case.path_parameters = {**case.path_parameters, "id": str(uuid.uuid4())}


# An upload's bytes (tus `application/offset+octet-stream`, the IETF draft's
# `application/partial-upload`) are sent as they are.
@schemathesis.serializer("application/offset+octet-stream", "application/partial-upload")
def _upload_bytes(ctx, value):
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return str(value).encode("utf-8")


@schemathesis.hook
def filter_case(context, case):
    return "x-schemathesis-unknown-property" not in (case.headers or {})
