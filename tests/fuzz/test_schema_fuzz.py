"""Schema fuzzing (docs/operations.md, reliability C): schemathesis generates requests for every
operation of the app's OpenAPI schema, valid and invalid, with `auth.mode: none` and `auth.mode:
keys`, and sends them to the real app (uvicorn on 127.0.0.1 with its lifespan running, a fresh
SQLite file, a `ScriptedProvider` as the model). No answer is a 5xx, documented answers match their
schema, and every refusal has the one error shape.

The 500s it found (an empty tenant update, a retried first message, integers beyond 64 bits)
are fixed; the tests at the end of this file keep them fixed."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import hypothesis
import pytest
import schemathesis
from anyio.from_thread import BlockingPortal, start_blocking_portal
from fastapi import FastAPI
from hypothesis import strategies as st
from schemathesis import APIOperation, Case, CheckContext, GenerationMode, Response
from schemathesis.specs.openapi import checks as openapi_checks

from backend.app import create_app
from backend.providers.scripted import ScriptedProvider
from tests.api.test_auth import ADMIN_KEY, bearer, make_tenant
from tests.conftest import make_settings, serve

# Per operation and auth mode; with the seed fixed per operation every run sends the same
# requests. The directory takes about 30 s on two cores.
FUZZ_SETTINGS = hypothesis.settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=list(hypothesis.HealthCheck),
    phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate, hypothesis.Phase.shrink],
)
SACRIFICIAL_TENANT = "fuzz-target"  # admin operations may disable or rename it; nobody chats as it
TURN_OPERATIONS = {"POST /api/chat/send", "POST /v1/chat/completions"}


def is_error_envelope(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """Every refusal is `{"error": {"code", "message"}}` (the /v1 facade adds OpenAI's `type`).
    The schema cannot say so: FastAPI documents its own 422 shape, whose fields are optional."""
    if response.status_code < 400:
        return None
    try:
        body = response.json()
    except ValueError:
        raise AssertionError(f"not JSON: {response.text[:200]!r}") from None
    assert isinstance(body, dict) and set(body) == {"error"}, f"not the error envelope: {body!r}"
    error = body["error"]
    assert isinstance(error, dict), f"not the error envelope: {body!r}"
    assert isinstance(error.get("code"), str) and isinstance(error.get("message"), str), body
    assert set(error) <= {"code", "message", "type"}, f"unexpected error fields: {body!r}"
    return None


# Left out, because they fail by design rather than on a defect:
# - status_code_conformance: FastAPI documents only 2xx and 422, while the routes answer 400,
#   401, 403, 404, 409, 413 and 429 through the app's one error mapping.
# - positive_data_acceptance: a well-formed request for an unknown session, entry, tenant or
#   key is a 404 (or 400 `session_required`, 409 for an existing tenant id).
# - ignored_auth and the stateful checks: the schema declares no security scheme (the key
#   travels in a header hidden from it) and no links.
# - unsupported_method, missing_required_header: they judge only the cases of schemathesis's
#   coverage phase, which this file does not run (see `fuzz`).
CHECKS = [
    schemathesis.checks.not_a_server_error,
    openapi_checks.content_type_conformance,
    openapi_checks.response_headers_conformance,
    openapi_checks.response_schema_conformance,
    openapi_checks.negative_data_rejection,
    is_error_envelope,
]


@dataclass
class Fuzzing:
    """One served app, the credentials that reach past its auth, and the tally of the run."""

    mode: str
    base_url: str
    headers_for: Callable[[str], dict[str, str]]
    known: dict[str, str]
    operations: set[str] = field(default_factory=set)
    requests: int = 0
    server_errors: int = 0

    def send(self, case: Case) -> None:
        headers = self.headers_for(case.operation.path)
        response = case.call(headers=headers, timeout=30)
        self.operations.add(case.operation.label)
        self.requests += 1
        if response.status_code >= 500:
            self.server_errors += 1
        case.validate_response(response, checks=CHECKS, headers=headers)

    def figure(self) -> str:
        return (
            f"schema fuzz, auth.mode={self.mode}: {len(self.operations)} operations tried, "
            f"{self.requests} requests made, {self.server_errors} 5xx seen"
        )


@contextmanager
def served_in_thread(app: FastAPI) -> Iterator[tuple[BlockingPortal, httpx.AsyncClient]]:
    """`serve(app)` on an event loop of its own thread: schemathesis's calls block, so the
    server cannot share the test's thread."""
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(serve(app)) as client,
    ):
        yield portal, client


async def seed(client: httpx.AsyncClient, tenant_headers: dict[str, str]) -> dict[str, str]:
    """Records whose ids the generator aims at, next to the random ids that miss, by the
    names of the parameters that take them."""
    sent = await client.post("/api/chat/send", json={"message": "hello"}, headers=tenant_headers)
    assert sent.status_code == 200, sent.text
    memory = await client.put(
        "/api/memory",
        json={"content": "2024-05-01|manual|likes green tea\n"},
        headers=tenant_headers,
    )
    assert memory.status_code == 200, memory.text
    key = await make_tenant(client, SACRIFICIAL_TENANT)
    return {
        "session_id": sent.json()["session_id"],
        "entry_id": memory.json()["entries"][0]["id"],
        "tenant_id": SACRIFICIAL_TENANT,
        "key_id": key["id"],
        "X-Tally-Session": "fuzz-session",
    }


@pytest.fixture(params=["none", "keys"])
def fuzzing(
    request: pytest.FixtureRequest,
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Iterator[Fuzzing]:
    mode: str = request.param
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN_KEY)
    settings = make_settings(sqlite_url, tmp_path, auth={"mode": mode})
    app = create_app(settings, provider=ScriptedProvider(replies=["ok"]))
    with served_in_thread(app) as (portal, client):
        tenant_headers: dict[str, str] = {}
        if mode == "keys":
            tenant_headers = bearer(portal.call(make_tenant, client, "fuzz")["key"])
        known = portal.call(seed, client, tenant_headers)

        def headers_for(path: str) -> dict[str, str]:
            """The operator's key where only the operator gets in, the tenant's elsewhere."""
            if mode == "keys" and (path.startswith("/api/admin/") or path == "/metrics"):
                return bearer(ADMIN_KEY)
            return tenant_headers

        fuzzing = Fuzzing(mode, str(client.base_url), headers_for, known)
        yield fuzzing
    with capsys.disabled():
        print(f"\n{fuzzing.figure()}")


def requests_for(operation: APIOperation, known: dict[str, str]) -> st.SearchStrategy[Case]:
    """Valid and invalid requests, and valid ones whose ids and session name are known."""
    has_inputs = bool(
        operation.path_parameters or operation.query or operation.headers or operation.body
    )
    modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE] if has_inputs else []
    options = [operation.as_strategy(generation_mode=mode) for mode in modes]
    path = {p.name: known[p.name] for p in operation.path_parameters if p.name in known}
    headers = {p.name: known[p.name] for p in operation.headers if p.name in known}
    if path or headers or operation.label in TURN_OPERATIONS or not options:
        aimed = operation.as_strategy(path_parameters=path, headers=headers)
        options.append(aimed.map(lambda case: aim_turn(case, known)))
    return st.one_of(options)


def aim_turn(case: Case, known: dict[str, str]) -> Case:
    """A valid turn request aimed past the refusals that stop most generated ones: a send on
    the seeded session (which reads its window), a facade request ending in a user message."""
    body = case.body
    if case.operation.label == "POST /api/chat/send" and isinstance(body, dict):
        body["session_id"] = known["session_id"]
    if case.operation.label == "POST /v1/chat/completions" and isinstance(body, dict):
        messages = body.get("messages")
        if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
            messages[-1]["role"] = "user"
    return case


def destroys_seeded_records(operation: APIOperation) -> int:
    """Deleting runs after everything else, and replacing MEMORY.md after deleting its entry,
    so that the other operations still find the seeded records."""
    if operation.label == "PUT /api/memory":
        return 2
    return 1 if operation.method.upper() == "DELETE" else 0


def fuzz(operation: APIOperation, fuzzing: Fuzzing) -> None:
    """Schemathesis's fuzzing phase for one operation, driven by Hypothesis here: its pytest
    runner (`schemathesis.pytest.from_fixture`, which adds the coverage phase) fails under
    pytest 9.2 on `request.node._nodeid`."""

    @FUZZ_SETTINGS
    @hypothesis.seed(zlib.crc32(f"{fuzzing.mode} {operation.label}".encode()))
    @hypothesis.given(case=requests_for(operation, fuzzing.known))
    def run(case: Case) -> None:
        fuzzing.send(case)

    run()


@pytest.mark.slow
def test_no_operation_answers_with_a_server_error(
    fuzzing: Fuzzing, subtests: pytest.Subtests
) -> None:
    config = schemathesis.Config.from_dict({})  # this file's settings only: no schemathesis.toml
    schema = schemathesis.openapi.from_url(
        f"{fuzzing.base_url}/openapi.json",
        config=config,
        headers=bearer(ADMIN_KEY),  # with keys, the schema is for administrators only
    )
    operations = sorted(
        (result.ok() for result in schema.get_all_operations()), key=destroys_seeded_records
    )
    assert len(operations) >= 27  # the API's operations today: a schema that lost some fails
    for operation in operations:
        with subtests.test(msg=operation.label):
            fuzz(operation, fuzzing)
    assert fuzzing.operations == {operation.label for operation in operations}
    assert fuzzing.server_errors == 0


@pytest.fixture
async def client(sqlite_url: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(sqlite_url, tmp_path)
    async with serve(create_app(settings, provider=ScriptedProvider(replies=["ok"]))) as client:
        yield client


async def test_an_empty_tenant_update_changes_nothing(client: httpx.AsyncClient) -> None:
    response = await client.patch("/api/admin/tenants/default", json={})
    missing = await client.patch("/api/admin/tenants/nobody", json={})
    assert response.status_code == 200 and response.json()["id"] == "default"
    assert missing.status_code == 404


async def test_a_retried_first_message_gets_the_first_answer(client: httpx.AsyncClient) -> None:
    retry = {"Idempotency-Key": "retry-1"}
    first = await client.post("/api/chat/send", json={"message": "hello"}, headers=retry)
    again = await client.post("/api/chat/send", json={"message": "hello"}, headers=retry)
    other = await client.post("/api/chat/sessions", json={})
    elsewhere = await client.post(
        "/api/chat/send",
        json={"session_id": other.json()["id"], "message": "hello"},
        headers=retry,
    )
    blank = [
        await client.post("/api/chat/send", json={"message": "hi"}, headers={"Idempotency-Key": ""})
        for _ in range(2)
    ]
    sessions = (await client.get("/api/chat/sessions")).json()
    assert first.status_code == again.status_code == 200, again.text
    assert again.json()["session_id"] == first.json()["session_id"]
    assert again.json()["assistant_message_id"] == first.json()["assistant_message_id"]
    assert (elsewhere.status_code, elsewhere.json()["error"]["code"]) == (
        409,
        "idempotency_key_reused",
    )
    assert [r.status_code for r in blank] == [200, 200]  # a blank key is no key
    assert sessions["total"] == 4  # the retry made no session of its own


@pytest.mark.parametrize(
    "path",
    [
        "/api/chat/sessions/{session_id}/messages?before_id=9223372036854775808",
        "/api/chat/sessions/{session_id}/messages?before_id=-9223372036854775809",
        "/api/chat/sessions?offset=9223372036854775808",
    ],
)
async def test_an_integer_beyond_64_bits_is_refused(client: httpx.AsyncClient, path: str) -> None:
    sent = await client.post("/api/chat/send", json={"message": "hello"})
    response = await client.get(path.format(session_id=sent.json()["session_id"]))
    assert (response.status_code, response.json()["error"]["code"]) == (422, "invalid_request")
