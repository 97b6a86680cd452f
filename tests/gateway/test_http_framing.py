"""The gateway's connections under hostile or broken clients, on raw sockets: framing that a
proxy could read differently, heads over S3's limits, idle and stalled sockets, clients that
leave mid-body. Each is answered with S3's error XML (or closed without a word when nothing
was asked) and its connection closed; nothing is logged with a traceback, nothing is left
behind. The gateway runs with sub-second timeouts; no test asserts how long anything took."""

from __future__ import annotations

import base64
import hashlib
import logging
import select
import socket
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree as ET

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from ripple.gateway.protocol import HttpLimits
from ripple.gateway.request import Services
from ripple.gateway.server import Gateway, bind
from ripple.identity import create_user
from tests.gateway.conftest import Running
from tests.waiting import wait_for

LIMITS = HttpLimits(header_timeout=0.5, body_timeout=0.5, linger_timeout=5.0)
PATIENCE = 10.0  # seconds a socket waits for the gateway before the test fails


@pytest.fixture
def framed(services: Services, tmp_path: Path) -> Iterator[Running]:
    """A gateway with sub-second header and body timeouts."""
    _, key, secret = create_user(services.db, tmp_path, "alice")
    server = Gateway(services, bind("127.0.0.1:0"), LIMITS)
    server.start()
    wait_for(lambda: server.started, what="the gateway to start")
    try:
        yield Running(server.url, services, key, secret, tmp_path)
    finally:
        server.stop()


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every record of ripple's and uvicorn's loggers (uvicorn's do not reach the root)."""
    caplog.set_level(logging.DEBUG, logger="ripple")
    uvicorn = logging.getLogger("uvicorn")
    uvicorn.addHandler(caplog.handler)
    try:
        yield caplog
    finally:
        uvicorn.removeHandler(caplog.handler)


def assert_quiet(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing above INFO, and no traceback."""
    loud = [
        f"{r.name} {r.levelname}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno > logging.INFO or r.exc_info is not None
    ]
    assert not loud, loud


# --- raw HTTP ---------------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def error(self) -> dict[str, str]:
        root = ET.fromstring(self.body)
        assert root.tag == "Error", self.body
        return {child.tag: child.text or "" for child in root}


def connect(gateway: Running) -> socket.socket:
    host, port = gateway.url.removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=PATIENCE)


def read_to_close(sock: socket.socket) -> bytes:
    """Everything the gateway sends until it closes the connection; fails if it does not
    close within PATIENCE or resets the connection."""
    received = b""
    try:
        while data := sock.recv(65536):
            received += data
    except TimeoutError:
        raise AssertionError(f"still open; received {received[:300]!r}") from None
    except ConnectionResetError:
        raise AssertionError(f"reset; received {received[:300]!r}") from None
    finally:
        sock.close()
    return received


def replies(data: bytes) -> list[Reply]:
    """The HTTP/1.1 responses in `data` (every one carries a Content-Length)."""
    found = []
    while data:
        head, sep, data = data.partition(b"\r\n\r\n")
        assert sep, f"an incomplete response: {head[:300]!r}"
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if status == 100:
            continue
        length = int(headers.get("content-length", "0"))
        found.append(Reply(status, headers, data[:length]))
        data = data[length:]
    return found


def answer_to(gateway: Running, request: bytes) -> Reply:
    """The one response to `request`, after which the connection must be closed."""
    sock = connect(gateway)
    sock.sendall(request)
    got = replies(read_to_close(sock))
    assert len(got) == 1, got
    return got[0]


def assert_refused(reply: Reply, status: int, code: str) -> dict[str, str]:
    assert reply.status == status, reply
    assert reply.headers["connection"] == "close"
    assert reply.headers["content-type"] == "application/xml"
    error = reply.error
    assert error["Code"] == code, error
    assert error["RequestId"] == reply.headers["x-amz-request-id"]
    return error


def signed(
    gateway: Running,
    method: str,
    path: str,
    headers: dict[str, str],
    payload: str = "UNSIGNED-PAYLOAD",
) -> bytes:
    """A request head signed with the gateway user's key, headers exactly as given."""
    host = gateway.url.removeprefix("http://")
    request = AWSRequest(
        method=method,
        url=gateway.url + path,
        headers={"Host": host, "X-Amz-Content-SHA256": payload, **headers},
    )
    SigV4Auth(Credentials(gateway.key.access_key_id, gateway.secret), "s3", "us-east-1").add_auth(
        request
    )
    lines = [f"{method} {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in request.headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def metric(gateway: Running, operation: str, status: int) -> float:
    text = httpx.get(f"{gateway.url}/_ripple/metrics").text
    line = f'ripple_s3_requests_total{{operation="{operation}",status="{status}"}} '
    for row in text.splitlines():
        if row.startswith(line):
            return float(row.removeprefix(line))
    return 0.0


def temporaries(gateway: Running) -> list[Path]:
    return list((gateway.data_dir / "objects" / "tmp").iterdir())


def key_exists(gateway: Running, bucket: str, key: str) -> bool:
    return bool(gateway.client().list_objects_v2(Bucket=bucket, Prefix=key)["KeyCount"])


# --- framing ----------------------------------------------------------------------------------


def test_content_length_with_transfer_encoding_is_refused_and_closed(
    framed: Running, logged: pytest.LogCaptureFixture
) -> None:
    """RFC 9112 §6.1: a proxy may frame such a request by its Content-Length and the gateway
    by its chunks, so what follows must not be read as the next request."""
    framed.client().create_bucket(Bucket="photos")
    smuggled = (
        b"PUT /photos/k HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        b"GET /_ripple/health HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    error = assert_refused(answer_to(framed, smuggled), 400, "BadRequest")
    assert "Transfer-Encoding" in error["Message"]
    assert error["Resource"] == "/photos/k"
    wait_for(lambda: metric(framed, "Unknown", 400) == 1, what="the refusal to be counted")
    assert_quiet(logged)


def test_a_chunked_put_without_a_length_is_411(framed: Running) -> None:
    s3 = framed.client()
    s3.create_bucket(Bucket="photos")
    head = signed(framed, "PUT", "/photos/k", {"Transfer-Encoding": "chunked"})
    reply = answer_to(framed, head + b"5\r\nhello\r\n0\r\n\r\n")
    assert_refused(reply, 411, "MissingContentLength")
    assert not key_exists(framed, "photos", "k")

    # an aws-chunked body says its length in x-amz-decoded-content-length: taken
    crc = base64.b64encode(zlib.crc32(b"hello").to_bytes(4, "big")).decode()
    aws_chunked = f"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:{crc}\r\n\r\n".encode()
    head = signed(
        framed,
        "PUT",
        "/photos/k",
        {
            "Transfer-Encoding": "chunked",
            "Content-Encoding": "aws-chunked",
            "x-amz-decoded-content-length": "5",
            "x-amz-trailer": "x-amz-checksum-crc32",
            "Connection": "close",
        },
        payload="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
    )
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(aws_chunked), aws_chunked)  # HTTP chunks around it
    assert answer_to(framed, head + body).status == 200
    assert s3.get_object(Bucket="photos", Key="k")["Body"].read() == b"hello"


def test_an_object_put_without_any_length_is_411(framed: Running) -> None:
    """No Content-Length and no Transfer-Encoding: HTTP reads no body, S3 refuses the PUT
    rather than storing an empty object (a bucket's PUT needs no length)."""
    s3 = framed.client()
    s3.create_bucket(Bucket="photos")
    upload = s3.create_multipart_upload(Bucket="photos", Key="big")["UploadId"]
    for path in ("/photos/k", f"/photos/big?partNumber=1&uploadId={upload}"):
        head = signed(framed, "PUT", path, {"Connection": "close"})
        assert_refused(answer_to(framed, head), 411, "MissingContentLength")
    assert not key_exists(framed, "photos", "k")
    assert "Parts" not in s3.list_parts(Bucket="photos", Key="big", UploadId=upload)
    bucket = answer_to(framed, signed(framed, "PUT", "/another", {"Connection": "close"}))
    assert bucket.status == 200


# --- heads over S3's limits -------------------------------------------------------------------


def test_a_header_line_over_8_kib_is_refused(framed: Running) -> None:
    fits = b"GET /_ripple/health HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\nConnection: close\r\n\r\n"
    assert answer_to(framed, fits % (b"a" * 8000)).status == 200
    error = assert_refused(
        answer_to(framed, fits % (b"a" * 8200)), 400, "RequestHeaderSectionTooLarge"
    )
    assert error["MaxSizeAllowed"] == "8192"
    assert "x-big" in error["Message"]


def test_a_header_section_over_the_limit_is_refused(framed: Running) -> None:
    headers = b"".join(b"X-Many-%d: %s\r\n" % (i, b"a" * 1000) for i in range(20))
    request = b"GET /_ripple/health HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n"
    error = assert_refused(answer_to(framed, request), 400, "RequestHeaderSectionTooLarge")
    assert error["MaxSizeAllowed"] == "16384"


@pytest.mark.parametrize(
    "headers",
    [
        b"X-Huge: " + b"a" * 1_000_000 + b"\r\n",
        b"".join(b"X-H-%05d: %s\r\n" % (i, b"a" * 85) for i in range(10_485)),
    ],
    ids=["one-header-of-1MB", "10485-headers"],
)
def test_a_megabyte_of_headers_is_answered_not_reset(
    framed: Running, headers: bytes, logged: pytest.LogCaptureFixture
) -> None:
    """The client sends its whole head before reading: the gateway reads it off (lingering
    close), so the client gets the answer instead of a connection reset."""
    request = b"PUT /photos/k HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n"
    assert len(request) > 1_000_000
    assert_refused(answer_to(framed, request), 400, "RequestHeaderSectionTooLarge")
    assert_quiet(logged)


def test_a_body_refused_unread_is_answered_not_reset(
    framed: Running, logged: pytest.LogCaptureFixture
) -> None:
    """An operation refuses an upload before reading its body, from a client that sends it
    all before reading (no Expect: 100-continue): the gateway reads it off and the client
    gets the answer."""
    framed.client().create_bucket(Bucket="photos")
    body = b"x" * (4 << 20)
    head = b"PUT /photos/k HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    assert_refused(answer_to(framed, head + body), 403, "AccessDenied")  # anonymous
    assert not key_exists(framed, "photos", "k")
    assert_quiet(logged)


# --- what h11 refuses -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "status", "code"),
    [
        (
            b"PUT /photos/k HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
            b"Content-Length: 6\r\n\r\nhello!",
            400,
            "BadRequest",
        ),
        (b"GET /photos HTTP/1.1\r\nHost: x\r\nX-Nul: a\x00b\r\n\r\n", 400, "BadRequest"),
        (b"GET /photos HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400, "BadRequest"),
        (b"GET\x01 / HTTP/1.1\r\nHost: x\r\n\r\n", 400, "BadRequest"),
        (
            b"PUT /photos/k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nxyz",
            501,
            "NotImplemented",
        ),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400, "BadRequest"),  # HTTP/2's preface
    ],
    ids=[
        "two-content-lengths",
        "nul-in-a-header",
        "bad-header-line",
        "bad-method",
        "gzip",
        "http2-preface",
    ],
)
def test_what_h11_refuses_is_s3_error_xml(
    framed: Running, request_: bytes, status: int, code: str, logged: pytest.LogCaptureFixture
) -> None:
    assert_refused(answer_to(framed, request_), status, code)
    assert_quiet(logged)


def test_a_malformed_chunked_body_is_s3_error_xml(
    framed: Running, logged: pytest.LogCaptureFixture
) -> None:
    """h11 finds the body's framing broken while the app reads it: the app answers."""
    framed.client().create_bucket(Bucket="photos")
    head = signed(
        framed,
        "PUT",
        "/photos/k",
        {"Transfer-Encoding": "chunked", "x-amz-decoded-content-length": "5"},
    )
    reply = answer_to(framed, head + b"zz\r\nhello\r\n0\r\n\r\n")
    error = assert_refused(reply, 400, "BadRequest")
    assert "chunked" in error["Message"]
    assert error["Resource"] == "/photos/k"
    assert metric(framed, "PutObject", 400) == 1
    assert not key_exists(framed, "photos", "k")
    assert temporaries(framed) == []
    assert_quiet(logged)


# --- timeouts ---------------------------------------------------------------------------------


def test_a_connection_that_sends_nothing_is_closed_without_a_word(framed: Running) -> None:
    assert read_to_close(connect(framed)) == b""


def test_a_request_head_that_stalls_is_request_timeout(framed: Running) -> None:
    """Slowloris: a head sent a byte at a time never completes; it is answered and closed."""
    sock = connect(framed)
    sock.sendall(b"GET /_ripple/health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    for _ in range(int(PATIENCE / 0.05)):  # a byte every 50 ms until the gateway answers
        readable, _, _ = select.select([sock], [], [], 0.05)
        if readable:
            break
        sock.sendall(b"a")
    got = replies(read_to_close(sock))
    assert len(got) == 1, got
    error = assert_refused(got[0], 400, "RequestTimeout")
    assert "idle connections will be closed" in error["Message"]


def test_a_stalled_body_is_request_timeout_and_a_slow_one_is_not(
    framed: Running, logged: pytest.LogCaptureFixture
) -> None:
    s3 = framed.client()
    s3.create_bucket(Bucket="photos")

    # a body trickling in, never idle for a body timeout, over several head timeouts: taken
    sock = connect(framed)
    sock.sendall(signed(framed, "PUT", "/photos/slow", {"Content-Length": "10"}))
    for byte in b"0123456789":
        readable, _, _ = select.select([sock], [], [], LIMITS.body_timeout / 3)
        assert not readable, sock.recv(1000)  # no answer before the body is whole
        sock.sendall(bytes([byte]))
    sock.sendall(b"GET /_ripple/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    got = replies(read_to_close(sock))
    assert [r.status for r in got] == [200, 200]
    assert s3.get_object(Bucket="photos", Key="slow")["Body"].read() == b"0123456789"

    # Content-Length 100, then 5 bytes and silence: S3's RequestTimeout, and closed
    sock = connect(framed)
    sock.sendall(signed(framed, "PUT", "/photos/k", {"Content-Length": "100"}) + b"hello")
    got = replies(read_to_close(sock))
    assert len(got) == 1, got
    error = assert_refused(got[0], 400, "RequestTimeout")
    assert error["Resource"] == "/photos/k"
    assert metric(framed, "PutObject", 400) == 1
    assert not key_exists(framed, "photos", "k")
    assert temporaries(framed) == []
    assert_quiet(logged)


# --- clients that leave -----------------------------------------------------------------------


def _left(gateway: Running, operation: str) -> tuple[bytes, bytes, str]:
    """(head, part of the body) of a request of `operation`, and the operation's name."""
    s3 = gateway.client()
    s3.create_bucket(Bucket="photos")
    if operation == "PutObject":
        head = signed(gateway, "PUT", "/photos/k", {"Content-Length": str(1 << 20)})
        return head, b"x" * 100_000, "PutObject"
    if operation == "UploadPart":
        upload = s3.create_multipart_upload(Bucket="photos", Key="k")["UploadId"]
        path = f"/photos/k?partNumber=1&uploadId={upload}"
        head = signed(gateway, "PUT", path, {"Content-Length": str(1 << 20)})
        return head, b"x" * 100_000, "UploadPart"
    if operation == "PutObjectTagging":
        s3.put_object(Bucket="photos", Key="k", Body=b"kept")
        document = b"<Tagging><TagSet><Tag><Key>a</Key><Value>b</Value></Tag></TagSet></Tagging>"
        md5 = base64.b64encode(hashlib.md5(document).digest()).decode()
        headers = {"Content-Length": str(len(document)), "Content-MD5": md5}
        head = signed(gateway, "PUT", "/photos/k?tagging", headers)
        return head, document[:20], "PutObjectTagging"
    if operation == "CreateTopic":  # the SNS-style API answers itself: still quiet
        form = b"Action=CreateTopic&Name=photos"
        head = signed(gateway, "POST", "/", {"Content-Length": str(len(form) + 1000)})
        return head, form, "Unknown"
    assert operation == "aws-chunked"
    headers = {
        "Transfer-Encoding": "chunked",
        "Content-Encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(1 << 20),
        "x-amz-trailer": "x-amz-checksum-crc32",
    }
    head = signed(gateway, "PUT", "/photos/k", headers, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    chunk = b"%x\r\n%s\r\n" % (100_000, b"x" * 100_000)  # one aws-chunked chunk
    return head, b"%x\r\n%s\r\n" % (len(chunk), chunk), "PutObject"


@pytest.mark.parametrize(
    "operation", ["PutObject", "UploadPart", "PutObjectTagging", "aws-chunked", "CreateTopic"]
)
def test_a_client_that_leaves_mid_body_is_499_quietly_and_leaves_nothing(
    framed: Running, operation: str, logged: pytest.LogCaptureFixture
) -> None:
    head, part, name = _left(framed, operation)
    sock = connect(framed)
    sock.sendall(head + part)
    sock.close()
    wait_for(lambda: metric(framed, name, 499) == 1, what=f"{name} to be counted as 499")
    assert metric(framed, name, 500) == 0
    assert temporaries(framed) == []
    s3 = framed.client()
    if operation == "UploadPart":
        upload = s3.list_multipart_uploads(Bucket="photos")["Uploads"][0]
        assert "Parts" not in s3.list_parts(Bucket="photos", Key="k", UploadId=upload["UploadId"])
    elif operation == "PutObjectTagging":
        assert s3.get_object_tagging(Bucket="photos", Key="k")["TagSet"] == []
    else:
        assert not key_exists(framed, "photos", "k")
    assert_quiet(logged)
    assert any("closed the connection" in r.getMessage() for r in logged.records)


# --- what llhttp refuses, or reads differently from h11 ---------------------------------------


@pytest.mark.parametrize(
    "request_",
    [
        b"GET /photos HTTP/1.1\r\nHost: x\r\nX-A: a\r\n  folded\r\n\r\n",
        b"GET /photos HTTP/1.1\nHost: x\n\n",
        b"GET /photos HTTP/1.1\r\nHost : x\r\n\r\n",
        b"GET /photos HTTP/1.1\r\nHo(st: x\r\n\r\n",
        b"PUT /photos/k HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        b"PUT /photos/k HTTP/1.1\r\nHost: x\r\nContent-Length: 0x10\r\n\r\n",
        b"PUT /photos/k HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551616\r\n\r\n",
        b"PUT /photos/k HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        b"GET /photos\r\n\r\n",  # HTTP/0.9
    ],
    ids=[
        "obs-fold",
        "bare-LF",
        "space-before-colon",
        "bad-header-name",
        "negative-length",
        "hex-length",
        "length-past-2**64",
        "the-same-length-twice",
        "http-0.9",
    ],
)
def test_what_llhttp_refuses_is_s3_error_xml(
    framed: Running, request_: bytes, logged: pytest.LogCaptureFixture
) -> None:
    """llhttp's strict defaults (h11 took the same length twice); nothing here reaches the
    app."""
    assert_refused(answer_to(framed, request_), 400, "BadRequest")
    assert_quiet(logged)


@pytest.mark.parametrize("method", [b"FOO", b"get", b"PROPFIND"])
def test_a_method_s3_does_not_have_is_405_as_the_app_answers(
    framed: Running, method: bytes, logged: pytest.LogCaptureFixture
) -> None:
    """llhttp refuses the methods it does not know (PROPFIND it knows: the app answers)."""
    request = method + b" /photos/k HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    error = assert_refused(answer_to(framed, request), 405, "MethodNotAllowed")
    assert error["Method"] == method.decode()
    assert error["ResourceType"] == "OBJECT"
    assert_quiet(logged)


def test_a_request_line_over_the_limit_is_refused(
    framed: Running, logged: pytest.LogCaptureFixture
) -> None:
    request = b"GET /photos/" + b"k" * 1_000_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    assert_refused(answer_to(framed, request), 400, "RequestHeaderSectionTooLarge")
    assert_quiet(logged)


def test_a_trailer_without_end_is_refused(
    framed: Running, logged: pytest.LogCaptureFixture
) -> None:
    """llhttp holds a trailer line until it ends: one that does not is refused once it
    passes the head's limit, before the body timeout."""
    framed.client().create_bucket(Bucket="photos")
    head = signed(
        framed,
        "PUT",
        "/photos/k",
        {"Transfer-Encoding": "chunked", "x-amz-decoded-content-length": "5"},
    )
    body = b"5\r\nhello\r\n0\r\nX-Flood: " + b"a" * 1_000_000
    error = assert_refused(answer_to(framed, head + body), 400, "BadRequest")
    assert "chunked" in error["Message"]
    assert not key_exists(framed, "photos", "k")
    assert_quiet(logged)


def test_an_upgrade_request_is_served_as_http_1_1(
    framed: Running, logged: pytest.LogCaptureFixture
) -> None:
    """llhttp stops at a head asking for another protocol and skips its body; the gateway
    serves no other, so it reads the body and what follows as HTTP/1.1, as h11 did."""
    s3 = framed.client()
    s3.create_bucket(Bucket="photos")
    upgrade = {"Connection": "Upgrade, HTTP2-Settings", "Upgrade": "h2c", "HTTP2-Settings": "AA"}
    head = signed(framed, "PUT", "/photos/k", {"Content-Length": "5", **upgrade})
    health = b"GET /_ripple/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    sock = connect(framed)
    sock.sendall(head + b"hello" + health)
    assert [r.status for r in replies(read_to_close(sock))] == [200, 200]
    assert s3.get_object(Bucket="photos", Key="k")["Body"].read() == b"hello"

    sock = connect(framed)  # CONNECT, which llhttp reads as a tunnel's start
    sock.sendall(b"CONNECT photos:443 HTTP/1.1\r\nHost: x\r\n\r\n" + health)
    assert [r.status for r in replies(read_to_close(sock))] == [405, 200]
    assert_quiet(logged)


def test_a_malformed_request_behind_pipelined_ones_is_answered_after_them(
    framed: Running, logged: pytest.LogCaptureFixture
) -> None:
    """llhttp reads pipelined heads as they arrive, h11 after each response: the refusal
    waits for the answers before it."""
    health = b"GET /_ripple/health HTTP/1.1\r\nHost: x\r\n\r\n"
    got = replies(read_to_close(_sent(framed, health * 2 + b"GARBAGE\r\n\r\n")))
    assert [r.status for r in got] == [200, 200, 400]
    assert_refused(got[2], 400, "BadRequest")
    assert_quiet(logged)


def _sent(gateway: Running, data: bytes) -> socket.socket:
    sock = connect(gateway)
    sock.sendall(data)
    return sock
